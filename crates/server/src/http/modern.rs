//! The modern era (2026-07-28) on `/mcp`: stateless POSTs, each carrying who the client is.
//!
//! Every request is checked before it reaches the gateway: its `_meta` (-32602 when incomplete),
//! the headers that mirror its body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`: -32020
//! when missing or different), and its revision (-32022). Unknown methods are 404 with -32601.
//! A reply stream that closes cancels its request at once (no resumption in this era).
//! `Mcp-Param-*` headers are checked for `tools/call` against the arguments their tool's schema
//! marks with `x-mcp-header` (Manifold processes the body, so the spec makes it validate them);
//! Manifold's own upstream client mirrors them again for each upstream, so they are not forwarded.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use manifold_gateway::RequestContext;
use manifold_telemetry::RequestOutcome;
use manifold_wire::{Era, ErrorCode, ErrorObject, Id, Kind, Message, meta};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::edge_facts::EdgeFacts;
use super::exchange::{ReplyMode, accepts, deliver, header, reply_mode};
use super::reply;
use crate::accept::Accepts;
use crate::events::ListenFilter;
use crate::modern_meta::{read_meta, stated_revision};
use crate::session::{ModernPeer, Outlet, run_call};
use crate::stream_log::{ReaderOptions, StreamLog};

/// Decodes a `=?base64?...?=` header value (the spec's encoding of non-ASCII values).
pub fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(value.to_owned()),
    }
}

/// Checks the headers that mirror the body; the error says which and how.
fn check_headers(headers: &HeaderMap, message: &Message, stated: &str) -> Result<(), String> {
    let method = message.method().unwrap_or_default();
    match header(headers, meta::header::PROTOCOL_VERSION) {
        None => {
            return Err("Header mismatch: the MCP-Protocol-Version header is missing".to_owned());
        }
        Some(v) if v != stated => {
            return Err(format!(
                "Header mismatch: MCP-Protocol-Version header value {v:?} does not match body value {stated:?}"
            ));
        }
        Some(_) => {}
    }
    match header(headers, meta::header::METHOD) {
        None => return Err("Header mismatch: the Mcp-Method header is missing".to_owned()),
        Some(v) if v != method => {
            return Err(format!(
                "Header mismatch: Mcp-Method header value {v:?} does not match body value {method:?}"
            ));
        }
        Some(_) => {}
    }
    if let Some(key) = meta::name_param_of(method) {
        let body = message.params_str(&[key]).unwrap_or_default();
        let Some(raw) = header(headers, meta::header::NAME) else {
            return Err(format!(
                "Header mismatch: the Mcp-Name header is missing (it mirrors params.{key})"
            ));
        };
        match decode_header_value(raw) {
            Some(v) if v == body => {}
            _ => {
                return Err(format!(
                    "Header mismatch: Mcp-Name header value {raw:?} does not match body value {body:?}"
                ));
            }
        }
    }
    Ok(())
}

/// The `x-mcp-header` annotations of a tool's input schema: (header name, argument path), for
/// properties reached through `properties` alone, as the spec requires.
pub fn mirrored_arguments(input_schema: &serde_json::Value) -> Vec<(String, Vec<String>)> {
    fn walk(
        schema: &serde_json::Value,
        path: &mut Vec<String>,
        out: &mut Vec<(String, Vec<String>)>,
    ) {
        let Some(properties) = schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
        else {
            return;
        };
        for (key, sub) in properties {
            path.push(key.clone());
            if let Some(name) = sub.get("x-mcp-header").and_then(serde_json::Value::as_str) {
                out.push((name.to_owned(), path.clone()));
            }
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut out);
    out
}

/// Whether a header value (decoded) says the same as an argument's JSON value.
fn same_value(header: &str, value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(s) => header == s,
        serde_json::Value::Bool(b) => header == if *b { "true" } else { "false" },
        serde_json::Value::Number(n) => match (header.parse::<f64>(), n.as_f64()) {
            (Ok(h), Some(v)) => h == v,
            _ => false,
        },
        _ => false,
    }
}

/// Checks the `Mcp-Param-*` headers of a `tools/call` against the tool's annotated arguments.
fn check_param_headers(
    state: &AppState,
    headers: &HeaderMap,
    message: &Message,
) -> Result<(), String> {
    if message.method() != Some(meta::method::TOOLS_CALL) {
        return Ok(());
    }
    let Some(name) = message.params_str(&["name"]) else {
        return Ok(());
    };
    let catalog = state.gateway.catalog();
    let Some(tool) = catalog.tools.iter().find(|t| t.exposed == name) else {
        return Ok(());
    };
    let schema = serde_json::from_str::<serde_json::Value>(&tool.raw)
        .ok()
        .and_then(|t| t.get("inputSchema").cloned())
        .unwrap_or(serde_json::Value::Null);
    let arguments: serde_json::Value = message
        .params_raw(&["arguments"])
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or(serde_json::Value::Null);
    for (header_name, path) in mirrored_arguments(&schema) {
        let value = path.iter().try_fold(&arguments, |v, k| v.get(k.as_str()));
        let Some(value) = value.filter(|v| !v.is_null()) else {
            continue;
        };
        let wire_name = format!(
            "{}{}",
            meta::header::PARAM_PREFIX,
            header_name.to_ascii_lowercase()
        );
        let Some(raw) = header(headers, &wire_name) else {
            return Err(format!(
                "Header mismatch: the Mcp-Param-{header_name} header is missing, but arguments.{} is set",
                path.join(".")
            ));
        };
        match decode_header_value(raw) {
            Some(decoded) if same_value(&decoded, value) => {}
            Some(_) => {
                return Err(format!(
                    "Header mismatch: Mcp-Param-{header_name} header value {raw:?} does not match body value {value}"
                ));
            }
            None => {
                return Err(format!(
                    "Header mismatch: Mcp-Param-{header_name} header value {raw:?} is not valid Base64 inside =?base64?...?="
                ));
            }
        }
    }
    Ok(())
}

fn status_of(data: &str) -> StatusCode {
    let code = manifold_wire::patch::get(data, &["error", "code"])
        .ok()
        .flatten()
        .and_then(|c| c.parse::<i64>().ok());
    match code {
        Some(-32021 | -32022) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// A modern call's messages go to its reply log (a JSON-only client gets none of them).
struct ReplyOutlet {
    log: Arc<StreamLog>,
    json_only: bool,
}

impl Outlet for ReplyOutlet {
    fn send(&self, message: &Message) -> bool {
        !self.json_only && self.log.push(message.as_str())
    }
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub(crate) async fn post(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    message: Message,
    facts: &EdgeFacts,
) -> Response {
    let id = message.id().cloned();
    match message.kind() {
        Kind::Notification => return reply::accepted(),
        Kind::Result | Kind::Error => {
            return reply::error(
                StatusCode::BAD_REQUEST,
                None,
                ErrorCode::InvalidRequest,
                "Bad Request: the 2026-07-28 era has no server-to-client requests to answer",
            );
        }
        Kind::Request => {}
    }
    let Some(stated) = stated_revision(&message) else {
        let e = read_meta(&message).err().unwrap_or_else(|| {
            ErrorObject::new(ErrorCode::InvalidParams, "params._meta is required")
        });
        return reply::rpc_error(StatusCode::BAD_REQUEST, id.as_ref(), &e);
    };
    let checked = check_headers(headers, &message, &stated)
        .and_then(|()| check_param_headers(state, headers, &message));
    if let Err(why) = checked {
        return reply::error(
            StatusCode::BAD_REQUEST,
            id.as_ref(),
            ErrorCode::HeaderMismatch,
            why,
        );
    }
    let meta = match read_meta(&message) {
        Ok(m) => m,
        Err(e) => return reply::rpc_error(StatusCode::BAD_REQUEST, id.as_ref(), &e),
    };
    let method = message.method().unwrap_or_default();
    let Some(request_id) = id else {
        return reply::accepted();
    };
    if method == meta::method::DISCOVER {
        super::metering::count_request(state, method, Era::Modern, RequestOutcome::Ok);
        return reply::json(
            StatusCode::OK,
            Message::result(&request_id, &state.gateway.discover_result())
                .as_str()
                .to_owned(),
        );
    }
    let accepts = accepts(headers);
    if method == meta::method::SUBSCRIPTIONS_LISTEN {
        let r = listen(state, (&accepts, facts), &message, &request_id);
        if r.status().is_success() {
            super::metering::count_request(state, method, Era::Modern, RequestOutcome::Ok);
        }
        return r;
    }
    if !meta::MODERN_METHODS.contains(&method) {
        return reply::error(
            StatusCode::NOT_FOUND,
            Some(&request_id),
            ErrorCode::MethodNotFound,
            format!("Method not found: Manifold does not serve {method:?} in the 2026-07-28 era"),
        );
    }
    if !accepts.json_ok() && !accepts.sse_ok() {
        return reply::not_acceptable(Some(&request_id), "application/json or text/event-stream");
    }
    let mode = reply_mode(&accepts, &message);
    let limits = state.settings.limits;
    let log = StreamLog::new(
        None,
        None,
        limits.resume_buffer_events,
        limits.resume_buffer_bytes,
    );
    let token = state.stop.child_token();
    log.set_abandon(token.clone());
    let ctx = RequestContext {
        client: meta.client_view(),
        peer: Arc::new(ModernPeer {
            outlet: Arc::new(ReplyOutlet {
                log: Arc::clone(&log),
                json_only: mode == ReplyMode::JsonOnly,
            }),
            log_level: meta.log_level,
        }),
        session: None,
        caller: facts.caller(),
        toolset: facts.toolset(),
        trace: facts.trace.clone(),
        audit: Default::default(),
    };
    {
        let gateway = state.gateway.clone();
        let log = Arc::clone(&log);
        let token = token.clone();
        tokio::spawn(async move {
            match run_call(&gateway, ctx, &message, &token).await {
                Some(response) => log.push_final(response.as_str()),
                None => log.finish(),
            }
        });
    }
    let stop = state.stop.clone();
    let keepalive = limits.keepalive_interval;
    deliver(
        &log,
        mode,
        token.clone(),
        Some(&request_id),
        status_of,
        || modern_reader(&log, keepalive, stop, None),
    )
    .await
}

/// An SSE response following a modern reply; closing it cancels the call at once.
fn modern_reader(
    log: &Arc<StreamLog>,
    keepalive: std::time::Duration,
    stop: CancellationToken,
    preamble_done: Option<Box<dyn FnOnce(crate::stream_log::Detached) + Send>>,
) -> Response {
    let watched = Arc::clone(log);
    let on_detach: Box<dyn FnOnce(crate::stream_log::Detached) + Send> = Box::new(move |d| {
        if !d.finished
            && let Some(t) = watched.abandon_token()
        {
            tracing::debug!("a modern reply stream closed early; cancelling its request");
            t.cancel();
        }
        if let Some(f) = preamble_done {
            f(d);
        }
    });
    let options = ReaderOptions {
        keepalive,
        retry_ms: None,
        preamble: Vec::new(),
        stop,
        on_detach: Some(on_detach),
    };
    reply::sse_from_beginning(log, options)
}

/// `subscriptions/listen`: an SSE stream that opens with the acknowledgement and then carries
/// the change notifications the filter opted in to, until the client closes it or the server
/// shuts down (then it ends with the listen request's result).
fn listen(
    state: &Arc<AppState>,
    (accepts, facts): (&Accepts, &EdgeFacts),
    message: &Message,
    id: &Id,
) -> Response {
    if !accepts.sse_ok() {
        return reply::not_acceptable(
            Some(id),
            "text/event-stream (subscriptions/listen answers with a stream)",
        );
    }
    let filter = match ListenFilter::parse(message.params()) {
        Ok(f) => f,
        Err(why) => return reply::error(StatusCode::OK, Some(id), ErrorCode::InvalidParams, why),
    };
    let limits = state.settings.limits;
    let count = Arc::clone(&state.listen_streams);
    if count.fetch_add(1, Ordering::SeqCst) >= limits.max_listen_streams {
        count.fetch_sub(1, Ordering::SeqCst);
        return reply::error(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(id),
            ErrorCode::Overloaded,
            format!(
                "Service Unavailable: {} subscriptions/listen streams are open already",
                limits.max_listen_streams
            ),
        );
    }
    let log = StreamLog::new(
        None,
        None,
        limits.resume_buffer_events,
        limits.resume_buffer_bytes,
    );
    // Subscribe before acknowledging, so nothing published in between is lost.
    let mut events = state.gateway.events();
    let audience = manifold_gateway::audience::Audience::new(
        state.gateway.clone(),
        facts.caller(),
        facts.toolset(),
    );
    log.push(filter.acknowledgement(id).as_str());
    let gone = CancellationToken::new();
    log.set_abandon(gone.clone());
    let stop = state.stop.clone();
    {
        let log = Arc::clone(&log);
        let id = id.clone();
        let gone = gone.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = gone.cancelled() => break,
                    _ = stop.cancelled() => {
                        log.push_final(ListenFilter::closing_result(&id).as_str());
                        break;
                    }
                    event = events.recv() => match event {
                        Ok(e) => {
                            if let Some(n) = filter.heard(&e, &id, &audience) {
                                log.push(n.as_str());
                            }
                        }
                        Err(RecvError::Lagged(_)) => {
                            for n in filter.heard_after_lag(&id, &audience) {
                                log.push(n.as_str());
                            }
                        }
                        Err(RecvError::Closed) => {
                            log.push_final(ListenFilter::closing_result(&id).as_str());
                            break;
                        }
                    }
                }
            }
        });
    }
    let released: Box<dyn FnOnce(crate::stream_log::Detached) + Send> = Box::new(move |_| {
        count.fetch_sub(1, Ordering::SeqCst);
    });
    // The listen stream must outlive the shutdown signal long enough to deliver its result, so
    // its reader stops only when the log finishes.
    modern_reader(
        &log,
        limits.keepalive_interval,
        CancellationToken::new(),
        Some(released),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrored_arguments_are_found_through_properties_only() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "nested": {"type": "object", "properties": {"tenant": {"type": "integer", "x-mcp-header": "Tenant"}}},
                "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"x-mcp-header": "X"}}}}
            }
        });
        let mut found = mirrored_arguments(&schema);
        found.sort();
        assert_eq!(
            found,
            vec![
                ("Region".to_owned(), vec!["region".to_owned()]),
                (
                    "Tenant".to_owned(),
                    vec!["nested".to_owned(), "tenant".to_owned()]
                ),
            ]
        );
    }

    #[test]
    fn header_values_compare_by_type() {
        assert!(same_value("us-west1", &serde_json::json!("us-west1")));
        assert!(same_value("42", &serde_json::json!(42)));
        assert!(same_value("42.0", &serde_json::json!(42)));
        assert!(same_value("true", &serde_json::json!(true)));
        assert!(!same_value("True", &serde_json::json!(true)));
        assert!(!same_value("7", &serde_json::json!("8")));
    }

    #[test]
    fn base64_sentinel_values_are_decoded() {
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(),
            Some("Hello, 世界")
        );
        assert_eq!(decode_header_value("=?base64?!!?="), None);
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8?="),
            None,
            "bad padding is refused"
        );
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8=").as_deref(),
            Some("=?base64?SGVsbG8="),
            "no suffix: literal"
        );
    }
}
