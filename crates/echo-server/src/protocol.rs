//! Why: stdio and HTTP answer the same messages the same way, so what a message means (which era,
//! which method, which reply) is decided once, here, with as little work per request as the
//! protocol allows: one borrowed parse of the envelope, replies spliced from raw JSON pieces.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::catalog::Catalog;

/// The stateless revision; a request naming it in `_meta` is served statelessly.
pub const MODERN_REVISION: &str = "2026-07-28";
/// Revisions reached through `initialize`, oldest first.
pub const LEGACY_REVISIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// What `initialize` answers when the client asks for a revision this server does not know.
const LATEST_LEGACY: &str = "2025-11-25";
/// This server's identity, as JSON.
pub const SERVER_INFO: &str = concat!(
    r#"{"name":"manifold-echo","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// JSON-RPC and MCP error codes this server answers with.
mod code {
    pub const PARSE_ERROR: i32 = -32700;
    pub const INVALID_REQUEST: i32 = -32600;
    pub const METHOD_NOT_FOUND: i32 = -32601;
    pub const INVALID_PARAMS: i32 = -32602;
    pub const HEADER_MISMATCH: i32 = -32020;
    pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;
}

/// One JSON-RPC message, borrowed from the bytes it was read from.
#[derive(Deserialize)]
pub struct Envelope<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<Params<'a>>,
}

/// The members of `params` any method here reads; everything else is skipped unparsed.
#[derive(Deserialize, Default)]
pub struct Params<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Arguments<'a>>,
    #[serde(rename = "protocolVersion", borrow, default)]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<Meta<'a>>,
}

#[derive(Deserialize)]
struct Arguments<'a> {
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    protocol_version: Option<Cow<'a, str>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
    client_capabilities: Option<&'a RawValue>,
}

/// Which era a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Legacy,
    Modern,
}

/// An answer to write, with the HTTP status it travels under.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl<'a> Envelope<'a> {
    /// Reads one message; an unreadable one is answered with the JSON-RPC error it deserves.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Reply> {
        serde_json::from_slice(bytes).map_err(|_| refusal_for(bytes))
    }

    /// A modern request names its revision in `_meta`; `server/discover` is modern in any case.
    pub fn era(&self) -> Era {
        if self.modern_revision().is_some() || self.method.as_deref() == Some("server/discover") {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// The revision a modern request names in `_meta`.
    pub fn modern_revision(&self) -> Option<&str> {
        self.params
            .as_ref()
            .and_then(|p| p.meta.as_ref())
            .and_then(|m| m.protocol_version.as_deref())
    }

    /// Whether this is a request (it has an id and a method).
    pub fn is_request(&self) -> bool {
        self.id.is_some() && self.method.is_some()
    }
}

/// The error reply for bytes that did not parse as an envelope: invalid request when an id could
/// still be read (so the caller waiting on it fails at once), parse error otherwise.
fn refusal_for(bytes: &[u8]) -> Reply {
    #[derive(Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
    }
    match serde_json::from_slice::<IdOnly<'_>>(bytes) {
        Ok(IdOnly { id }) => error_reply(
            400,
            id,
            code::INVALID_REQUEST,
            "the message is not a JSON-RPC request this server can read",
            None,
        ),
        Err(_) => error_reply(400, None, code::PARSE_ERROR, "the body is not JSON", None),
    }
}

/// Answers one message, or `None` for a notification or a response (nothing to answer).
pub fn answer(message: &Envelope<'_>, catalog: &Catalog) -> Option<Reply> {
    let (Some(id), Some(method)) = (message.id, message.method.as_deref()) else {
        return None;
    };
    let empty = Params::default();
    let params = message.params.as_ref().unwrap_or(&empty);
    let era = message.era();
    if era == Era::Modern
        && let Some(refusal) = modern_refusal(id, message.modern_revision(), params)
    {
        return Some(refusal);
    }
    let reply = match (era, method) {
        (_, "tools/call") => call(id, params, era, catalog),
        (_, "tools/list") => ok(id, &[catalog.list(era)]),
        (_, "server/discover") => ok(id, &[DISCOVER_RESULT.as_bytes()]),
        (Era::Legacy, "initialize") => initialize(id, params),
        (Era::Legacy, "ping") => ok(id, &[b"{}"]),
        (Era::Modern, _) => error_reply(
            404,
            Some(id),
            code::METHOD_NOT_FOUND,
            "this echo server serves server/discover, tools/list and tools/call",
            None,
        ),
        (Era::Legacy, _) => error_reply(
            200,
            Some(id),
            code::METHOD_NOT_FOUND,
            "this echo server serves initialize, ping, tools/list and tools/call",
            None,
        ),
    };
    Some(reply)
}

/// A modern request's `_meta` must name a revision served here and declare client capabilities.
fn modern_refusal(id: &RawValue, revision: Option<&str>, params: &Params<'_>) -> Option<Reply> {
    let revision = revision?;
    if revision != MODERN_REVISION {
        let data = format!(
            r#"{{"supported":["{MODERN_REVISION}"],"requested":{}}}"#,
            json_string(revision)
        );
        return Some(error_reply(
            400,
            Some(id),
            code::UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported protocol version",
            Some(&data),
        ));
    }
    let has_capabilities = params
        .meta
        .as_ref()
        .is_some_and(|m| m.client_capabilities.is_some());
    if !has_capabilities {
        return Some(error_reply(
            400,
            Some(id),
            code::INVALID_PARAMS,
            "_meta needs io.modelcontextprotocol/clientCapabilities",
            None,
        ));
    }
    None
}

/// The `server/discover` result: the one modern revision, tools only.
static DISCOVER_RESULT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        r#"{{"resultType":"complete","supportedVersions":["{MODERN_REVISION}"],"capabilities":{{"tools":{{}}}},"serverInfo":{SERVER_INFO},"ttlMs":60000,"cacheScope":"public","_meta":{{"io.modelcontextprotocol/serverInfo":{SERVER_INFO}}}}}"#
    )
});

fn initialize(id: &RawValue, params: &Params<'_>) -> Reply {
    let asked = params.protocol_version.as_deref().unwrap_or(LATEST_LEGACY);
    let revision = LEGACY_REVISIONS
        .iter()
        .find(|r| **r == asked)
        .copied()
        .unwrap_or(LATEST_LEGACY);
    ok(
        id,
        &[
            br#"{"protocolVersion":""#,
            revision.as_bytes(),
            br#"","capabilities":{"tools":{}},"serverInfo":"#,
            SERVER_INFO.as_bytes(),
            b"}",
        ],
    )
}

/// The result suffix every modern result carries.
static MODERN_RESULT_TAIL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        r#","resultType":"complete","_meta":{{"io.modelcontextprotocol/serverInfo":{SERVER_INFO}}}}}"#
    )
});

fn call(id: &RawValue, params: &Params<'_>, era: Era, catalog: &Catalog) -> Reply {
    let Some(name) = params.name.as_deref() else {
        return error_reply(
            era.error_status(),
            Some(id),
            code::INVALID_PARAMS,
            "tools/call needs params.name",
            None,
        );
    };
    if !catalog.has(name) {
        return error_reply(
            era.error_status(),
            Some(id),
            code::INVALID_PARAMS,
            "unknown tool; tools/list shows the echo tools",
            None,
        );
    }
    let tail: &[u8] = match era {
        Era::Legacy => b"}",
        Era::Modern => MODERN_RESULT_TAIL.as_bytes(),
    };
    let message = params.arguments.as_ref().and_then(|a| a.message);
    match message {
        // A JSON string is already the text member's value: spliced as it came, escapes and all.
        Some(text) if text.get().starts_with('"') => ok(
            id,
            &[
                br#"{"content":[{"type":"text","text":"#,
                text.get().as_bytes(),
                b"}]",
                tail,
            ],
        ),
        Some(other) => ok(
            id,
            &[
                br#"{"content":[{"type":"text","text":"#,
                json_string(other.get()).as_bytes(),
                b"}]",
                tail,
            ],
        ),
        None => ok(
            id,
            &[
                br#"{"content":[{"type":"text","text":"arguments.message is required"}],"isError":true"#,
                tail,
            ],
        ),
    }
}

impl Era {
    /// Modern invalid-params errors are HTTP 400; legacy errors ride a 200.
    fn error_status(self) -> u16 {
        match self {
            Era::Legacy => 200,
            Era::Modern => 400,
        }
    }
}

/// `{"jsonrpc":"2.0","id":ID,"result":PARTS...}` in one allocation.
fn ok(id: &RawValue, result: &[&[u8]]) -> Reply {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    const MIDDLE: &[u8] = br#","result":"#;
    let len = HEAD.len()
        + id.get().len()
        + MIDDLE.len()
        + result.iter().map(|p| p.len()).sum::<usize>()
        + 1;
    let mut body = Vec::with_capacity(len);
    body.extend_from_slice(HEAD);
    body.extend_from_slice(id.get().as_bytes());
    body.extend_from_slice(MIDDLE);
    for part in result {
        body.extend_from_slice(part);
    }
    body.push(b'}');
    Reply { status: 200, body }
}

/// A JSON-RPC error reply; `data` is raw JSON.
pub fn error_reply(
    status: u16,
    id: Option<&RawValue>,
    code: i32,
    message: &str,
    data: Option<&str>,
) -> Reply {
    let id = id.map_or("null", RawValue::get);
    let data = data.map(|d| format!(r#","data":{d}"#)).unwrap_or_default();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{}{data}}}}}"#,
        json_string(message)
    );
    Reply {
        status,
        body: body.into_bytes(),
    }
}

/// A header that must mirror the body disagreed with it (or was missing).
pub fn header_mismatch(id: Option<&RawValue>, what: &str) -> Reply {
    error_reply(400, id, code::HEADER_MISMATCH, what, None)
}

/// `text` as a JSON string literal.
pub fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn reply_to(line: &str, catalog: &Catalog) -> Option<serde_json::Value> {
        let message = Envelope::parse(line.as_bytes()).unwrap();
        answer(&message, catalog).map(|r| serde_json::from_slice(&r.body).unwrap())
    }

    #[test]
    fn a_string_message_is_echoed_with_its_escapes_kept() {
        let catalog = Catalog::new(1);
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a\"b\u00e9"}}}"#;
        let message = Envelope::parse(line.as_bytes()).unwrap();
        let reply = answer(&message, &catalog).unwrap();
        let text = String::from_utf8(reply.body).unwrap();
        assert!(text.contains(r#""text":"a\"b\u00e9""#), "{text}");
        assert_eq!(reply.status, 200);
    }

    #[test]
    fn a_modern_request_with_another_revision_is_refused_with_the_supported_list() {
        let catalog = Catalog::new(1);
        let line = r#"{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let value = reply_to(line, &catalog).unwrap();
        assert_eq!(value["error"]["code"], -32022);
        assert_eq!(value["error"]["data"]["supported"][0], MODERN_REVISION);
        assert_eq!(value["id"], "x");
    }

    #[test]
    fn notifications_are_not_answered() {
        let catalog = Catalog::new(1);
        assert!(
            reply_to(
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                &catalog
            )
            .is_none()
        );
    }

    #[test]
    fn initialize_keeps_a_known_revision_and_offers_the_latest_otherwise() {
        let catalog = Catalog::new(1);
        let known = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
        assert_eq!(
            reply_to(known, &catalog).unwrap()["result"]["protocolVersion"],
            "2025-03-26"
        );
        let unknown = known.replace("2025-03-26", "1999-01-01");
        assert_eq!(
            reply_to(&unknown, &catalog).unwrap()["result"]["protocolVersion"],
            LATEST_LEGACY
        );
    }

    #[test]
    fn garbage_is_a_parse_error_and_a_readable_id_is_kept() {
        let reply = Envelope::parse(b"not json").err().unwrap();
        let value: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(value["error"]["code"], -32700);
        let reply = Envelope::parse(br#"{"id":5,"method":3}"#).err().unwrap();
        let value: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(value["error"]["code"], -32600);
        assert_eq!(value["id"], 5);
    }
}
