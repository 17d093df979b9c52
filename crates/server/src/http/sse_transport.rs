//! The deprecated HTTP+SSE transport (2024-11-05): `GET /sse` opens the only server-to-client
//! channel and names, in its first `endpoint` event, where to POST (`/message?sessionId=...`).
//!
//! POSTs are answered 202 at once; every reply, notification and server request travels on the
//! stream as an `event: message`. The session lives exactly as long as its stream: when the
//! client closes it, its calls are cancelled and the session id stops working.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use manifold_gateway::{ClientView, GatewayEvent};
use manifold_wire::sse::SseEvent;
use manifold_wire::{ErrorCode, ErrorObject, Message, Revision, meta};
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::reply;
use super::streamable::read_message;
use crate::session::{ClientSession, Outlet, negotiate, run_session_call_as};
use crate::session_key::{hex, random_bytes};
use crate::stream_log::{ReaderOptions, StreamLog};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One HTTP+SSE session.
pub(crate) struct SseSession {
    core: Arc<ClientSession>,
    /// Digest of the identity that opened the stream; only it may post to the session.
    owner: Option<String>,
    initialized: Mutex<bool>,
    log: Arc<StreamLog>,
    ended: CancellationToken,
}

/// Open HTTP+SSE sessions by id.
#[derive(Default)]
pub(crate) struct SseSessions {
    open: Mutex<HashMap<String, Arc<SseSession>>>,
}

impl SseSessions {
    /// The revision of every open session (for the sessions gauge at scrape time).
    pub fn revisions(&self) -> Vec<Revision> {
        lock(&self.open)
            .values()
            .map(|s| s.core.view().revision)
            .collect()
    }

    pub fn end_all(&self) {
        for (_, s) in lock(&self.open).drain() {
            s.end();
        }
    }
}

impl SseSession {
    fn end(&self) {
        self.ended.cancel();
        self.core.cancel_all();
        self.log.finish();
    }
}

struct StreamOutlet(Arc<StreamLog>);

impl Outlet for StreamOutlet {
    fn send(&self, message: &Message) -> bool {
        self.0.push(message.as_str())
    }
}

pub(crate) async fn open(State(state): State<Arc<AppState>>, uri: axum::http::Uri) -> Response {
    let limits = state.settings.limits;
    let id = match random_bytes::<16>() {
        Ok(b) => hex(&b),
        Err(e) => {
            return reply::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                None,
                ErrorCode::InternalError,
                e.to_string(),
            );
        }
    };
    let log = StreamLog::new(
        None,
        Some("message"),
        limits.resume_buffer_events,
        limits.resume_buffer_bytes,
    );
    let session = Arc::new(SseSession {
        core: Arc::new(ClientSession::new(
            ClientView {
                revision: Revision::V2024_11_05,
                capabilities: "{}".to_owned(),
                info: None,
            },
            Some(id.clone()),
            format!("mf-sse-{}", id.get(..8).unwrap_or_default()),
            limits.max_in_flight,
        )),
        owner: super::authn::current_binding(),
        initialized: Mutex::new(false),
        log: Arc::clone(&log),
        ended: state.stop.child_token(),
    });
    {
        let mut open = lock(&state.sse_sessions.open);
        if open.len() >= limits.max_sse_sessions {
            return reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                ErrorCode::Overloaded,
                format!(
                    "Service Unavailable: {} HTTP+SSE sessions are open already",
                    limits.max_sse_sessions
                ),
            );
        }
        open.insert(id.clone(), Arc::clone(&session));
    }
    tokio::spawn(forward_events(state.gateway.events(), Arc::clone(&session)));
    let endpoint = SseEvent {
        event: Some("endpoint".to_owned()),
        // A set's stream posts to the set's message endpoint.
        data: Some(match super::authn::toolset_in_path(uri.path()) {
            Some(set) => format!("/message/{set}?sessionId={id}"),
            None => format!("/message?sessionId={id}"),
        }),
        ..SseEvent::default()
    }
    .encode();
    let weak_state = Arc::downgrade(&state);
    let ended = session.ended.clone();
    let options = ReaderOptions {
        keepalive: limits.keepalive_interval,
        retry_ms: None,
        preamble: vec![endpoint],
        stop: ended,
        on_detach: Some(Box::new(move |_| {
            // The stream is the session: closing it ends the session, and its own server
            // processes (scope = "session") with it.
            if let Some(state) = weak_state.upgrade()
                && let Some(s) = lock(&state.sse_sessions.open).remove(&id)
            {
                s.end();
                let gateway = state.gateway.clone();
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { gateway.end_session(&id).await });
                }
            }
        })),
    };
    reply::sse_from_beginning(&log, options)
}

async fn forward_events(
    mut events: tokio::sync::broadcast::Receiver<GatewayEvent>,
    session: Arc<SseSession>,
) {
    loop {
        let event = tokio::select! {
            _ = session.ended.cancelled() => return,
            e = events.recv() => e,
        };
        let Some(messages) = session.core.messages_for_received(event) else {
            return;
        };
        if !*lock(&session.initialized) {
            continue;
        }
        for m in messages {
            session.log.push(m.as_str());
        }
    }
}

pub(crate) async fn message(
    State(state): State<Arc<AppState>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(id) = query.get("sessionId") else {
        return reply::error(
            StatusCode::BAD_REQUEST,
            None,
            ErrorCode::InvalidRequest,
            "Bad Request: the sessionId query parameter is missing",
        );
    };
    // Another identity's session is answered as unknown: nothing tells it the session exists.
    let owner = super::authn::current_binding();
    let found = lock(&state.sse_sessions.open).get(id).cloned();
    let Some(session) = found.filter(|s| s.owner == owner) else {
        return reply::error(
            StatusCode::NOT_FOUND,
            None,
            ErrorCode::SessionNotFound,
            "Not Found: no open SSE session has this id; open GET /sse again",
        );
    };
    let message = match read_message(body, &headers, state.settings.limits.max_body_bytes).await {
        Ok(m) => m,
        Err(r) => return *r,
    };
    if let Some(message) = session.core.take_unless_request(message) {
        request(&state, &session, message);
    }
    reply::accepted()
}

fn request(state: &Arc<AppState>, session: &Arc<SseSession>, message: Message) {
    let Some(id) = message.id().cloned() else {
        return;
    };
    if message.method() == Some(meta::method::INITIALIZE) {
        let answer = match negotiate(&message) {
            Ok(view) => {
                let revision = view.revision;
                session.core.set_view(view);
                *lock(&session.initialized) = true;
                Message::result(&id, &state.gateway.initialize_result(revision))
            }
            Err(e) => Message::error(Some(id), &e),
        };
        let outcome = match answer.kind() {
            manifold_wire::Kind::Result => manifold_telemetry::RequestOutcome::Ok,
            _ => manifold_telemetry::RequestOutcome::Error,
        };
        super::metering::count_request(
            state,
            meta::method::INITIALIZE,
            manifold_wire::Era::Legacy,
            outcome,
        );
        session.log.push(answer.as_str());
        return;
    }
    if !*lock(&session.initialized) && message.method() != Some(meta::method::PING) {
        let e = ErrorObject::new(
            ErrorCode::InvalidRequest,
            "send initialize before other requests",
        );
        session.log.push(Message::error(Some(id), &e).as_str());
        return;
    }
    let token = match session.core.begin(&id) {
        Ok(t) => t,
        Err(e) => {
            session.log.push(Message::error(Some(id), &e).as_str());
            return;
        }
    };
    let gateway = state.gateway.clone();
    let session = Arc::clone(session);
    let caller = super::authn::current_caller();
    let toolset = super::authn::current_toolset();
    tokio::spawn(super::metering::carrying_http_trace(async move {
        let outlet = Arc::new(StreamOutlet(Arc::clone(&session.log)));
        if let Some(response) = run_session_call_as(
            &gateway,
            &session.core,
            outlet,
            &message,
            &token,
            caller,
            toolset,
        )
        .await
        {
            session.log.push(response.as_str());
        }
        session.core.end(&id);
    }));
}
