//! Agreeing on an era and a revision with a server, per the specification's fallback rules.
//!
//! Modern first (`server/discover`), then legacy `initialize`; which failures mean "this server is
//! legacy" and which mean "this server is broken" is decided here and nowhere else.

use std::sync::Arc;
use std::time::Duration;

use manifold_wire::revision::{legacy_client_accepts, modern_client_choice};
use manifold_wire::{Era, Kind, Message, Revision, meta};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::connection::{CallOptions, Connection, ModernMeta, lock};
use crate::error::UpstreamError;

/// How long a `server/discover` probe may take before the server is taken for legacy.
pub const DISCOVER_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `initialize` may take.
pub const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which era to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EraChoice {
    /// Modern first, legacy on the specification's fallback signals.
    #[default]
    Auto,
    Legacy,
    Modern,
}

impl std::str::FromStr for EraChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(EraChoice::Auto),
            "legacy" => Ok(EraChoice::Legacy),
            "modern" => Ok(EraChoice::Modern),
            other => Err(format!("unknown era {other:?}; use auto, legacy or modern")),
        }
    }
}

/// Who we are and what we offer, as told to servers.
#[derive(Debug, Clone)]
pub struct ClientIdentity {
    pub name: String,
    pub version: String,
    /// Raw JSON object of client capabilities.
    pub capabilities: String,
}

impl Default for ClientIdentity {
    fn default() -> Self {
        ClientIdentity {
            name: "manifold".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            capabilities: "{}".to_owned(),
        }
    }
}

impl ClientIdentity {
    fn info_json(&self) -> String {
        format!(
            "{{\"name\":{},\"version\":{}}}",
            manifold_wire::id::json_string(&self.name),
            manifold_wire::id::json_string(&self.version)
        )
    }
}

/// What negotiation learnt about the server.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub era: Era,
    pub revision: Revision,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    /// Raw JSON object of server capabilities.
    pub capabilities: String,
    pub instructions: Option<String>,
    /// The raw `initialize` or `server/discover` result.
    pub raw: String,
}

#[derive(Deserialize)]
struct ServerInfoView {
    name: Option<String>,
    version: Option<String>,
}

#[derive(Deserialize)]
struct InitializeView<'a> {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
    #[serde(borrow)]
    capabilities: Option<&'a RawValue>,
    #[serde(rename = "serverInfo")]
    server_info: Option<ServerInfoView>,
    instructions: Option<String>,
}

#[derive(Deserialize)]
struct DiscoverView<'a> {
    #[serde(rename = "supportedVersions")]
    supported_versions: Vec<String>,
    #[serde(borrow)]
    capabilities: Option<&'a RawValue>,
    #[serde(rename = "serverInfo")]
    server_info: Option<ServerInfoView>,
    instructions: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<DiscoverMeta>,
}

/// Where the 2026-07-28 revision puts the server's identity.
#[derive(Deserialize)]
struct DiscoverMeta {
    #[serde(rename = "io.modelcontextprotocol/serverInfo")]
    server_info: Option<ServerInfoView>,
}

/// Why a modern probe failed: a legacy signal, or a real failure.
enum ProbeOutcome {
    Modern(PeerInfo),
    Legacy(String),
}

impl Connection {
    /// Negotiates the era and revision. Call once, right after the transport is up.
    pub async fn negotiate(
        &self,
        choice: EraChoice,
        client: &ClientIdentity,
    ) -> Result<PeerInfo, UpstreamError> {
        if choice != EraChoice::Legacy {
            match self.probe_modern(client, choice).await? {
                ProbeOutcome::Modern(info) => return Ok(info),
                ProbeOutcome::Legacy(why) if choice == EraChoice::Modern => {
                    return Err(UpstreamError::Negotiation {
                        server: self.inner.server.clone(),
                        detail: format!(
                            "the modern era was required but the server does not speak it ({why}); try --era legacy or auto"
                        ),
                    });
                }
                ProbeOutcome::Legacy(why) => {
                    tracing::debug!(server = %self.inner.server, reason = %why, "falling back to the legacy era");
                }
            }
        }
        match self.initialize_legacy(client).await {
            // A modern server that was merely slow to answer the probe has answered it meanwhile
            // and now refuses initialize with UnsupportedProtocolVersion: it is modern after all.
            Err(UpstreamError::Rpc { error, .. })
                if choice == EraChoice::Auto
                    && error.code
                        == manifold_wire::ErrorCode::UnsupportedProtocolVersion.code() =>
            {
                tracing::debug!(server = %self.inner.server, "initialize refused with -32022; probing the modern era again");
                match self.probe_modern(client, EraChoice::Modern).await? {
                    ProbeOutcome::Modern(info) => Ok(info),
                    ProbeOutcome::Legacy(why) => Err(UpstreamError::Negotiation {
                        server: self.inner.server.clone(),
                        detail: format!(
                            "the server refused initialize with -32022 and server/discover too ({why})"
                        ),
                    }),
                }
            }
            other => other,
        }
    }

    async fn probe_modern(
        &self,
        client: &ClientIdentity,
        choice: EraChoice,
    ) -> Result<ProbeOutcome, UpstreamError> {
        *lock(&self.inner.modern) = Some(Arc::new(ModernMeta::new(
            Revision::LATEST,
            client.capabilities.clone(),
            client.info_json(),
        )));
        let timeout = if choice == EraChoice::Modern {
            INITIALIZE_TIMEOUT
        } else {
            DISCOVER_PROBE_TIMEOUT
        };
        let mut outcome = self
            .call(
                meta::method::DISCOVER,
                Some("{}"),
                CallOptions::with_timeout(timeout),
            )
            .await;
        // -32022 names the revisions the server does speak: when one of them is modern and ours,
        // the specification wants the request retried with it, not a fall back to `initialize`.
        if let Ok(m) = &outcome
            && let Some(revision) = retry_revision(m)
        {
            tracing::debug!(server = %self.inner.server, revision = %revision.as_str(), "server/discover refused our revision; retrying with one it supports");
            self.inner.set_modern_revision(revision);
            outcome = self
                .call(
                    meta::method::DISCOVER,
                    Some("{}"),
                    CallOptions::with_timeout(timeout),
                )
                .await;
        }
        let legacy = |why: String| {
            *lock(&self.inner.modern) = None;
            Ok(ProbeOutcome::Legacy(why))
        };
        let response = match outcome {
            Ok(m) => m,
            Err(UpstreamError::Timeout { .. }) => {
                return legacy("server/discover timed out".to_owned());
            }
            Err(UpstreamError::Http { status, body, .. }) if (400..500).contains(&status) => {
                return legacy(format!("HTTP {status} to server/discover: {body}"));
            }
            Err(UpstreamError::Protocol { detail, .. }) => {
                return legacy(format!("server/discover got a malformed answer: {detail}"));
            }
            Err(e) => return Err(e),
        };
        if response.kind() == Kind::Error {
            let error = response
                .error_object()
                .map(|e| e.to_string())
                .unwrap_or_default();
            return legacy(format!("server/discover answered an error: {error}"));
        }
        let raw = response.result_raw().unwrap_or("null");
        let view: DiscoverView<'_> = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                return legacy(format!(
                    "server/discover result is not a discovery result: {e}"
                ));
            }
        };
        let Some(revision) = modern_client_choice(&view.supported_versions) else {
            return legacy(format!(
                "the server supports {:?}, no modern revision this client speaks",
                view.supported_versions
            ));
        };
        self.inner.set_modern_revision(revision);
        self.inner.transport.negotiated(revision);
        let server_info = view
            .server_info
            .as_ref()
            .or_else(|| view.meta.as_ref().and_then(|m| m.server_info.as_ref()));
        Ok(ProbeOutcome::Modern(PeerInfo {
            era: Era::Modern,
            revision,
            server_name: server_info.and_then(|s| s.name.clone()),
            server_version: server_info.and_then(|s| s.version.clone()),
            capabilities: view.capabilities.map_or("{}", |c| c.get()).to_owned(),
            instructions: view.instructions,
            raw: raw.to_owned(),
        }))
    }

    async fn initialize_legacy(&self, client: &ClientIdentity) -> Result<PeerInfo, UpstreamError> {
        let params = format!(
            "{{\"protocolVersion\":\"{}\",\"capabilities\":{},\"clientInfo\":{}}}",
            Revision::LATEST_LEGACY,
            client.capabilities,
            client.info_json()
        );
        let response = self
            .call(
                meta::method::INITIALIZE,
                Some(&params),
                CallOptions::with_timeout(INITIALIZE_TIMEOUT),
            )
            .await?;
        let negotiation = |detail: String| UpstreamError::Negotiation {
            server: self.inner.server.clone(),
            detail,
        };
        if response.kind() == Kind::Error {
            return Err(UpstreamError::Rpc {
                server: self.inner.server.clone(),
                method: meta::method::INITIALIZE.to_owned(),
                error: response.error_object().unwrap_or_else(|| {
                    manifold_wire::ErrorObject::new(
                        manifold_wire::ErrorCode::InternalError,
                        "unreadable error",
                    )
                }),
            });
        }
        let raw = response.result_raw().unwrap_or("null");
        let view: InitializeView<'_> = serde_json::from_str(raw)
            .map_err(|e| negotiation(format!("its initialize result is malformed: {e}")))?;
        let revision = legacy_client_accepts(&view.protocol_version)
            .map_err(|e| negotiation(e.to_string()))?;
        self.inner.transport.negotiated(revision);
        self.notify(meta::method::INITIALIZED, None).await?;
        Ok(PeerInfo {
            era: Era::Legacy,
            revision,
            server_name: view.server_info.as_ref().and_then(|s| s.name.clone()),
            server_version: view.server_info.as_ref().and_then(|s| s.version.clone()),
            capabilities: view.capabilities.map_or("{}", |c| c.get()).to_owned(),
            instructions: view.instructions,
            raw: raw.to_owned(),
        })
    }
}

/// The modern revision to retry with after an UnsupportedProtocolVersion (-32022) error whose
/// `data.supported` lists one this client speaks.
fn retry_revision(response: &Message) -> Option<Revision> {
    let error = response.error_object()?;
    if error.code != manifold_wire::ErrorCode::UnsupportedProtocolVersion.code() {
        return None;
    }
    let data: serde_json::Value = serde_json::from_str(error.data.as_ref()?.get()).ok()?;
    let supported: Vec<String> = data
        .get("supported")?
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    modern_client_choice(&supported)
}

/// Whether a message is a modern-era result asking for more input (MRTR).
pub fn is_input_required(message: &Message) -> bool {
    message
        .result_str(&["resultType"])
        .is_some_and(|t| t == "input_required")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn error(code: i64, data: &str) -> Message {
        Message::decode_str(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"m","data":{data}}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn an_unsupported_version_error_naming_a_modern_revision_is_retried_with_it() {
        let m = error(
            -32022,
            r#"{"supported":["2026-07-28"],"requested":"2099-01-01"}"#,
        );
        assert_eq!(retry_revision(&m), Some(Revision::V2026_07_28));
    }

    #[test]
    fn other_errors_and_legacy_only_lists_are_not_retried() {
        assert_eq!(
            retry_revision(&error(-32022, r#"{"supported":["2025-11-25"]}"#)),
            None
        );
        assert_eq!(
            retry_revision(&error(-32601, r#"{"supported":["2026-07-28"]}"#)),
            None
        );
        assert_eq!(retry_revision(&error(-32022, "null")), None);
    }
}
