//! The legacy MetaForge dialect at `POST /rpc` (off unless `[metaforge] enabled = true`): older
//! callers speak `tool/list`, `tool/call` and `health/check` as JSON-RPC and expect MetaForge's
//! shapes. A thin view: each method becomes the MCP request it means and goes through the same
//! pipeline (`in_process`: the caller's rules, approvals, rate limits, audit) as `/mcp`, behind
//! the same authentication; only the answer's shape is translated.
//!
//! Shapes, as docs/configuration.md ("The MetaForge dialect") describes them:
//! - `tool/list` -> `{"tools": [ToolManifest]}`, a ToolManifest being `tool_id`, `adapter`,
//!   `name`, `description`, `input_schema`, `output_schema`, `annotations`;
//! - `tool/call {tool_id, arguments, timeout_seconds?, trace_id?}` -> ToolCallResult `tool_id`,
//!   `status` (`success` | `error`), `data`, `content`, `error`, `duration_ms`, `trace_id`;
//! - `health/check` -> `status`, `unreachable_adapters`, `detail`, `adapters`;
//! - errors: the JSON-RPC error with `data.error_type` (`parse_error`, `invalid_request`,
//!   `method_not_found`, `invalid_arguments`, `not_found`, `forbidden`, `approval_required`,
//!   `rate_limited`, `timeout`, `cancelled`, `upstream_error`, `internal`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use manifold_wire::ErrorObject;
use serde_json::{Map, Value, json};

use super::AppState;
use super::edge_facts::EdgeFacts;
use super::failure_class::FailureClass;
use crate::in_process::{self, OnBehalf};

/// What the dialect's requests declare as their client (audit rows name it).
const CLIENT_INFO: &str = r#"{"name":"metaforge-rpc","version":"1"}"#;
/// The longest `timeout_seconds` a call may ask for.
pub const MAX_TIMEOUT_SECONDS: f64 = 3600.0;

fn answer(body: Value) -> Response {
    super::reply::json(StatusCode::OK, body.to_string())
}

fn failure(
    id: &Value,
    code: i64,
    message: &str,
    error_type: &str,
    extra: Map<String, Value>,
) -> Response {
    let mut data = extra;
    data.insert("error_type".to_owned(), json!(error_type));
    answer(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message, "data": data },
    }))
}

fn success(id: &Value, result: Value) -> Response {
    answer(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
}

/// The MetaForge `error_type` of a gateway error. The dialect names its own deadline
/// (`timeout_seconds`) `timeout`; the gateway's, and a server's need of a capability the
/// dialect cannot offer, are upstream errors to it, as they always were.
fn error_type(e: &ErrorObject) -> &'static str {
    match FailureClass::of(e) {
        FailureClass::Timeout | FailureClass::NeedsInput => "upstream_error",
        class => class.word(),
    }
}

fn gateway_failure(id: &Value, e: &ErrorObject, extra: Map<String, Value>) -> Response {
    let mut extra = extra;
    if let Some(d) = e
        .data
        .as_ref()
        .and_then(|d| serde_json::from_str::<Value>(d.get()).ok())
    {
        extra.insert("detail".to_owned(), d);
    }
    failure(id, e.code, &e.message, error_type(e), extra)
}

/// `POST /rpc`.
pub(crate) async fn endpoint(
    State(state): State<Arc<AppState>>,
    facts: EdgeFacts,
    body: axum::body::Body,
) -> Response {
    // The MCP endpoint's own bound (the router turns axum's default limit off).
    let limit = state.settings.limits.max_body_bytes;
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        return failure(
            &Value::Null,
            -32600,
            &format!(
                "the request is larger than {limit} bytes (max_body_bytes), or could not be read"
            ),
            "invalid_request",
            Map::new(),
        );
    };
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return failure(
                &Value::Null,
                -32700,
                &format!("the body is not JSON: {e}"),
                "parse_error",
                Map::new(),
            );
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return failure(
            &id,
            -32600,
            "a request is a JSON object with a \"method\" string (tool/list, tool/call, health/check)",
            "invalid_request",
            Map::new(),
        );
    };
    let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
    let who = OnBehalf {
        caller: facts.caller(),
        toolset: facts.toolset(),
        client_info: CLIENT_INFO,
    };
    match method {
        "tool/list" => tool_list(&state, &who, &id).await,
        "tool/call" => tool_call(&state, &who, &id, &params).await,
        "health/check" => health_check(&state, &who, &id).await,
        other => failure(
            &id,
            -32601,
            &format!(
                "{other:?} is not a method of this endpoint; it answers tool/list, tool/call and health/check"
            ),
            "method_not_found",
            Map::new(),
        ),
    }
}

fn text(v: &Value, key: &str) -> Value {
    v.get(key).cloned().unwrap_or(Value::Null)
}

async fn tool_list(state: &AppState, who: &OnBehalf, id: &Value) -> Response {
    let tools = match in_process::list_all(&state.gateway, who, "tools/list", "tools").await {
        Ok(t) => t,
        Err(e) => return gateway_failure(id, &e, Map::new()),
    };
    let catalog = state.gateway.catalog();
    let manifests: Vec<Value> = tools
        .iter()
        .map(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            let adapter = in_process::server_of_tool(&catalog, t);
            json!({
                "tool_id": name,
                "adapter": adapter,
                "name": t.get("title").cloned().unwrap_or_else(|| json!(name)),
                "description": text(t, "description"),
                "input_schema": text(t, "inputSchema"),
                "output_schema": text(t, "outputSchema"),
                "annotations": t.get("annotations").cloned().unwrap_or_else(|| json!({})),
            })
        })
        .collect();
    success(id, json!({ "tools": manifests }))
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
async fn tool_call(state: &AppState, who: &OnBehalf, id: &Value, params: &Value) -> Response {
    let trace_id = params.get("trace_id").cloned().unwrap_or(Value::Null);
    let mut extra = Map::new();
    extra.insert("trace_id".to_owned(), trace_id.clone());
    let Some(tool_id) = params.get("tool_id").and_then(Value::as_str) else {
        return failure(
            id,
            -32602,
            "tool/call needs params.tool_id, the tool's name as tool/list gives it",
            "invalid_arguments",
            extra,
        );
    };
    extra.insert("tool_id".to_owned(), json!(tool_id));
    let arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if !arguments.is_object() {
        return failure(
            id,
            -32602,
            "params.arguments must be a JSON object",
            "invalid_arguments",
            extra,
        );
    }
    let timeout = match params.get("timeout_seconds") {
        None | Some(Value::Null) => None,
        Some(t) => match t.as_f64() {
            Some(s) if s > 0.0 && s <= MAX_TIMEOUT_SECONDS => Some(Duration::from_secs_f64(s)),
            _ => {
                return failure(
                    id,
                    -32602,
                    &format!(
                        "params.timeout_seconds must be a number above 0 and at most {MAX_TIMEOUT_SECONDS}"
                    ),
                    "invalid_arguments",
                    extra,
                );
            }
        },
    };
    let call = json!({ "name": tool_id, "arguments": arguments });
    let started = Instant::now();
    let answered = in_process::request(&state.gateway, who, "tools/call", &call);
    let answered = match timeout {
        None => answered.await,
        Some(limit) => match tokio::time::timeout(limit, answered).await {
            Ok(a) => a,
            // Dropping the request cancelled the call upstream.
            Err(_) => {
                return failure(
                    id,
                    -32001,
                    &format!(
                        "{tool_id} did not answer within timeout_seconds ({} s); the call was cancelled",
                        limit.as_secs_f64()
                    ),
                    "timeout",
                    extra,
                );
            }
        },
    };
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let result = match answered.result {
        Ok(r) => r,
        Err(e) => return gateway_failure(id, &e, extra),
    };
    let content = result.get("content").cloned().unwrap_or_else(|| json!([]));
    let texts: Vec<&str> = content
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let data = match result.get("structuredContent") {
        Some(s) => s.clone(),
        None if !texts.is_empty() => json!(texts.join("\n")),
        None => content.clone(),
    };
    let mut out = json!({
        "tool_id": tool_id,
        "status": if is_error { "error" } else { "success" },
        "data": if is_error { Value::Null } else { data },
        "content": content,
        "duration_ms": duration_ms,
        "trace_id": trace_id,
    });
    if is_error {
        out["error"] = json!({ "message": texts.join("\n"), "error_type": "tool_error" });
    }
    success(id, out)
}

async fn health_check(state: &AppState, who: &OnBehalf, id: &Value) -> Response {
    let call = json!({ "name": manifold_gateway::builtin::HEALTH, "arguments": {} });
    let result = match in_process::request(&state.gateway, who, "tools/call", &call)
        .await
        .result
    {
        Ok(r) => r,
        Err(e) => return gateway_failure(id, &e, Map::new()),
    };
    let health = result
        .get("structuredContent")
        .cloned()
        .unwrap_or(Value::Null);
    let upstreams = health
        .get("upstreams")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let unreachable: Vec<Value> = upstreams
        .iter()
        .filter(|u| !matches!(u.get("state").and_then(Value::as_str), Some("up" | "idle")))
        .filter_map(|u| u.get("name").cloned())
        .collect();
    let adapters: Vec<Value> = upstreams
        .iter()
        .map(|u| {
            json!({
                "name": text(u, "name"),
                "state": text(u, "state"),
                "reachable": text(u, "reachable"),
                "tools": text(u, "tools"),
                "restarts": text(u, "restarts"),
                "last_error": text(u, "lastError"),
            })
        })
        .collect();
    let detail = result
        .get("content")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("text"))
        .cloned()
        .unwrap_or(Value::Null);
    success(
        id,
        json!({
            "status": health.get("status").cloned().unwrap_or_else(|| json!("degraded")),
            "unreachable_adapters": unreachable,
            "detail": detail,
            "adapters": adapters,
        }),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_gateways_own_deadline_is_an_upstream_error_to_the_dialect() {
        let e = ErrorObject::new(manifold_wire::ErrorCode::RequestTimeout, "deadline");
        assert_eq!(error_type(&e), "upstream_error");
        let e = ErrorObject::new(manifold_wire::ErrorCode::Forbidden, "rule x");
        assert_eq!(error_type(&e), "forbidden");
    }
}
