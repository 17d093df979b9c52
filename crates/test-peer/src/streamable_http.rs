//! Streamable HTTP at `/mcp`, both eras on one endpoint.
//!
//! Legacy (2025-03-26 .. 2025-11-25): `initialize` mints an `Mcp-Session-Id`; POSTs answer with
//! JSON or an SSE stream that opens with a priming event; GET opens the server->client stream;
//! `Last-Event-ID` resumes; DELETE ends the session. Modern (2026-07-28): POST only, no session,
//! the mirrored headers are checked against the body, and closing a reply stream cancels it.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::base64_sentinel;
use crate::behaviour::{Behaviour, EraChoice, ReplyMode};
use crate::catalog;
use crate::engine::{self, Connection, Era, OutKind, Outgoing, Peer, RequestContext};
use crate::error::PeerError;
use crate::http_replies::{self, Accepts};
use crate::http_session::{AttachError, HttpSession, STANDALONE_STREAM};
use crate::jsonrpc::{self, Incoming, RpcError, code};
use crate::poison_free::lock;
use crate::sse_event;

const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

#[derive(Debug)]
struct HttpState {
    peer: Arc<Peer>,
    port: u16,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    requests_seen: AtomicU64,
}

/// Serves `/mcp` on 127.0.0.1:`port` until the process ends.
pub async fn serve(peer: Arc<Peer>, port: u16) -> Result<(), PeerError> {
    let listener = http_replies::bind_and_announce(port).await?;
    let port = listener
        .local_addr()
        .map_err(|source| PeerError::Bind { port, source })?
        .port();
    let state = Arc::new(HttpState {
        peer,
        port,
        sessions: Mutex::new(HashMap::new()),
        requests_seen: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/mcp", any(endpoint))
        .layer(DefaultBodyLimit::max(http_replies::MAX_BODY_BYTES))
        .with_state(state);
    axum::serve(listener, app).await.map_err(PeerError::Serve)
}

async fn endpoint(
    State(state): State<Arc<HttpState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let settings = &state.peer.settings;
    if let Some(response) = http_replies::fault(settings, &state.requests_seen, state.port, &uri) {
        return response;
    }
    if !http_replies::origin_allowed(&headers) {
        return http_replies::forbidden_origin();
    }
    match method {
        Method::POST => post(&state, &headers, &body).await,
        Method::GET => get(&state, &headers),
        Method::DELETE => delete(&state, &headers),
        _ => not_allowed(settings.era),
    }
}

fn not_allowed(era: EraChoice) -> Response {
    let allow = if era == EraChoice::Modern {
        "POST"
    } else {
        "GET, POST, DELETE"
    };
    let mut response = http_replies::plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "this MCP endpoint takes only the methods listed in Allow\n",
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

fn bad_request(id: Option<&Value>, message: &str) -> Response {
    http_replies::rpc_error(
        StatusCode::BAD_REQUEST,
        id,
        &RpcError::new(code::BAD_REQUEST, message),
    )
}

async fn post(state: &Arc<HttpState>, headers: &HeaderMap, body: &[u8]) -> Response {
    let settings = &state.peer.settings;
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(error) => {
            return http_replies::rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                &RpcError::new(code::PARSE_ERROR, format!("Parse error: {error}")),
            );
        }
    };
    if value.is_array() {
        return http_replies::rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            &RpcError::new(
                code::INVALID_REQUEST,
                "Invalid Request: batches are not supported",
            ),
        );
    }
    let has_session = headers.contains_key(SESSION_HEADER);
    match jsonrpc::classify(value) {
        Incoming::Invalid { id, reason } => http_replies::rpc_error(
            StatusCode::BAD_REQUEST,
            id.as_ref(),
            &RpcError::new(code::INVALID_REQUEST, format!("Invalid Request: {reason}")),
        ),
        Incoming::Request { id, method, params } if method == "initialize" => {
            initialize(state, headers, id, params).await
        }
        message if has_session => session_post(state, headers, message).await,
        Incoming::Request { id, method, params } => {
            let looks_modern = method == "server/discover"
                || engine::modern_protocol_version(params.as_ref()).is_some()
                || http_replies::header_text(headers, PROTOCOL_VERSION_HEADER)
                    == Some(catalog::MODERN_REVISION);
            let modern = match settings.era {
                EraChoice::Modern => true,
                EraChoice::Both => looks_modern,
                EraChoice::Legacy => false,
            };
            if modern {
                modern_post(state, headers, id, method, params).await
            } else {
                bad_request(
                    Some(&id),
                    "Bad Request: the Mcp-Session-Id header is required; send initialize first",
                )
            }
        }
        Incoming::Notification { .. } => {
            if settings.era == EraChoice::Legacy {
                bad_request(None, "Bad Request: the Mcp-Session-Id header is required")
            } else {
                StatusCode::ACCEPTED.into_response()
            }
        }
        Incoming::Response { .. } => bad_request(
            None,
            "Bad Request: a response must carry the Mcp-Session-Id of the session that asked",
        ),
    }
}

async fn initialize(
    state: &Arc<HttpState>,
    headers: &HeaderMap,
    id: Value,
    params: Option<Value>,
) -> Response {
    let settings = &state.peer.settings;
    if settings.era == EraChoice::Modern {
        let supported = engine::supported_modern_versions(settings);
        let requested = params
            .as_ref()
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return http_replies::rpc_error(
            StatusCode::BAD_REQUEST,
            Some(&id),
            &RpcError::new(
                code::UNSUPPORTED_PROTOCOL_VERSION,
                format!(
                    "Unsupported protocol version: this server has no initialize handshake and speaks only {}",
                    supported.join(", ")
                ),
            )
            .with_data(json!({"supported": supported, "requested": requested})),
        );
    }
    let session = new_session(state);
    let mut response = legacy_reply(
        state,
        &session,
        headers,
        id,
        "initialize".to_owned(),
        params,
    )
    .await;
    match HeaderValue::from_str(&session.id) {
        Ok(value) => {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
        Err(_) => {
            return http_replies::plain(StatusCode::INTERNAL_SERVER_ERROR, "bad session id\n");
        }
    }
    response
}

/// Creates a session whose standalone messages feed its stream 0.
fn new_session(state: &Arc<HttpState>) -> Arc<HttpSession> {
    let (standalone, mut standalone_messages) = mpsc::unbounded_channel::<Outgoing>();
    let connection = Connection::new(Arc::clone(&state.peer), standalone);
    let session = HttpSession::new(http_replies::new_session_id(), connection);
    lock(&state.sessions).insert(session.id.clone(), Arc::clone(&session));
    let weak = Arc::downgrade(&session);
    let comments = state.peer.settings.behaviour == Behaviour::SseComments;
    tokio::spawn(async move {
        while let Some(message) = standalone_messages.recv().await {
            let Some(session) = weak.upgrade() else { break };
            session.append(STANDALONE_STREAM, |id| {
                sse_event::with_comment(
                    comments,
                    sse_event::message_event(Some(id), &message.bytes),
                )
            });
        }
    });
    session
}

/// Looks a session up and counts the request against `session-expiry`. The error is the
/// response to send, boxed because a whole response is large.
fn find_session(state: &HttpState, headers: &HeaderMap) -> Result<Arc<HttpSession>, Box<Response>> {
    let Some(session_id) = http_replies::header_text(headers, SESSION_HEADER) else {
        return Err(Box::new(bad_request(
            None,
            "Bad Request: the Mcp-Session-Id header is required",
        )));
    };
    let found = lock(&state.sessions).get(session_id).cloned();
    let Some(session) = found else {
        return Err(Box::new(session_not_found()));
    };
    let settings = &state.peer.settings;
    if settings.behaviour == Behaviour::SessionExpiry && session.count_use() > settings.count_or(3)
    {
        end_session(state, &session);
        return Err(Box::new(session_not_found()));
    }
    Ok(session)
}

fn session_not_found() -> Response {
    http_replies::rpc_error(
        StatusCode::NOT_FOUND,
        None,
        &RpcError::new(
            code::SESSION_NOT_FOUND,
            "Session not found: it ended or never existed; send initialize again without Mcp-Session-Id",
        ),
    )
}

fn end_session(state: &HttpState, session: &HttpSession) {
    lock(&state.sessions).remove(&session.id);
    session.connection.cancel_all();
    session.close_all();
}

async fn session_post(state: &Arc<HttpState>, headers: &HeaderMap, message: Incoming) -> Response {
    let session = match find_session(state, headers) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    if let Some(version) = http_replies::header_text(headers, PROTOCOL_VERSION_HEADER) {
        let wrong_revision_ok = state.peer.settings.behaviour == Behaviour::WrongRevision
            && version == catalog::WRONG_REVISION;
        if !catalog::LEGACY_REVISIONS.contains(&version) && !wrong_revision_ok {
            return bad_request(
                None,
                &format!(
                    "Bad Request: unsupported MCP-Protocol-Version header {version:?} for a legacy session"
                ),
            );
        }
    }
    match message {
        Incoming::Request { id, method, params } => {
            legacy_reply(state, &session, headers, id, method, params).await
        }
        Incoming::Notification { method, params } => {
            engine::notify(&session.connection, &method, params.as_ref());
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Response { id, message } => {
            session.connection.deliver(&id, message);
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Invalid { id, reason } => bad_request(id.as_ref(), &reason),
    }
}

/// Whether to answer with SSE, given what the client accepts and what the request will send.
fn reply_with_sse(accepts: Accepts, mode: ReplyMode, emits_first: bool) -> bool {
    if !accepts.sse {
        return false;
    }
    if !accepts.json {
        return true;
    }
    match mode {
        ReplyMode::Sse => true,
        ReplyMode::Json => false,
        ReplyMode::Auto => emits_first,
    }
}

/// Serves a legacy-session request and answers with JSON or a logged, resumable SSE stream.
async fn legacy_reply(
    state: &Arc<HttpState>,
    session: &Arc<HttpSession>,
    headers: &HeaderMap,
    id: Value,
    method: String,
    params: Option<Value>,
) -> Response {
    let settings = &state.peer.settings;
    let emits = engine::emits_before_reply(settings, Era::Legacy, &method, params.as_ref());
    let sse = reply_with_sse(http_replies::accepts(headers), settings.reply_mode, emits);
    let (sink, mut messages) = mpsc::unbounded_channel::<Outgoing>();
    let cancel = session.connection.begin(&id);
    let ctx = RequestContext {
        connection: Arc::clone(&session.connection),
        sink,
        cancel,
        http_headers: Some(http_replies::header_pairs(headers)),
        era: Some(Era::Legacy),
    };
    let connection = Arc::clone(&session.connection);
    let finished = id.clone();
    tokio::spawn(async move {
        engine::serve_request(ctx, id, method, params).await;
        connection.end(&finished);
    });

    let comments = settings.behaviour == Behaviour::SseComments;
    if sse {
        let (stream, live) = session.open_stream();
        session.append(stream, |event_id| {
            sse_event::with_comment(comments, sse_event::priming_event(event_id))
        });
        if settings.behaviour == Behaviour::CloseSseAfterPriming {
            session.detach(stream);
        }
        let session = Arc::clone(session);
        tokio::spawn(async move {
            while let Some(message) = messages.recv().await {
                session.append(stream, |event_id| {
                    sse_event::with_comment(
                        comments,
                        sse_event::message_event(Some(event_id), &message.bytes),
                    )
                });
            }
            session.finish(stream);
        });
        return http_replies::sse_body(live);
    }

    while let Some(message) = messages.recv().await {
        if message.kind == OutKind::Response {
            let session = Arc::clone(session);
            tokio::spawn(async move {
                while let Some(late) = messages.recv().await {
                    session.append(STANDALONE_STREAM, |event_id| {
                        sse_event::with_comment(
                            comments,
                            sse_event::message_event(Some(event_id), &late.bytes),
                        )
                    });
                }
            });
            return http_replies::json_body(StatusCode::OK, message.bytes);
        }
        session.append(STANDALONE_STREAM, |event_id| {
            sse_event::with_comment(
                comments,
                sse_event::message_event(Some(event_id), &message.bytes),
            )
        });
    }
    // Cancelled: the peer never answers this request; hold the HTTP request until the client
    // gives up, as a server that simply stopped would.
    std::future::pending::<Response>().await
}

fn get(state: &Arc<HttpState>, headers: &HeaderMap) -> Response {
    if state.peer.settings.era == EraChoice::Modern {
        return not_allowed(EraChoice::Modern);
    }
    let session = match find_session(state, headers) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    if !http_replies::accepts(headers).sse {
        return http_replies::plain(
            StatusCode::NOT_ACCEPTABLE,
            "GET /mcp opens an SSE stream: the Accept header must allow text/event-stream\n",
        );
    }
    let attached = match http_replies::header_text(headers, "last-event-id") {
        Some(last) => session.resume(last),
        None => session.attach_standalone(),
    };
    match attached {
        Ok(events) => http_replies::sse_body(events),
        Err(AttachError::Conflict) => http_replies::plain(
            StatusCode::CONFLICT,
            "another GET stream is already open for this session\n",
        ),
        Err(error @ AttachError::UnknownEvent(_)) => {
            bad_request(None, &format!("Bad Request: {error}"))
        }
    }
}

fn delete(state: &Arc<HttpState>, headers: &HeaderMap) -> Response {
    if state.peer.settings.era == EraChoice::Modern {
        return not_allowed(EraChoice::Modern);
    }
    let session = match find_session(state, headers) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    end_session(state, &session);
    (StatusCode::OK, Body::empty()).into_response()
}

/// A modern request: check the mirrored headers, serve it statelessly, answer JSON or SSE.
async fn modern_post(
    state: &Arc<HttpState>,
    headers: &HeaderMap,
    id: Value,
    method: String,
    params: Option<Value>,
) -> Response {
    let settings = &state.peer.settings;
    if let Some(mismatch) = header_mismatch(headers, &method, params.as_ref()) {
        return http_replies::rpc_error(
            StatusCode::BAD_REQUEST,
            Some(&id),
            &RpcError::new(
                code::HEADER_MISMATCH,
                format!("Header mismatch: {mismatch}"),
            ),
        );
    }
    let emits = engine::emits_before_reply(settings, Era::Modern, &method, params.as_ref());
    let sse = reply_with_sse(http_replies::accepts(headers), settings.reply_mode, emits);
    // Nothing is tied to no request in the modern era; such messages have nowhere to go.
    let (nowhere, _) = mpsc::unbounded_channel();
    let connection = Connection::new(Arc::clone(&state.peer), nowhere);
    let (sink, mut messages) = mpsc::unbounded_channel::<Outgoing>();
    let cancel = CancellationToken::new();
    let ctx = RequestContext {
        connection,
        sink,
        cancel: cancel.clone(),
        http_headers: Some(http_replies::header_pairs(headers)),
        era: Some(Era::Modern),
    };
    tokio::spawn(engine::serve_request(ctx, id, method, params));

    if sse {
        let comments = settings.behaviour == Behaviour::SseComments;
        let (events, body) = mpsc::unbounded_channel::<Bytes>();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    message = messages.recv() => match message {
                        Some(message) => {
                            let event = sse_event::with_comment(comments, sse_event::message_event(None, &message.bytes));
                            if events.send(event).is_err() {
                                cancel.cancel();
                                break;
                            }
                        }
                        None => break,
                    },
                    () = events.closed() => {
                        // The client closed the reply stream: that is the modern cancellation.
                        cancel.cancel();
                        break;
                    }
                }
            }
        });
        return http_replies::sse_body(body);
    }

    // A JSON reply: if the client goes away first, axum drops this future and the guard cancels.
    let guard = cancel.drop_guard();
    while let Some(message) = messages.recv().await {
        if message.kind == OutKind::Response {
            let _ = guard.disarm();
            let status = StatusCode::from_u16(message.http_status).unwrap_or(StatusCode::OK);
            return http_replies::json_body(status, message.bytes);
        }
    }
    std::future::pending::<Response>().await
}

/// Checks `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` against the body. Requests with
/// no `_meta` protocol version are left to the engine, which answers -32602.
fn header_mismatch(headers: &HeaderMap, method: &str, params: Option<&Value>) -> Option<String> {
    let meta_version = engine::modern_protocol_version(params)?;
    match http_replies::header_text(headers, PROTOCOL_VERSION_HEADER) {
        None => return Some("the MCP-Protocol-Version header is missing".to_owned()),
        Some(header) if header != meta_version => {
            return Some(format!(
                "MCP-Protocol-Version header {header:?} does not match _meta protocolVersion {meta_version:?}"
            ));
        }
        Some(_) => {}
    }
    match http_replies::header_text(headers, "mcp-method") {
        None => return Some("the Mcp-Method header is missing".to_owned()),
        Some(header) if header != method => {
            return Some(format!(
                "Mcp-Method header {header:?} does not match body method {method:?}"
            ));
        }
        Some(_) => {}
    }
    let name_member = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    let body_value = params
        .and_then(|p| p.get(name_member))
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(raw) = headers.get("mcp-name") else {
        return Some("the Mcp-Name header is missing".to_owned());
    };
    let decoded = raw
        .to_str()
        .ok()
        .and_then(base64_sentinel::decode_header_value);
    match decoded {
        Some(header) if header == body_value => None,
        Some(header) => Some(format!(
            "Mcp-Name header {header:?} does not match body {name_member} {body_value:?}"
        )),
        None => Some("the Mcp-Name header is not visible ASCII or valid =?base64?...?=".to_owned()),
    }
}
