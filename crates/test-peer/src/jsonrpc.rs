//! JSON-RPC envelopes as the peer reads and writes them.
//!
//! The peer writes envelopes by hand (not through a typed struct) because several misbehaviours
//! need envelopes no well-typed serialiser would produce: a wrong `jsonrpc` member, a result and an
//! error together, invalid UTF-8 inside a string. Key order is fixed (`jsonrpc`, `id`, then the
//! member) so the README can state the exact bytes.

use serde_json::Value;

use crate::canonical_json;

/// JSON-RPC and MCP error codes the peer emits.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Implementation-defined: the peer's "bad request" for legacy HTTP without a session.
    pub const BAD_REQUEST: i64 = -32000;
    /// Implementation-defined: legacy HTTP session unknown or ended.
    pub const SESSION_NOT_FOUND: i64 = -32001;
    /// Legacy (2025-11-25 and earlier) resource-not-found code.
    pub const RESOURCE_NOT_FOUND_LEGACY: i64 = -32002;
    pub const HEADER_MISMATCH: i64 = -32020;
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// One decoded message from the client, sorted by what the peer must do with it.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// An answer to one of the peer's own server->client requests.
    Response { id: Value, message: Value },
    /// Not a JSON-RPC message the peer understands; `id` is kept when it could be read.
    Invalid { id: Option<Value>, reason: String },
}

/// Sorts a parsed JSON value into a request, notification, response or nonsense.
pub fn classify(value: Value) -> Incoming {
    let Value::Object(mut object) = value else {
        return Incoming::Invalid {
            id: None,
            reason: "a JSON-RPC message must be a JSON object".to_owned(),
        };
    };
    let id = object.get("id").cloned().filter(is_valid_id);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid {
            id,
            reason: "the \"jsonrpc\" member must be exactly \"2.0\"".to_owned(),
        };
    }
    match object.remove("method") {
        Some(Value::String(method)) => {
            let params = object.remove("params");
            match object.get("id") {
                None => Incoming::Notification { method, params },
                Some(raw) if is_valid_id(raw) => Incoming::Request {
                    id: raw.clone(),
                    method,
                    params,
                },
                Some(_) => Incoming::Invalid {
                    id: None,
                    reason: "a request id must be a string or an integer".to_owned(),
                },
            }
        }
        Some(_) => Incoming::Invalid {
            id,
            reason: "the \"method\" member must be a string".to_owned(),
        },
        None => match id {
            Some(id) if object.contains_key("result") || object.contains_key("error") => {
                Incoming::Response {
                    id,
                    message: Value::Object(object),
                }
            }
            _ => Incoming::Invalid {
                id,
                reason: "neither a request, a notification nor a response".to_owned(),
            },
        },
    }
}

fn is_valid_id(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some() || id.as_u64().is_some()
}

/// A stable map key for an id: its JSON text, so `1` and `"1"` stay distinct.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// A JSON-RPC error about to be sent, with the HTTP status a modern Streamable HTTP reply needs.
#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
    /// Status for a JSON reply over Streamable HTTP; ordinary method errors travel with 200.
    pub http_status: u16,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
            http_status: 200,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.http_status = status;
        self
    }

    /// The error object's JSON text: `{"code":..,"message":..[,"data":..]}`.
    pub fn object_text(&self) -> String {
        // Written by hand: serde_json's map would sort the members as code, data, message.
        let mut text = format!(
            "{{\"code\":{},\"message\":{}",
            self.code,
            Value::from(self.message.clone())
        );
        if let Some(data) = &self.data {
            text.push_str(",\"data\":");
            text.push_str(&canonical_json::to_string(data));
        }
        text.push('}');
        text
    }
}

/// `{"jsonrpc":"<version>","id":<id>,"<member>":<payload><trailing>}` as bytes.
pub fn envelope(
    version: &str,
    id_text: &str,
    member: &str,
    payload: &[u8],
    trailing: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 64);
    out.extend_from_slice(b"{\"jsonrpc\":\"");
    out.extend_from_slice(version.as_bytes());
    out.extend_from_slice(b"\",\"id\":");
    out.extend_from_slice(id_text.as_bytes());
    out.extend_from_slice(b",\"");
    out.extend_from_slice(member.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(payload);
    out.extend_from_slice(trailing.as_bytes());
    out.push(b'}');
    out
}

/// A well-formed error response.
pub fn error_message(id: &Value, error: &RpcError) -> Vec<u8> {
    envelope(
        "2.0",
        &id.to_string(),
        "error",
        error.object_text().as_bytes(),
        "",
    )
}

/// `{"jsonrpc":"2.0","method":..,"params":..}`.
pub fn notification_message(method: &str, params: &Value) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":{},\"params\":{}}}",
        Value::from(method),
        canonical_json::to_string(params)
    )
    .into_bytes()
}

/// `{"jsonrpc":"2.0","id":..,"method":..,"params":..}`: a server->client request.
pub fn request_message(id: &Value, method: &str, params: &Value) -> Vec<u8> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":{},\"params\":{}}}",
        id,
        Value::from(method),
        canonical_json::to_string(params)
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[test]
    fn classify_sorts_the_four_shapes() {
        let request = classify(json!({"jsonrpc":"2.0","id":"a","method":"ping"}));
        assert!(matches!(request, Incoming::Request { ref method, .. } if method == "ping"));
        let notification = classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        assert!(matches!(notification, Incoming::Notification { .. }));
        let response = classify(json!({"jsonrpc":"2.0","id":3,"result":{}}));
        assert!(matches!(response, Incoming::Response { .. }));
        let invalid = classify(json!({"jsonrpc":"1.0","id":4,"method":"ping"}));
        assert!(matches!(invalid, Incoming::Invalid { id: Some(_), .. }));
        let null_id = classify(json!({"jsonrpc":"2.0","id":null,"method":"ping"}));
        assert!(matches!(null_id, Incoming::Invalid { id: None, .. }));
    }

    #[test]
    fn error_object_keeps_conventional_member_order() {
        let error = RpcError::new(-32602, "bad").with_data(json!({"b":1,"a":2}));
        assert_eq!(
            error.object_text(),
            r#"{"code":-32602,"message":"bad","data":{"a":2,"b":1}}"#
        );
    }

    #[test]
    fn envelope_orders_jsonrpc_id_member() {
        let bytes = envelope("2.0", &json!(7).to_string(), "result", b"{}", "");
        assert_eq!(bytes, br#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
    }
}
