//! The request metadata headers of modern Streamable HTTP (2026-07-28).
//!
//! Intermediaries route on `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` without reading bodies, and
//! servers reject a request whose headers disagree with its body; so the values are derived here
//! from the exact message being sent, and encoded by the specification's one rule for values a
//! header cannot carry as they are (`=?base64?...?=`).

use std::collections::HashMap;

use base64::Engine as _;
use manifold_wire::{Message, meta, patch};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::transport::RejectedTool;

/// Opens a Base64-encoded header value.
pub const BASE64_PREFIX: &str = "=?base64?";
/// Closes a Base64-encoded header value.
pub const BASE64_SUFFIX: &str = "?=";
/// The largest integer a mirrored argument may hold (JavaScript's safe range).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Encodes a value for `Mcp-Name` or `Mcp-Param-*`: as is when it is plain printable ASCII
/// without leading or trailing whitespace, otherwise Base64 of its UTF-8 in the sentinel form.
pub fn encode_header_value(value: &str) -> String {
    let printable = value
        .bytes()
        .all(|b| (0x20..=0x7e).contains(&b) || b == b'\t');
    let padded = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let looks_encoded = value.starts_with(BASE64_PREFIX) && value.ends_with(BASE64_SUFFIX);
    if printable && !padded && !looks_encoded {
        return value.to_owned();
    }
    format!(
        "{BASE64_PREFIX}{}{BASE64_SUFFIX}",
        base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
    )
}

/// One tool argument mirrored into a header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ParamHeader {
    /// Property names from the arguments object down to the value.
    path: Vec<String>,
    /// The `x-mcp-header` value: the header is `Mcp-Param-{name}`.
    name: String,
}

/// Which arguments of which tools carry `x-mcp-header`, learnt from tool definitions.
#[derive(Debug, Default)]
pub struct ToolHeaders {
    by_tool: HashMap<String, Vec<ParamHeader>>,
}

impl ToolHeaders {
    /// Records one tool definition (raw JSON). A tool whose annotations break the rules is
    /// returned as rejected and mirrors nothing.
    pub fn learn(&mut self, tool_json: &str) -> Result<(), RejectedTool> {
        let tool: Value = serde_json::from_str(tool_json).map_err(|e| RejectedTool {
            name: String::new(),
            reason: format!("the tool definition is not JSON: {e}"),
        })?;
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let reject = |reason: String| RejectedTool {
            name: name.clone(),
            reason,
        };
        let mut found = Vec::new();
        if let Some(schema) = tool.get("inputSchema") {
            walk_schema(schema, Some(&mut Vec::new()), &mut found).map_err(reject)?;
        }
        let mut seen: Vec<String> = Vec::new();
        for header in &found {
            let lower = header.name.to_ascii_lowercase();
            if seen.contains(&lower) {
                return Err(reject(format!(
                    "x-mcp-header {:?} is used twice (header names are case-insensitive)",
                    header.name
                )));
            }
            seen.push(lower);
        }
        if found.is_empty() {
            self.by_tool.remove(&name);
        } else {
            self.by_tool.insert(name, found);
        }
        Ok(())
    }

    /// The `Mcp-Param-*` headers of a `tools/call` with these raw params.
    fn headers_for(&self, params: &str) -> Vec<(String, String)> {
        let Some(tool) = patch::decoded::get_str(params, &["name"]).ok().flatten() else {
            return Vec::new();
        };
        let Some(annotated) = self.by_tool.get(&tool) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for header in annotated {
            let mut path: Vec<&str> = vec!["arguments"];
            path.extend(header.path.iter().map(String::as_str));
            let Some(raw) = patch::decoded::get(params, &path).ok().flatten() else {
                continue;
            };
            match header_text(raw) {
                Some(text) => out.push((
                    format!("Mcp-Param-{}", header.name),
                    encode_header_value(&text),
                )),
                None => {
                    tracing::debug!(tool = %tool, header = %header.name, "argument is null or not a string, integer or boolean; no header sent");
                }
            }
        }
        out
    }
}

/// The header text of an argument value, or `None` when no header is sent for it.
fn header_text(raw: &str) -> Option<String> {
    let raw = raw.trim();
    match raw.as_bytes().first()? {
        b'"' => serde_json::from_str::<String>(raw).ok(),
        b't' | b'f' => serde_json::from_str::<bool>(raw)
            .ok()
            .map(|b| b.to_string()),
        b'-' | b'0'..=b'9' => {
            let n: i64 = if raw.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
                let f: f64 = raw.parse().ok()?;
                if f.fract() != 0.0 || f.abs() > MAX_SAFE_INTEGER as f64 {
                    return None;
                }
                f as i64
            } else {
                raw.parse().ok()?
            };
            (n.abs() <= MAX_SAFE_INTEGER).then(|| n.to_string())
        }
        _ => None,
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Keywords whose values are data, not schemas: an `x-mcp-header` key inside them annotates nothing.
const DATA_KEYWORDS: &[&str] = &["default", "const", "enum", "examples", "example"];

/// Walks a schema collecting annotations. `path` is `Some` while the node is statically reachable
/// from the root through `properties` alone; an annotation anywhere else invalidates the tool.
fn walk_schema(
    node: &Value,
    path: Option<&mut Vec<String>>,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    match node {
        Value::Array(items) => {
            for item in items {
                walk_schema(item, None, found)?;
            }
            Ok(())
        }
        Value::Object(map) => {
            let mut path = path;
            if let Some(annotation) = map.get("x-mcp-header") {
                match path.as_deref() {
                    Some(p) if !p.is_empty() => {
                        let name = validate_annotation(annotation, node, p)?;
                        found.push(ParamHeader {
                            path: p.clone(),
                            name,
                        });
                    }
                    _ => {
                        return Err(
                            "x-mcp-header appears where it is not a property reachable through \"properties\" alone (under items, oneOf/anyOf/allOf, $ref or at the root)".to_owned(),
                        );
                    }
                }
            }
            for (key, value) in map {
                if key == "x-mcp-header" || DATA_KEYWORDS.contains(&key.as_str()) {
                    continue;
                }
                if key == "properties"
                    && let Value::Object(props) = value
                {
                    for (prop, schema) in props {
                        match path.as_deref_mut() {
                            Some(p) => {
                                p.push(prop.clone());
                                let result = walk_schema(schema, Some(p), found);
                                p.pop();
                                result?;
                            }
                            None => walk_schema(schema, None, found)?,
                        }
                    }
                    continue;
                }
                walk_schema(value, None, found)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn validate_annotation(
    annotation: &Value,
    schema: &Value,
    path: &[String],
) -> Result<String, String> {
    let at = path.join(".");
    let Some(name) = annotation.as_str() else {
        return Err(format!("x-mcp-header of argument {at:?} is not a string"));
    };
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(format!(
            "x-mcp-header {name:?} of argument {at:?} is not a valid HTTP header name token"
        ));
    }
    let allowed = |t: &str| matches!(t, "string" | "integer" | "boolean");
    let typed = match schema.get("type") {
        Some(Value::String(t)) => allowed(t),
        Some(Value::Array(ts)) => {
            let names: Option<Vec<&str>> = ts.iter().map(Value::as_str).collect();
            names.is_some_and(|n| {
                n.iter().any(|t| *t != "null") && n.iter().all(|t| *t == "null" || allowed(t))
            })
        }
        _ => false,
    };
    if !typed {
        return Err(format!(
            "x-mcp-header {name:?} is on argument {at:?}, which is not of type string, integer or boolean"
        ));
    }
    Ok(name.to_owned())
}

/// The headers of a modern-era POST carrying `message` at `revision`.
pub fn modern_headers(message: &Message, revision: &str, tools: &ToolHeaders) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut put = |name: &str, value: &str| match (
        HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        (Ok(n), Ok(v)) => {
            headers.insert(n, v);
        }
        _ => {
            tracing::warn!(header = %name, "a request header could not be formed; it is left out");
        }
    };
    put(meta::header::PROTOCOL_VERSION, revision);
    let Some(method) = message.method() else {
        return headers;
    };
    put(meta::header::METHOD, &encode_header_value(method));
    if let Some(key) = meta::name_param_of(method)
        && let Some(name) = message.params_str(&[key])
    {
        put(meta::header::NAME, &encode_header_value(&name));
    }
    if method == meta::method::TOOLS_CALL
        && let Some(params) = message.params()
    {
        for (name, value) in tools.headers_for(params) {
            put(&name, &value);
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use manifold_wire::Id;

    #[test]
    fn values_follow_the_specification_examples() {
        assert_eq!(encode_header_value("us-west1"), "us-west1");
        assert_eq!(
            encode_header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(encode_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(
            encode_header_value("line1\nline2"),
            "=?base64?bGluZTEKbGluZTI=?="
        );
        assert_eq!(
            encode_header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }

    fn tool(schema: &str) -> String {
        format!(r#"{{"name":"t","inputSchema":{schema}}}"#)
    }

    #[test]
    fn annotated_arguments_become_param_headers() {
        let mut tools = ToolHeaders::default();
        tools
            .learn(&tool(
                r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"flag":{"type":"boolean","x-mcp-header":"Flag"},"deep":{"type":"object","properties":{"id":{"type":["string","null"],"x-mcp-header":"Deep-Id"}}}}}"#,
            ))
            .unwrap();
        let message = Message::request(
            &Id::Num(1),
            "tools/call",
            Some(
                r#"{"name":"t","arguments":{"region":"é","n":42.0,"flag":false,"deep":{"id":null}}}"#,
            ),
        );
        let headers = modern_headers(&message, "2026-07-28", &tools);
        assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
        assert_eq!(headers["mcp-method"], "tools/call");
        assert_eq!(headers["mcp-name"], "t");
        assert_eq!(headers["mcp-param-region"], "=?base64?w6k=?=");
        assert_eq!(headers["mcp-param-n"], "42");
        assert_eq!(headers["mcp-param-flag"], "false");
        assert!(headers.get("mcp-param-deep-id").is_none());
        assert_eq!(headers.len(), 6);
    }

    #[test]
    fn misplaced_or_invalid_annotations_reject_the_tool() {
        let cases = [
            (r#"{"type":"object","x-mcp-header":"Root"}"#, "root"),
            (
                r#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}"#,
                "items",
            ),
            (
                r#"{"type":"object","properties":{"a":{"anyOf":[{"type":"string","x-mcp-header":"A"}]}}}"#,
                "oneOf",
            ),
            (
                r#"{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}"#,
                "not of type",
            ),
            (
                r#"{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}"#,
                "token",
            ),
            (
                r#"{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}"#,
                "token",
            ),
            (
                r#"{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}"#,
                "twice",
            ),
        ];
        for (schema, why) in cases {
            let mut tools = ToolHeaders::default();
            let rejected = tools.learn(&tool(schema)).unwrap_err();
            assert_eq!(rejected.name, "t");
            assert!(
                rejected.reason.contains(why),
                "{schema}: {}",
                rejected.reason
            );
            assert!(tools.by_tool.is_empty());
        }
    }

    #[test]
    fn a_property_named_like_the_keyword_is_not_an_annotation() {
        let mut tools = ToolHeaders::default();
        tools
            .learn(&tool(
                r#"{"type":"object","properties":{"x-mcp-header":{"type":"string","default":{"x-mcp-header":"no"}}}}"#,
            ))
            .unwrap();
        assert!(tools.by_tool.is_empty());
    }

    #[test]
    fn names_and_uris_are_mirrored_for_their_methods() {
        let tools = ToolHeaders::default();
        let read = Message::request(
            &Id::Num(2),
            "resources/read",
            Some(r#"{"uri":"file:///ü"}"#),
        );
        let headers = modern_headers(&read, "2026-07-28", &tools);
        assert_eq!(headers["mcp-name"], "=?base64?ZmlsZTovLy/DvA==?=");
        let list = Message::request(&Id::Num(3), "tools/list", None);
        let headers = modern_headers(&list, "2026-07-28", &tools);
        assert!(headers.get("mcp-name").is_none());
        assert_eq!(headers["mcp-method"], "tools/list");
    }
}
