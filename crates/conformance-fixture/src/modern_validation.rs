//! Modern era (2026-07-28): admitting a request before it is served.
//!
//! Every modern request states its revision and the client's capabilities in `params._meta`;
//! over Streamable HTTP it also mirrors the method, the name of what it targets and tool arguments
//! marked `x-mcp-header` into headers, so intermediaries can route without reading the body. The
//! server refuses a request whose body and headers disagree. The checks run in a fixed order, so
//! one faulty request always gets the same error:
//!
//! 1. `Mcp-Method` present and equal to the body's method (HTTP) — else -32020;
//! 2. `_meta` carries `protocolVersion` and `clientCapabilities` — else -32602;
//! 3. `MCP-Protocol-Version` present and equal to `_meta` (HTTP) — else -32020;
//! 4. the revision is one this server speaks — else -32022 with `{supported, requested}`;
//! 5. `Mcp-Name` present and equal to the targeted name, URI or task id (HTTP) — else -32020;
//! 6. each `Mcp-Param-*` header present and equal to its argument (HTTP, `tools/call`) — else -32020.
//!
//! Header values are compared after trimming optional whitespace; a value written as
//! `=?base64?...?=` is decoded first (strict Base64, so bad padding or characters are refused).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use manifold_wire::Revision;
use manifold_wire::meta::{self, header, method};
use serde_json::{Value, json};

use crate::catalog::tools;
use crate::error::RpcError;
use crate::log_level::{LogLevel, LogPolicy};

/// The revisions a modern request may name.
pub const MODERN_REVISIONS: [Revision; 1] = [Revision::V2026_07_28];

/// What a modern request told about its client.
#[derive(Debug, Clone, PartialEq)]
pub struct ModernMeta {
    pub revision: Revision,
    pub client_capabilities: Value,
    pub log: LogPolicy,
    pub progress_token: Option<Value>,
}

/// An HTTP request's headers, independent of the HTTP library (names lower-cased).
#[derive(Debug, Clone, Default)]
pub struct RequestHeaders {
    entries: Vec<(String, Vec<u8>)>,
}

impl RequestHeaders {
    pub fn new() -> RequestHeaders {
        RequestHeaders::default()
    }

    pub fn push(&mut self, name: &str, value: &[u8]) {
        self.entries
            .push((name.to_ascii_lowercase(), value.to_vec()));
    }

    /// The first value of `name` (any case), raw.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// The first value of `name` as text with surrounding whitespace removed.
    pub fn text(&self, name: &str) -> Option<Result<String, ()>> {
        self.get(name).map(|raw| {
            std::str::from_utf8(raw)
                .map(|s| s.trim_matches([' ', '\t']).to_owned())
                .map_err(|_| ())
        })
    }
}

/// Whether `params` carry the modern era's per-request revision.
pub fn names_a_revision(params: &Value) -> bool {
    params
        .get("_meta")
        .and_then(|m| m.get(meta::PROTOCOL_VERSION))
        .is_some()
}

/// Runs the checks above; `headers` is `None` on stdio.
pub fn admit(
    request_method: &str,
    params: &Value,
    headers: Option<&RequestHeaders>,
    dynamic_tool: bool,
) -> Result<ModernMeta, RpcError> {
    if let Some(headers) = headers {
        let sent = header_value(headers, header::METHOD)?;
        match sent {
            None => {
                return Err(RpcError::header_mismatch(format!(
                    "the Mcp-Method header is required and must equal the body's method ({request_method})"
                )));
            }
            Some(sent) if sent != request_method => {
                return Err(mismatch("Mcp-Method", &sent, request_method));
            }
            Some(_) => {}
        }
    }
    let meta_object = params
        .get("_meta")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            RpcError::invalid_params(format!(
                "params._meta is required in the 2026-07-28 protocol and must carry {} and {}",
                meta::PROTOCOL_VERSION,
                meta::CLIENT_CAPABILITIES
            ))
        })?;
    let requested = match meta_object.get(meta::PROTOCOL_VERSION) {
        Some(Value::String(v)) => v.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "params._meta[{:?}] must be a string",
                meta::PROTOCOL_VERSION
            )));
        }
        None => {
            return Err(RpcError::invalid_params(format!(
                "params._meta lacks {}, which every 2026-07-28 request must carry",
                meta::PROTOCOL_VERSION
            )));
        }
    };
    let client_capabilities = match meta_object.get(meta::CLIENT_CAPABILITIES) {
        Some(caps @ Value::Object(_)) => caps.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "params._meta[{:?}] must be a ClientCapabilities object",
                meta::CLIENT_CAPABILITIES
            )));
        }
        None => {
            return Err(RpcError::invalid_params(format!(
                "params._meta lacks {}, which every 2026-07-28 request must carry",
                meta::CLIENT_CAPABILITIES
            )));
        }
    };
    if let Some(headers) = headers {
        match header_value(headers, header::PROTOCOL_VERSION)? {
            None => {
                return Err(RpcError::header_mismatch(format!(
                    "the MCP-Protocol-Version header is required and must equal params._meta[{:?}] ({requested})",
                    meta::PROTOCOL_VERSION
                )));
            }
            Some(sent) if sent != requested => {
                return Err(mismatch("MCP-Protocol-Version", &sent, &requested));
            }
            Some(_) => {}
        }
    }
    let revision = requested
        .parse::<Revision>()
        .ok()
        .filter(|r| MODERN_REVISIONS.contains(r))
        .ok_or_else(|| unsupported_version(&requested))?;
    let log = match meta_object.get(meta::LOG_LEVEL) {
        None => LogPolicy::Silent,
        Some(level) => level
            .as_str()
            .and_then(LogLevel::parse)
            .map(LogPolicy::AtLeast)
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "params._meta[{:?}] must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    meta::LOG_LEVEL
                ))
            })?,
    };
    if let Some(headers) = headers {
        check_name_header(headers, request_method, params)?;
        if request_method == method::TOOLS_CALL {
            check_param_headers(headers, params, dynamic_tool)?;
        }
    }
    Ok(ModernMeta {
        revision,
        client_capabilities,
        log,
        progress_token: meta_object.get(meta::PROGRESS_TOKEN).cloned(),
    })
}

/// The -32022 error naming what this server supports.
pub fn unsupported_version(requested: &str) -> RpcError {
    let supported: Vec<&str> = MODERN_REVISIONS.iter().map(|r| r.as_str()).collect();
    RpcError::new(
        manifold_wire::ErrorCode::UnsupportedProtocolVersion,
        format!(
            "protocol revision {requested:?} is not supported here; use one of {}",
            supported.join(", ")
        ),
    )
    .with_data(json!({ "supported": supported, "requested": requested }))
}

fn mismatch(header_name: &str, sent: &str, body: &str) -> RpcError {
    RpcError::header_mismatch(format!(
        "the {header_name} header ({sent:?}) does not match the request body ({body:?})"
    ))
    .with_data(json!({ "header": header_name, "headerValue": sent, "bodyValue": body }))
}

/// The value of a header, decoded: trimmed, and unwrapped from `=?base64?...?=` when so written.
fn header_value(headers: &RequestHeaders, name: &str) -> Result<Option<String>, RpcError> {
    match headers.text(name) {
        None => Ok(None),
        Some(Err(())) => Err(RpcError::header_mismatch(format!(
            "the {name} header is not valid UTF-8; non-ASCII values travel as =?base64?...?="
        ))),
        Some(Ok(text)) => decode_wrapped(&text)
            .map(Some)
            .map_err(|why| RpcError::header_mismatch(format!("the {name} header {why}"))),
    }
}

/// Unwraps `=?base64?...?=`; anything else is taken literally.
pub fn decode_wrapped(value: &str) -> Result<String, String> {
    let Some(inner) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Ok(value.to_owned());
    };
    let bytes = STANDARD
        .decode(inner)
        .map_err(|e| format!("holds invalid Base64 ({e})"))?;
    String::from_utf8(bytes).map_err(|_| "decodes to bytes that are not UTF-8".to_owned())
}

/// The body field `Mcp-Name` mirrors for `method`, if any.
fn named_field(request_method: &str) -> Option<&'static str> {
    meta::name_param_of(request_method).or(match request_method {
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    })
}

fn check_name_header(
    headers: &RequestHeaders,
    request_method: &str,
    params: &Value,
) -> Result<(), RpcError> {
    let Some(field) = named_field(request_method) else {
        return Ok(());
    };
    // A body without the field is the method's own error (-32602), not a header matter.
    let Some(body) = params.get(field).and_then(Value::as_str) else {
        return Ok(());
    };
    match header_value(headers, header::NAME)? {
        None => Err(RpcError::header_mismatch(format!(
            "the Mcp-Name header is required for {request_method} and must equal params.{field} ({body:?})"
        ))),
        Some(sent) if sent != body => Err(mismatch("Mcp-Name", &sent, body)),
        Some(_) => Ok(()),
    }
}

fn check_param_headers(
    headers: &RequestHeaders,
    params: &Value,
    dynamic_tool: bool,
) -> Result<(), RpcError> {
    let Some(spec) = params
        .get("name")
        .and_then(Value::as_str)
        .and_then(|n| tools::find(n, dynamic_tool))
    else {
        return Ok(());
    };
    let schema = (spec.input_schema)();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    let args = params.get("arguments");
    for (property, definition) in properties {
        let Some(suffix) = definition.get("x-mcp-header").and_then(Value::as_str) else {
            continue;
        };
        let header_name = format!("{}{suffix}", header::PARAM_PREFIX);
        let display = format!("Mcp-Param-{suffix}");
        let body = args
            .and_then(|a| a.get(property))
            .filter(|v| !v.is_null())
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        let sent = header_value(headers, &header_name)?;
        match (body, sent) {
            (None, None) => {}
            (Some(body), None) => {
                return Err(RpcError::header_mismatch(format!(
                    "the {display} header is required because argument {property:?} is present ({body:?})"
                )));
            }
            (None, Some(sent)) => return Err(mismatch(&display, &sent, "(argument absent)")),
            (Some(body), Some(sent)) if body != sent => {
                return Err(mismatch(&display, &sent, &body));
            }
            (Some(_), Some(_)) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn meta() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        })
    }

    fn headers(pairs: &[(&str, &str)]) -> RequestHeaders {
        let mut h = RequestHeaders::new();
        for (n, v) in pairs {
            h.push(n, v.as_bytes());
        }
        h
    }

    #[test]
    fn stdio_needs_only_the_meta() {
        let ok = admit("tools/list", &json!({"_meta": meta()}), None, false).unwrap();
        assert_eq!(ok.revision, Revision::V2026_07_28);
        assert_eq!(ok.log, LogPolicy::Silent);
        assert_eq!(
            admit("tools/list", &json!({}), None, false)
                .unwrap_err()
                .code,
            -32602
        );
        let old = json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2025-11-25",
            "io.modelcontextprotocol/clientCapabilities": {}}});
        let err = admit("tools/list", &old, None, false).unwrap_err();
        assert_eq!(err.code, -32022);
        assert_eq!(
            err.data.unwrap(),
            json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
        );
    }

    #[test]
    fn headers_must_match_the_body_in_a_fixed_order() {
        let body = json!({"_meta": meta(), "name": "test_simple_text"});
        let good = [
            ("MCP-Method", "tools/call"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Name", " test_simple_text "),
        ];
        assert!(admit("tools/call", &body, Some(&headers(&good)), false).is_ok());
        let no_method = headers(&good[1..]);
        assert_eq!(
            admit("tools/call", &body, Some(&no_method), false)
                .unwrap_err()
                .code,
            -32020
        );
        let upper = [("mcp-method", "TOOLS/CALL"), good[1], good[2]];
        assert_eq!(
            admit("tools/call", &body, Some(&headers(&upper)), false)
                .unwrap_err()
                .code,
            -32020
        );
        let wrong_name = [good[0], good[1], ("mcp-name", "other")];
        assert_eq!(
            admit("tools/call", &body, Some(&headers(&wrong_name)), false)
                .unwrap_err()
                .code,
            -32020
        );
        let missing_meta = json!({"name": "test_simple_text"});
        assert_eq!(
            admit("tools/call", &missing_meta, Some(&headers(&good)), false)
                .unwrap_err()
                .code,
            -32602
        );
    }

    #[test]
    fn param_headers_follow_x_mcp_header_with_strict_base64() {
        let body = json!({"_meta": meta(), "name": "test_custom_header", "arguments": {"region": "Hello"}});
        let base = [
            ("Mcp-Method", "tools/call"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Name", "test_custom_header"),
        ];
        let with = |v: &str| {
            let mut h = headers(&base);
            h.push("Mcp-Param-Region", v.as_bytes());
            h
        };
        assert!(
            admit(
                "tools/call",
                &body,
                Some(&with("=?base64?SGVsbG8=?=")),
                false
            )
            .is_ok()
        );
        assert!(admit("tools/call", &body, Some(&with("Hello")), false).is_ok());
        assert_eq!(
            admit(
                "tools/call",
                &body,
                Some(&with("=?base64?SGVsbG8?=")),
                false
            )
            .unwrap_err()
            .code,
            -32020
        );
        assert_eq!(
            admit(
                "tools/call",
                &body,
                Some(&with("=?base64?SGVs!!!bG8=?=")),
                false
            )
            .unwrap_err()
            .code,
            -32020
        );
        assert_eq!(
            admit("tools/call", &body, Some(&headers(&base)), false)
                .unwrap_err()
                .code,
            -32020
        );
        assert_eq!(
            decode_wrapped("=?base64?SGVsbG8="),
            Ok("=?base64?SGVsbG8=".to_owned())
        );
    }
}
