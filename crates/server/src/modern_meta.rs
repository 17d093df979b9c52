//! The per-request `_meta` of the modern era (2026-07-28): who the client is, on every request.
//!
//! With no `initialize`, each request states its protocol revision and capabilities. This module
//! reads them, refuses what the spec refuses (missing fields: -32602; an unsupported revision:
//! -32022 with the supported list), and tells the era of a request apart from the legacy one.

use manifold_gateway::ClientView;
use manifold_wire::id::json_string;
use manifold_wire::patch;
use manifold_wire::revision::modern_server_accepts;
use manifold_wire::{ErrorCode, ErrorObject, Message, Revision, meta};
use serde_json::value::RawValue;

use manifold_wire::log_level::LogLevel;

/// What a modern request says about its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModernMeta {
    pub revision: Revision,
    pub capabilities: String,
    pub info: Option<String>,
    pub log_level: Option<LogLevel>,
}

impl ModernMeta {
    pub fn client_view(&self) -> ClientView {
        ClientView {
            revision: self.revision,
            capabilities: self.capabilities.clone(),
            info: self.info.as_deref().map(manifold_gateway::ClientInfo::new),
        }
    }
}

/// The revisions a request may state in `_meta`: exactly what `server/discover` lists, so a
/// client can check one against the other (legacy revisions are reached through `initialize`).
pub fn supported_revisions() -> Vec<Revision> {
    vec![Revision::LATEST]
}

fn meta_member<'a>(params: &'a str, key: &str) -> Option<&'a str> {
    patch::decoded::get(params, &["_meta", key]).ok().flatten()
}

/// The revision a request's `_meta` names, if it names one (a modern request).
pub fn stated_revision(message: &Message) -> Option<String> {
    let params = message.params()?;
    let raw = meta_member(params, meta::PROTOCOL_VERSION)?;
    Some(serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned()))
}

/// Whether a message speaks the modern era: `server/discover`, or a revision in `_meta`.
pub fn looks_modern(message: &Message) -> bool {
    message.method() == Some(meta::method::DISCOVER) || stated_revision(message).is_some()
}

/// Reads and checks a modern request's `_meta`; the error is the JSON-RPC error to answer.
pub fn read_meta(message: &Message) -> Result<ModernMeta, ErrorObject> {
    let invalid = |why: String| ErrorObject::new(ErrorCode::InvalidParams, why);
    let params = message.params().unwrap_or("{}");
    let version = meta_member(params, meta::PROTOCOL_VERSION)
        .and_then(|raw| serde_json::from_str::<String>(raw).ok())
        .ok_or_else(|| {
            invalid(format!(
                "params._meta[\"{}\"] (a string) is required on every request of the 2026-07-28 era",
                meta::PROTOCOL_VERSION
            ))
        })?;
    let capabilities = meta_member(params, meta::CLIENT_CAPABILITIES)
        .filter(|raw| raw.trim_start().starts_with('{'))
        .ok_or_else(|| {
            invalid(format!(
                "params._meta[\"{}\"] (an object) is required on every request of the 2026-07-28 era",
                meta::CLIENT_CAPABILITIES
            ))
        })?;
    let log_level = match meta_member(params, meta::LOG_LEVEL) {
        None => None,
        Some(raw) => Some(
            serde_json::from_str::<String>(raw)
                .ok()
                .and_then(|l| LogLevel::parse(&l))
                .ok_or_else(|| {
                    let names: Vec<&str> = LogLevel::ALL.iter().map(|l| l.as_str()).collect();
                    invalid(format!(
                        "params._meta[\"{}\"] must be one of {}",
                        meta::LOG_LEVEL,
                        names.join(", ")
                    ))
                })?,
        ),
    };
    let Some(revision) = modern_server_accepts(&version, &[Revision::LATEST]) else {
        return Err(unsupported(&version));
    };
    Ok(ModernMeta {
        revision,
        capabilities: capabilities.to_owned(),
        info: meta_member(params, meta::CLIENT_INFO).map(str::to_owned),
        log_level,
    })
}

/// `-32022` with `data: {supported, requested}`.
pub fn unsupported(requested: &str) -> ErrorObject {
    let supported: Vec<String> = supported_revisions()
        .iter()
        .map(|r| format!("\"{r}\""))
        .collect();
    let data = format!(
        "{{\"supported\":[{}],\"requested\":{}}}",
        supported.join(","),
        json_string(requested)
    );
    let error = ErrorObject::new(
        ErrorCode::UnsupportedProtocolVersion,
        format!(
            "Unsupported protocol version {requested:?}; Manifold serves 2026-07-28 per request (and 2024-11-05 to 2025-11-25 through initialize)"
        ),
    );
    match RawValue::from_string(data) {
        Ok(raw) => error.with_data(raw),
        Err(_) => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifold_wire::Id;

    fn req(params: &str) -> Message {
        Message::request(&Id::Num(1), "tools/list", Some(params))
    }

    #[test]
    fn a_complete_meta_is_read() {
        let m = read_meta(&req(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"x":{}},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"warning"}}"#)).unwrap();
        assert_eq!(m.revision, Revision::V2026_07_28);
        assert_eq!(m.capabilities, r#"{"x":{}}"#);
        assert_eq!(m.info.as_deref(), Some(r#"{"name":"c"}"#));
        assert_eq!(m.log_level, Some(LogLevel::Warning));
    }

    #[test]
    fn an_unknown_log_level_is_invalid_params_naming_every_level() {
        let e = read_meta(&req(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"verbose"}}"#)).unwrap_err();
        assert_eq!(e.code, -32602);
        assert_eq!(
            e.message,
            "params._meta[\"io.modelcontextprotocol/logLevel\"] must be one of debug, info, notice, warning, error, critical, alert, emergency"
        );
    }

    #[test]
    fn missing_fields_are_invalid_params() {
        let e = read_meta(&req(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        ))
        .unwrap_err();
        assert_eq!(e.code, -32602);
        let e = read_meta(&req("{}")).unwrap_err();
        assert_eq!(e.code, -32602);
        let e = read_meta(&req(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}"#)).unwrap_err();
        assert_eq!(e.code, -32602);
    }

    #[test]
    fn an_unsupported_revision_lists_what_is_supported() {
        let e = read_meta(&req(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#)).unwrap_err();
        assert_eq!(e.code, -32022);
        assert_eq!(
            e.data.unwrap().get(),
            r#"{"supported":["2026-07-28"],"requested":"2099-01-01"}"#
        );
    }

    #[test]
    fn modern_requests_are_told_apart() {
        assert!(looks_modern(&Message::request(
            &Id::Num(1),
            "server/discover",
            None
        )));
        assert!(looks_modern(&req(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}"#
        )));
        assert!(!looks_modern(&req("{}")));
    }
}
