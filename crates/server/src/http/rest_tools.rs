//! The tools as a REST API described by OpenAPI (off unless `[rest] enabled = true`): for
//! callers that speak HTTP and OpenAPI rather than MCP (OpenAPI tool servers of chat front ends,
//! scripts, API clients generated from the document). `GET /rest/openapi.json` describes every
//! tool the caller may see as `POST /rest/{name}`, the body its arguments; the call goes through
//! the same pipeline as `/mcp` (`in_process`: authentication, rules, tool sets, approvals, rate
//! limits, the audit trail), and only the shapes are translated:
//!
//! - 200: the tool's structured content, else its text (one string, or an array of the text
//!   blocks), else its content blocks as they are;
//! - a failure: `{"detail", "type", "data"?}` with a status that says who should act (400 bad
//!   arguments, 403 refused, 404 no such tool, 422 the tool reported an error or needs input a
//!   REST call cannot give, 429 rate limited, 502 the server failed, 504 a deadline passed).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use manifold_wire::ErrorObject;
use serde_json::{Map, Value, json};

use super::AppState;
use super::edge_facts::EdgeFacts;
use super::failure_class::FailureClass;
use crate::in_process::{self, OnBehalf};

/// Where the view is served; the document lists its operations relative to it.
pub const REST_BASE: &str = "/rest";
/// What the view's requests declare as their client (audit rows name it).
const CLIENT_INFO: &str = r#"{"name":"manifold-rest","version":"1"}"#;

fn json_response(status: StatusCode, body: &Value) -> Response {
    super::reply::json(status, body.to_string())
}

/// A failure's body: what happened, its kind (`not_found`, `tool_error`, ...) and its data.
fn failure_body(kind: &str, detail: &str, data: Option<Value>) -> Value {
    let mut body = json!({ "detail": detail, "type": kind });
    if let Some(data) = data {
        body["data"] = data;
    }
    body
}

fn failure(status: StatusCode, kind: &str, detail: &str, data: Option<Value>) -> Response {
    json_response(status, &failure_body(kind, detail, data))
}

fn status_of(class: FailureClass) -> StatusCode {
    match class {
        FailureClass::NotFound => StatusCode::NOT_FOUND,
        FailureClass::InvalidArguments => StatusCode::BAD_REQUEST,
        FailureClass::ApprovalRequired | FailureClass::Forbidden => StatusCode::FORBIDDEN,
        FailureClass::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        FailureClass::Timeout => StatusCode::GATEWAY_TIMEOUT,
        FailureClass::NeedsInput => StatusCode::UNPROCESSABLE_ENTITY,
        FailureClass::Cancelled => StatusCode::SERVICE_UNAVAILABLE,
        FailureClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        FailureClass::Upstream => StatusCode::BAD_GATEWAY,
    }
}

fn gateway_failure(e: &ErrorObject) -> Response {
    let class = FailureClass::of(e);
    let data = e
        .data
        .as_ref()
        .and_then(|d| serde_json::from_str::<Value>(d.get()).ok());
    let detail = match class {
        FailureClass::NeedsInput => format!(
            "{}; a REST call cannot answer the tool's questions: call it over MCP at /mcp",
            e.message
        ),
        _ => e.message.clone(),
    };
    let mut response = failure(status_of(class), class.word(), &detail, data);
    if let Some(secs) = manifold_gateway::rate_limit::retry_after_secs_of_error(e) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
    }
    response
}

fn who(facts: &EdgeFacts) -> OnBehalf {
    OnBehalf {
        caller: facts.caller(),
        toolset: facts.toolset(),
        client_info: CLIENT_INFO,
    }
}

/// `GET /rest/openapi.json`.
pub(crate) async fn document(State(state): State<Arc<AppState>>, facts: EdgeFacts) -> Response {
    let tools =
        match in_process::list_all(&state.gateway, &who(&facts), "tools/list", "tools").await {
            Ok(t) => t,
            Err(e) => return gateway_failure(&e),
        };
    let catalog = state.gateway.catalog();
    let servers: Vec<String> = tools
        .iter()
        .map(|t| in_process::server_of_tool(&catalog, t))
        .collect();
    json_response(StatusCode::OK, &openapi_document(&tools, &servers))
}

/// `POST /rest/{name}`: the body is the arguments (an empty body is `{}`).
pub(crate) async fn call(
    State(state): State<Arc<AppState>>,
    facts: EdgeFacts,
    Path(name): Path<String>,
    body: axum::body::Body,
) -> Response {
    // The MCP endpoint's own bound (the router turns axum's default limit off).
    let limit = state.settings.limits.max_body_bytes;
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        return failure(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_arguments",
            &format!(
                "the request is larger than {limit} bytes (max_body_bytes), or could not be read"
            ),
            None,
        );
    };
    let arguments: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return failure(
                    StatusCode::BAD_REQUEST,
                    "invalid_arguments",
                    &format!("the body is not JSON: {e}; send the tool's arguments as an object"),
                    None,
                );
            }
        }
    };
    if !arguments.is_object() {
        return failure(
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
            &format!("the body must be a JSON object of {name}'s arguments"),
            None,
        );
    }
    let params = json!({ "name": name, "arguments": arguments });
    let answered = in_process::request(&state.gateway, &who(&facts), "tools/call", &params).await;
    match answered.result {
        Ok(result) => match result_body(&name, &result) {
            Ok(body) => json_response(StatusCode::OK, &body),
            Err(failed) => json_response(StatusCode::UNPROCESSABLE_ENTITY, &failed),
        },
        Err(e) => gateway_failure(&e),
    }
}

/// The 200 body of a tool's result, or the body of the failure (422) it is.
fn result_body(name: &str, result: &Value) -> Result<Value, Value> {
    if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
        return Err(failure_body(
            "input_required",
            &format!(
                "{name} asks its caller for input (a form, a sampled message or the roots), which a REST call cannot give; call it over MCP at /mcp"
            ),
            result.get("inputRequests").cloned(),
        ));
    }
    let content = result.get("content").cloned().unwrap_or_else(|| json!([]));
    let blocks = content.as_array().map(Vec::as_slice).unwrap_or_default();
    let texts: Option<Vec<&str>> = blocks
        .iter()
        .map(|b| {
            (b.get("type").and_then(Value::as_str) == Some("text"))
                .then(|| b.get("text").and_then(Value::as_str))
                .flatten()
        })
        .collect();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let detail = texts
            .filter(|t| !t.is_empty())
            .map_or_else(|| format!("{name} reported an error"), |t| t.join("\n"));
        return Err(failure_body(
            "tool_error",
            &detail,
            Some(json!({ "content": content })),
        ));
    }
    if let Some(structured) = result.get("structuredContent") {
        return Ok(structured.clone());
    }
    Ok(match texts {
        Some(t) if t.len() == 1 => json!(t[0]),
        Some(t) if !t.is_empty() => json!(t),
        _ => content,
    })
}

/// Whether a tool's name can stand as one path segment of an OpenAPI path template as it is.
fn fits_a_path(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// One JSON Pointer token (`~` and `/` escaped).
fn pointer_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// A tool's schema as it stands inside the document: its local references (`#/$defs/X`, `#`)
/// are resolved against the document's root by OpenAPI readers, so they are made to point at
/// where the schema now is.
fn placed(schema: &Value, at: &str) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("$ref", Value::String(r)) if r == "#" || r.starts_with("#/") => {
                            Value::String(format!("#{at}{}", &r[1..]))
                        }
                        _ => placed(v, at),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| placed(v, at)).collect()),
        other => other.clone(),
    }
}

/// The OpenAPI 3.1 document of `tools` (each beside the server it comes from).
fn openapi_document(tools: &[Value], servers: &[String]) -> Value {
    let mut paths = Map::new();
    for (tool, server) in tools.iter().zip(servers) {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            continue;
        };
        if !fits_a_path(name) {
            continue;
        }
        let operation = format!("/paths/{}/post", pointer_token(&format!("/{name}")));
        let input = tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        let output = tool
            .get("outputSchema")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let summary = tool
            .get("title")
            .or_else(|| tool.get("annotations").and_then(|a| a.get("title")))
            .cloned()
            .unwrap_or_else(|| json!(name));
        let mut post = json!({
            "operationId": name,
            "summary": summary,
            "tags": [server],
            "requestBody": {
                "required": true,
                "content": { "application/json": {
                    "schema": placed(&input, &format!("{operation}/requestBody/content/application~1json/schema")),
                } },
            },
            "responses": {
                "200": {
                    "description": "The tool's structured content, else its text (one string, or an array of the text blocks), else its content blocks",
                    "content": { "application/json": {
                        "schema": placed(&output, &format!("{operation}/responses/200/content/application~1json/schema")),
                    } },
                },
                "default": {
                    "description": "The call failed: 400 bad arguments, 403 refused, 404 no such tool, 422 the tool reported an error or needs input, 429 rate limited, 502 the server failed, 504 a deadline passed",
                    "content": { "application/json": {
                        "schema": { "$ref": "#/components/schemas/Failure" },
                    } },
                },
            },
        });
        if let Some(description) = tool.get("description") {
            post["description"] = description.clone();
        }
        paths.insert(format!("/{name}"), json!({ "post": post }));
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Manifold tools",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The tools of the MCP servers behind this Manifold gateway that the caller may use, each callable with its arguments as the body.",
        },
        "servers": [{ "url": REST_BASE }],
        // A bearer key when the gateway asks for one; none when authentication is off.
        "security": [{ "bearer": [] }, {}],
        "paths": paths,
        "components": {
            "schemas": {
                "Failure": {
                    "type": "object",
                    "required": ["detail", "type"],
                    "properties": {
                        "detail": { "type": "string", "description": "What happened" },
                        "type": { "type": "string", "description": "invalid_arguments, forbidden, approval_required, not_found, tool_error, input_required, rate_limited, upstream_error, timeout, cancelled or internal" },
                        "data": { "description": "The gateway's own data on the failure, or the tool's content" },
                    },
                },
            },
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer" },
            },
        },
    })
}

#[cfg(test)]
mod tests;
