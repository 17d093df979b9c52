//! Streamable HTTP at `/mcp`, both eras on one endpoint, decided per request.
//!
//! An `initialize` request, or any request carrying `Mcp-Session-Id`, is legacy (2025-03-26 ..
//! 2025-11-25): sessions, the GET stream, resumable SSE replies, server-to-client requests,
//! DELETE. A request whose `_meta` states a revision, or `server/discover`, is modern
//! (2026-07-28) and handled in `modern.rs`.
//!
//! Reply form: a request whose client accepts only SSE (or ranks it first), or that carries a
//! progress token, gets an SSE stream at once. Otherwise the reply is JSON unless the call sends
//! something before its answer (a progress or log notification, a server request): then, the
//! headers not being sent yet, the reply becomes an SSE stream carrying those messages and the
//! answer. A client that does not accept SSE always gets JSON; its call's notifications are
//! dropped, and server requests go to its GET stream when one is open.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use manifold_wire::{ErrorCode, Id, Kind, Message, Revision, meta};

use super::AppState;
use super::edge_facts::EdgeFacts;
use super::exchange::{ReplyMode, accepts, deliver, header, read_message, reply_mode};
use super::legacy_sessions::LiveSession;
use super::reply::{self, session_gone};
use crate::modern_meta::looks_modern;
use crate::sealed::{self, SessionState};
use crate::session::{CallOrigin, Outlet, negotiate, run_session_call_as};
use crate::stream_log::{ReaderOptions, Start, StreamLog};

pub(crate) async fn endpoint(
    State(state): State<Arc<AppState>>,
    method: Method,
    facts: EdgeFacts,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match method {
        Method::POST => post(&state, &headers, body, &facts).await,
        Method::GET => get(&state, &headers, &facts).await,
        Method::DELETE => delete(&state, &headers).await,
        _ => reply::method_not_allowed(
            "GET, POST, DELETE",
            "Method Not Allowed: /mcp takes POST (GET and DELETE with a legacy Mcp-Session-Id)",
        ),
    }
}

fn modern_header(headers: &HeaderMap) -> bool {
    header(headers, meta::header::PROTOCOL_VERSION)
        .and_then(|v| v.parse::<Revision>().ok())
        .is_some_and(|r| r.era() == manifold_wire::Era::Modern)
}

async fn post(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    body: Body,
    facts: &EdgeFacts,
) -> Response {
    let message = match read_message(body, headers, state.settings.limits.max_body_bytes).await {
        Ok(m) => m,
        Err(r) => return *r,
    };
    let session = header(headers, meta::header::SESSION_ID);
    // `initialize` starts a legacy session, unless it comes as a modern request (its `_meta`
    // states a revision): then it is a method the modern era removed.
    if message.kind() == Kind::Request
        && message.method() == Some(meta::method::INITIALIZE)
        && !looks_modern(&message)
    {
        return initialize(state, headers, &message, facts);
    }
    if let Some(session) = session {
        return session_post(state, headers, session, message, facts).await;
    }
    if looks_modern(&message) || modern_header(headers) {
        return super::modern::post(state, headers, message, facts).await;
    }
    reply::error(
        StatusCode::BAD_REQUEST,
        message.id(),
        ErrorCode::InvalidRequest,
        "Bad Request: no Mcp-Session-Id header; start a session with initialize, or state the revision in params._meta[\"io.modelcontextprotocol/protocolVersion\"] (2026-07-28)",
    )
}

/// Checks `MCP-Protocol-Version` on a legacy session's request: absent means 2025-03-26;
/// anything but a legacy revision Manifold speaks is 400.
fn legacy_version_header(headers: &HeaderMap, id: Option<&Id>) -> Result<(), Box<Response>> {
    match header(headers, meta::header::PROTOCOL_VERSION) {
        None => Ok(()),
        Some(v) => match v.parse::<Revision>() {
            Ok(r) if r.era() == manifold_wire::Era::Legacy => Ok(()),
            _ => Err(Box::new(reply::error(
                StatusCode::BAD_REQUEST,
                id,
                ErrorCode::InvalidRequest,
                format!(
                    "Bad Request: unsupported MCP-Protocol-Version {:?} for a session; use the revision initialize negotiated",
                    v.chars().take(40).collect::<String>()
                ),
            ))),
        },
    }
}

/// The live session for an id, resuming a sealed one this replica has not seen yet (and taking
/// in what other replicas recorded of it: `shared_state.rs`).
async fn open_session(
    state: &Arc<AppState>,
    sid: &str,
    id: Option<&Id>,
    facts: &EdgeFacts,
) -> Result<Arc<LiveSession>, Box<Response>> {
    if state.sessions.is_ended(sid) {
        return Err(Box::new(session_gone(id)));
    }
    if let Some(s) = state.sessions.get(sid) {
        s.touch();
        return Ok(s);
    }
    let limits = state.settings.limits;
    let sealed =
        sealed::open(&state.settings.session_key, sid, limits.session_lifetime).map_err(|why| {
            tracing::debug!(error = %why, "refused a session id");
            Box::new(session_gone(id))
        })?;
    let view = manifold_gateway::ClientView {
        revision: sealed.revision,
        capabilities: sealed.capabilities,
        info: sealed.info.map(manifold_gateway::ClientInfo::new),
    };
    let session = LiveSession::start(
        sid.to_owned(),
        sealed.owner,
        view,
        limits,
        &state.gateway,
        &state.stop,
        state.settings.relay.as_ref().map(|r| r.replica.as_str()),
    );
    let session = match state.sessions.insert_or_get(session, limits.max_sessions) {
        Ok(s) => s,
        Err(_) => return Err(Box::new(overloaded(id))),
    };
    if !super::shared_state::revive(state, &session, facts).await {
        return Err(Box::new(session_gone(id)));
    }
    tracing::debug!("resumed a sealed session on this replica");
    Ok(session)
}

fn overloaded(id: Option<&Id>) -> Response {
    reply::error(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        ErrorCode::Overloaded,
        "Service Unavailable: every session slot is busy; retry shortly",
    )
}

fn initialize(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    message: &Message,
    facts: &EdgeFacts,
) -> Response {
    let id = message.id();
    let accepts = accepts(headers);
    if !accepts.json_ok() && !accepts.sse_ok() {
        return reply::not_acceptable(id, "application/json or text/event-stream");
    }
    let view = match negotiate(message) {
        Ok(v) => v,
        Err(e) => return reply::rpc_error(StatusCode::BAD_REQUEST, id, &e),
    };
    let sealed_state = SessionState {
        revision: view.revision,
        capabilities: view.capabilities.clone(),
        info: view.info.as_ref().map(|i| i.raw().to_owned()),
        created: sealed::now_secs(),
        owner: facts.binding(),
    };
    let sid = match sealed::seal(&state.settings.session_key, &sealed_state) {
        Ok(s) => s,
        Err(e) => {
            return reply::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                id,
                ErrorCode::InternalError,
                e.to_string(),
            );
        }
    };
    let Ok(sid_header) = HeaderValue::from_str(&sid) else {
        return reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            id,
            ErrorCode::InternalError,
            "could not mint a session id",
        );
    };
    let limits = state.settings.limits;
    let revision = view.revision;
    let session = LiveSession::start(
        sid.clone(),
        sealed_state.owner.clone(),
        view,
        limits,
        &state.gateway,
        &state.stop,
        state.settings.relay.as_ref().map(|r| r.replica.as_str()),
    );
    let session = match state.sessions.insert_or_get(session, limits.max_sessions) {
        Ok(s) => s,
        Err(_) => return overloaded(id),
    };
    let Some(request_id) = id else {
        return reply::error(
            StatusCode::BAD_REQUEST,
            None,
            ErrorCode::InvalidRequest,
            "initialize needs an id",
        );
    };
    let response = Message::result(request_id, &state.gateway.initialize_result(revision));
    tracing::info!(revision = %revision, "a legacy client started a session");
    super::metering::count_request(
        state,
        meta::method::INITIALIZE,
        manifold_wire::Era::Legacy,
        manifold_telemetry::RequestOutcome::Ok,
    );
    let mut r = if accepts.wants_sse() || !accepts.json_ok() {
        let (_, log) = session.new_stream();
        log.push_final(response.as_str());
        legacy_reader(state, &session, &log, Start::Beginning)
    } else {
        reply::json(StatusCode::OK, response.as_str().to_owned())
    };
    r.headers_mut().insert(meta::header::SESSION_ID, sid_header);
    r
}

async fn session_post(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    sid: &str,
    message: Message,
    facts: &EdgeFacts,
) -> Response {
    if let Err(r) = legacy_version_header(headers, message.id()) {
        return *r;
    }
    let session = match open_session(state, sid, message.id(), facts).await {
        Ok(s) => s,
        Err(r) => return *r,
    };
    if let Some(relay) = &state.settings.relay
        && let Some(to) = relay.destination(&message, |id| session.core.is_in_flight(id))
    {
        if let Err(e) = relay.sender.send(&to, sid, message.as_str()).await {
            tracing::warn!("{e}");
            return reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                ErrorCode::InternalError,
                format!(
                    "Service Unavailable: this answer belongs to a call on another Manifold replica and {e}; send it again"
                ),
            );
        }
        if message.kind() != Kind::Notification {
            return reply::accepted();
        }
    }
    match session.core.take_unless_request(message) {
        Some(message) => legacy_call(state, headers, session, message, facts).await,
        None => reply::accepted(),
    }
}

/// Messages of a legacy POSTed call: on its reply stream; for a JSON-only client, server
/// requests go to the GET stream if one is open, and notifications are dropped.
struct PostOutlet {
    log: Arc<StreamLog>,
    session: Weak<LiveSession>,
    json_only: bool,
}

impl Outlet for PostOutlet {
    fn send(&self, message: &Message) -> bool {
        if !self.json_only {
            return self.log.push(message.as_str());
        }
        // A plain-JSON reply cannot carry anything before the answer: server requests and log
        // lines go to the session's GET stream when one is open; progress has nowhere to go.
        let movable = message.kind() == Kind::Request
            || message.method() == Some(manifold_wire::meta::method::MESSAGE);
        if movable
            && let Some(standalone) = self.session.upgrade().and_then(|s| s.attached_standalone())
        {
            return standalone.push(message.as_str());
        }
        false
    }
}

async fn legacy_call(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    session: Arc<LiveSession>,
    message: Message,
    facts: &EdgeFacts,
) -> Response {
    let Some(id) = message.id().cloned() else {
        return reply::accepted();
    };
    let accepts = accepts(headers);
    if !accepts.json_ok() && !accepts.sse_ok() {
        return reply::not_acceptable(Some(&id), "application/json or text/event-stream");
    }
    let token = match session.core.begin(&id) {
        Ok(t) => t,
        Err(e) => return reply::rpc_error(StatusCode::OK, Some(&id), &e),
    };
    let mode = reply_mode(&accepts, &message);
    let (number, log) = session.new_stream();
    log.set_abandon(token.clone());
    let origin = CallOrigin {
        caller: facts.caller(),
        toolset: facts.toolset(),
        trace: facts.trace.clone(),
    };
    let outlet = Arc::new(PostOutlet {
        log: Arc::clone(&log),
        session: Arc::downgrade(&session),
        json_only: mode == ReplyMode::JsonOnly,
    });
    {
        let state = Arc::clone(state);
        let core = Arc::clone(&session.core);
        let sid = session.id.clone();
        let log = Arc::clone(&log);
        let token = token.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let gateway = &state.gateway;
            match run_session_call_as(gateway, &core, outlet, &message, &token, origin).await {
                Some(response) => {
                    super::shared_state::share_outcome(&state, &sid, &message, &response).await;
                    log.push_final(response.as_str());
                }
                None => log.finish(),
            }
            core.end(&id);
        });
    }
    let response = deliver(
        &log,
        mode,
        token.clone(),
        Some(&id),
        |_| StatusCode::OK,
        || legacy_reader(state, &session, &log, Start::Beginning),
    )
    .await;
    if !reply::is_event_stream(&response) {
        session.release_stream(number);
    }
    response
}

/// An SSE response following a legacy stream from `start`.
/// A reply stream whose client disconnects keeps its call running for the disconnect grace,
/// waiting to be resumed, then cancels it.
pub(crate) fn legacy_reader(
    state: &Arc<AppState>,
    session: &Arc<LiveSession>,
    log: &Arc<StreamLog>,
    start: Start,
) -> Response {
    let limits = state.settings.limits;
    let open = Arc::clone(&session.open_streams);
    if open.fetch_add(1, Ordering::SeqCst) >= limits.max_streams_per_session {
        open.fetch_sub(1, Ordering::SeqCst);
        if start == Start::Beginning
            && let Some(t) = log.abandon_token()
        {
            t.cancel();
        }
        return reply::error(
            StatusCode::TOO_MANY_REQUESTS,
            None,
            ErrorCode::Overloaded,
            format!(
                "Too Many Requests: this session already has {} SSE streams open; close one first",
                limits.max_streams_per_session
            ),
        );
    }
    let watched = Arc::clone(log);
    let grace = limits.disconnect_grace;
    let on_detach = Box::new(move |d: crate::stream_log::Detached| {
        open.fetch_sub(1, Ordering::SeqCst);
        if d.finished || !d.current {
            return;
        }
        let Some(token) = watched.abandon_token() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                tokio::time::sleep(grace).await;
                if !watched.is_attached() && watched.finished_at().is_none() {
                    tracing::debug!("a reply stream was not resumed in time; cancelling its call");
                    token.cancel();
                }
            });
        } else {
            token.cancel();
        }
    });
    let options = ReaderOptions {
        keepalive: limits.keepalive_interval,
        retry_ms: Some(limits.sse_retry_ms),
        preamble: Vec::new(),
        stop: session.ended.clone(),
        on_detach: Some(on_detach),
    };
    match log.reader(start, options) {
        Ok(stream) => reply::sse(stream),
        Err(why) => reply::error(
            StatusCode::BAD_REQUEST,
            None,
            ErrorCode::InvalidRequest,
            format!("Bad Request: cannot resume from that Last-Event-ID: {why}"),
        ),
    }
}

async fn get(state: &Arc<AppState>, headers: &HeaderMap, facts: &EdgeFacts) -> Response {
    let Some(sid) = header(headers, meta::header::SESSION_ID) else {
        return reply::method_not_allowed(
            "GET, POST, DELETE",
            "Method Not Allowed: GET opens a legacy session's stream and needs Mcp-Session-Id; the 2026-07-28 era uses subscriptions/listen instead",
        );
    };
    if let Err(r) = legacy_version_header(headers, None) {
        return *r;
    }
    if !accepts(headers).sse_ok() {
        return reply::not_acceptable(None, "text/event-stream");
    }
    let session = match open_session(state, sid, None, facts).await {
        Ok(s) => s,
        Err(r) => return *r,
    };
    match header(headers, meta::header::LAST_EVENT_ID) {
        Some(last) => match session.resumable(last) {
            Some((log, seq)) => legacy_reader(state, &session, &log, Start::After(seq)),
            None if session.is_foreign_standalone_event(last) => {
                resume_foreign_standalone(state, &session)
            }
            None => reply::error(
                StatusCode::BAD_REQUEST,
                None,
                ErrorCode::InvalidRequest,
                "Bad Request: cannot resume from that Last-Event-ID: its stream is not kept here (finished too long ago, or a reply stream of a call another replica held; that call ended with it)",
            ),
        },
        None => {
            let log = session.standalone();
            legacy_reader(state, &session, &log, Start::Now)
        }
    }
}

/// A GET stream resumed from an event another replica sent (that replica went away, or the
/// balancer moved the client): its events are not here, so the new stream starts by telling the
/// client that every list may have changed and that every resource it subscribed to (as the
/// store records: `shared_state.rs`) may have been updated, which is all a GET stream's missed
/// list changes and updates could have said; what comes next arrives live.
fn resume_foreign_standalone(state: &Arc<AppState>, session: &Arc<LiveSession>) -> Response {
    let log = session.standalone();
    let response = legacy_reader(state, session, &log, Start::Now);
    if response.status().is_success() {
        let updates = session
            .core
            .subscriptions()
            .into_iter()
            .map(|uri| manifold_gateway::GatewayEvent::ResourceUpdated { uri });
        let lists = [
            manifold_gateway::GatewayEvent::ToolsChanged,
            manifold_gateway::GatewayEvent::PromptsChanged,
            manifold_gateway::GatewayEvent::ResourcesChanged,
        ];
        for event in lists.into_iter().chain(updates) {
            if let Some(message) = session.core.event_message(&event) {
                log.push(message.as_str());
            }
        }
        tracing::debug!("a GET stream from another replica was resumed here");
    }
    response
}

async fn delete(state: &Arc<AppState>, headers: &HeaderMap) -> Response {
    let Some(sid) = header(headers, meta::header::SESSION_ID) else {
        return reply::method_not_allowed(
            "GET, POST, DELETE",
            "Method Not Allowed: DELETE ends a legacy session and needs Mcp-Session-Id; the 2026-07-28 era has no sessions",
        );
    };
    if let Err(r) = legacy_version_header(headers, None) {
        return *r;
    }
    let known = !state.sessions.is_ended(sid)
        && (state.sessions.get(sid).is_some()
            || sealed::open(
                &state.settings.session_key,
                sid,
                state.settings.limits.session_lifetime,
            )
            .is_ok());
    if !known {
        return session_gone(None);
    }
    state
        .sessions
        .delete(sid, state.settings.limits.max_tombstones);
    super::shared_state::share_end(state, sid).await;
    tracing::info!("a legacy client ended its session");
    axum::response::IntoResponse::into_response(StatusCode::NO_CONTENT)
}
