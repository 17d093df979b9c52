//! Who is asking: the downstream client of one request, as the core sees it.
//!
//! The core never names a transport. A downstream transport describes its client (era, revision,
//! declared capabilities) and gives a [`DownstreamPeer`] through which the core reaches back to
//! that client: notifications tied to the request, and server-initiated requests (legacy sessions).

use std::sync::Arc;

use futures::future::BoxFuture;
use manifold_upstream::auth::passthrough::CallerToken;
use manifold_wire::{ErrorObject, Message, Revision};

pub use crate::request_notes::RequestNotes;

/// The downstream client of a request.
#[derive(Debug, Clone)]
pub struct ClientView {
    pub revision: Revision,
    /// Raw JSON object of the capabilities the client declared.
    pub capabilities: String,
    /// The client's name and version, when it gave them.
    pub info: Option<ClientInfo>,
}

/// The `clientInfo` a client gave (raw JSON), shared by every request of its session, with its
/// name and version read once when first asked (every audited call names them; reading them
/// from the raw JSON each call cost more than the rest of the row's first facts).
#[derive(Clone)]
pub struct ClientInfo(Arc<ClientInfoInner>);

struct ClientInfoInner {
    raw: String,
    named: std::sync::OnceLock<(Option<String>, Option<String>)>,
}

impl ClientInfo {
    pub fn new(raw: impl Into<String>) -> ClientInfo {
        ClientInfo(Arc::new(ClientInfoInner {
            raw: raw.into(),
            named: std::sync::OnceLock::new(),
        }))
    }

    /// The raw JSON, as the client sent it.
    pub fn raw(&self) -> &str {
        &self.0.raw
    }

    /// `name`, when it is a string.
    pub fn name(&self) -> Option<&str> {
        self.named().0.as_deref()
    }

    /// `version`, when it is a string.
    pub fn version(&self) -> Option<&str> {
        self.named().1.as_deref()
    }

    fn named(&self) -> &(Option<String>, Option<String>) {
        self.0.named.get_or_init(|| {
            let text = |key: &str| {
                manifold_wire::patch::get(&self.0.raw, &[key])
                    .ok()
                    .flatten()
                    .and_then(|v| serde_json::from_str::<String>(v).ok())
            };
            (text("name"), text("version"))
        })
    }
}

/// A legacy session's id as its requests carry it: shared by every request of the session (a
/// clone is a reference count, not a copy of the id), with the redacted tag that logs and audit
/// rows name it by computed once (a SHA-256 per call otherwise).
#[derive(Clone)]
pub struct SessionId(Arc<SessionIdInner>);

struct SessionIdInner {
    id: String,
    tag: std::sync::OnceLock<String>,
}

impl SessionId {
    pub fn new(id: impl Into<String>) -> SessionId {
        SessionId(Arc::new(SessionIdInner {
            id: id.into(),
            tag: std::sync::OnceLock::new(),
        }))
    }

    /// The id itself (a secret of its client: never logged).
    pub fn as_str(&self) -> &str {
        &self.0.id
    }

    /// What logs and audit rows show instead of the id ([`session_tag`]).
    ///
    /// [`session_tag`]: manifold_telemetry::redact::session_tag
    pub fn tag(&self) -> &str {
        self.0
            .tag
            .get_or_init(|| manifold_telemetry::redact::session_tag(&self.0.id))
    }
}

impl std::fmt::Debug for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SessionId").field(&self.tag()).finish()
    }
}

impl std::fmt::Debug for ClientInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ClientInfo").field(&self.0.raw).finish()
    }
}

impl PartialEq for ClientInfo {
    fn eq(&self, other: &ClientInfo) -> bool {
        self.raw() == other.raw()
    }
}

impl ClientView {
    /// Whether the client declared an extension (`capabilities.extensions.NAME`).
    pub fn declares_extension(&self, name: &str) -> bool {
        manifold_wire::patch::get(&self.capabilities, &["extensions", name])
            .ok()
            .flatten()
            .is_some_and(|v| v.trim() != "null")
    }

    /// Whether the client declared a top-level capability (`elicitation`, `sampling`, `roots`).
    pub fn declares(&self, capability: &str) -> bool {
        manifold_wire::patch::get(&self.capabilities, &[capability])
            .ok()
            .flatten()
            .is_some_and(|v| v.trim() != "null")
    }
}

/// The way back to a downstream client.
pub trait DownstreamPeer: Send + Sync + 'static {
    /// Delivers a notification tied to the request being handled (progress, a log line), in order.
    fn notify(&self, message: Message);

    /// Sends a server-initiated request to the client and waits for its answer (raw result).
    /// Returns `None` when this client cannot receive requests (the modern era).
    fn request(
        &self,
        method: &str,
        params: Option<String>,
    ) -> Option<BoxFuture<'static, Result<String, ErrorObject>>>;
}

/// Everything the core needs to know about one downstream request.
#[derive(Clone)]
pub struct RequestContext {
    pub client: ClientView,
    pub peer: Arc<dyn DownstreamPeer>,
    /// The legacy session the request belongs to, for logs and per-session upstreams.
    pub session: Option<SessionId>,
    /// Who the request was authenticated as; `None` when inbound authentication is off.
    pub caller: Option<Arc<Caller>>,
    /// The tool set the request works in (`/mcp/NAME`, or the one its caller is confined to):
    /// it sees only the set's items, the rules still applying inside.
    pub toolset: Option<Arc<str>>,
    /// W3C trace context that arrived with the request's HTTP headers, if any; `_meta` may carry
    /// its own, which wins. While spans are exported it is the context of the request's own span
    /// instead, so upstream calls continue the trace as its children (`call_record.rs`).
    pub trace: Option<TraceHeaders>,
    /// What the request's stages note for its audit row; the edge leaves it empty
    /// (`RequestNotes::default()`) and the recorder starts it.
    pub audit: RequestNotes,
}

impl RequestContext {
    /// A request of a client that declared nothing, authenticated as no one, outside any tool
    /// set, that cannot be asked anything: the context of the gateway's own calls and of tests.
    pub fn silent(revision: Revision) -> RequestContext {
        RequestContext {
            client: ClientView {
                revision,
                capabilities: "{}".to_owned(),
                info: None,
            },
            peer: Arc::new(SilentPeer),
            session: None,
            caller: None,
            toolset: None,
            trace: None,
            audit: RequestNotes::default(),
        }
    }

    /// The caller's own bearer token, as the request's upstream call carries it down (only
    /// servers configured with `token_passthrough = true` are sent it).
    pub fn caller_token(&self) -> Option<CallerToken> {
        self.caller
            .as_ref()
            .and_then(|c| c.bearer.as_ref())
            .map(|t| CallerToken(Arc::clone(&t.0)))
    }
}

/// An authenticated identity as policy, logs and health see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The API key's name or the token's subject.
    pub name: String,
    /// Groups the identity belongs to (from the token's claims or the key's record).
    pub groups: Vec<String>,
    /// Scopes granted to the identity.
    pub scopes: Vec<String>,
    /// The bearer token the caller presented, kept only so that servers configured with
    /// `token_passthrough = true` can be sent it; never logged.
    pub bearer: Option<BearerToken>,
}

/// A caller's raw bearer token; its `Debug` never shows it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct BearerToken(pub Arc<str>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// The W3C trace context headers of one request, raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceHeaders {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

/// A peer that drops notifications and cannot be asked anything (tests, internal calls).
#[derive(Debug, Default, Clone, Copy)]
pub struct SilentPeer;

impl DownstreamPeer for SilentPeer {
    fn notify(&self, _message: Message) {}

    fn request(
        &self,
        _method: &str,
        _params: Option<String>,
    ) -> Option<BoxFuture<'static, Result<String, ErrorObject>>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{ClientInfo, SessionId};

    #[test]
    fn a_session_id_is_shown_by_its_tag_and_never_spelled_out() {
        let id = SessionId::new("k1.sealed-session-secret");
        assert_eq!(id.as_str(), "k1.sealed-session-secret");
        let tag = manifold_telemetry::redact::session_tag("k1.sealed-session-secret");
        assert_eq!(id.tag(), tag);
        let shared = id.clone();
        assert_eq!(shared.tag(), tag, "clones share the tag");
        let shown = format!("{id:?}");
        assert!(shown.contains(&tag) && !shown.contains("secret"), "{shown}");
        assert_ne!(SessionId::new("another").tag(), tag);
    }

    #[test]
    fn client_info_names_what_it_gave_and_keeps_its_raw_json() {
        let info = ClientInfo::new(r#"{"version":"1.2","name":"Cl\u0069ent \"x\"","extra":[1]}"#);
        assert_eq!(info.name(), Some("Client \"x\""));
        assert_eq!(info.version(), Some("1.2"));
        assert_eq!(
            info.raw(),
            r#"{"version":"1.2","name":"Cl\u0069ent \"x\"","extra":[1]}"#
        );
        let shared = info.clone();
        assert_eq!(
            shared.name(),
            Some("Client \"x\""),
            "clones share the reading"
        );

        let odd = ClientInfo::new(r#"{"name":7}"#);
        assert_eq!((odd.name(), odd.version()), (None, None));
        let broken = ClientInfo::new("not json");
        assert_eq!((broken.name(), broken.version()), (None, None));
        assert_eq!(broken.raw(), "not json");
    }
}
