//! The deprecated HTTP+SSE transport (2024-11-05): `GET /sse` opens the only server-to-client
//! channel and names, in its first `endpoint` event, where to POST (`/message?sessionId=...`).
//!
//! POSTs are answered 202 at once; every reply, notification and server request travels on the
//! stream as an `event: message`. The session lives exactly as long as its stream: when the
//! client closes it, its calls are cancelled and the session id stops working.
//!
//! Behind a load balancer without affinity the stream stays on the replica that opened it, but a
//! POST may reach any replica: with a relay (several replicas on one store) a session id names its
//! replica (`REPLICA-RANDOM`), and a replica that receives a POST for another's session hands it,
//! with who sent it, to that replica through the relay ([`RelayedPost`]), which checks the sender
//! and runs it as if it had been posted there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use manifold_gateway::{Caller, ClientView, GatewayEvent};
use manifold_wire::sse::SseEvent;
use manifold_wire::{ErrorCode, ErrorObject, Message, Revision, meta};
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::edge_facts::EdgeFacts;
use super::exchange::read_message;
use super::reply;
use crate::session::{CallOrigin, ClientSession, Outlet, negotiate, run_session_call_as};
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

pub(crate) async fn open(
    State(state): State<Arc<AppState>>,
    facts: EdgeFacts,
    uri: axum::http::Uri,
) -> Response {
    let limits = state.settings.limits;
    let random = match random_bytes::<16>() {
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
    let id = match &state.settings.relay {
        Some(relay) => format!("{}-{random}", relay.replica),
        None => random.clone(),
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
            format!("mf-sse-{}", random.get(..8).unwrap_or_default()),
            limits.max_in_flight,
        )),
        owner: facts.binding(),
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
        data: Some(match super::endpoint_path::toolset_in_path(uri.path()) {
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
    facts: EdgeFacts,
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
    let owner = facts.binding();
    let found = lock(&state.sse_sessions.open).get(id).cloned();
    let Some(session) = found.filter(|s| s.owner == owner) else {
        if let Some(relay) = &state.settings.relay
            && let Some(holder) = holder_of(id).filter(|h| *h != relay.replica)
        {
            return relay_post(&state, (holder, id), &facts, headers, body).await;
        }
        return unknown_session();
    };
    let message = match read_message(body, &headers, state.settings.limits.max_body_bytes).await {
        Ok(m) => m,
        Err(r) => return *r,
    };
    let origin = CallOrigin {
        caller: facts.caller(),
        toolset: facts.toolset(),
        trace: facts.trace.clone(),
    };
    if let Some(message) = session.core.take_unless_request(message) {
        request(&state, &session, message, origin);
    }
    reply::accepted()
}

fn unknown_session() -> Response {
    reply::error(
        StatusCode::NOT_FOUND,
        None,
        ErrorCode::SessionNotFound,
        "Not Found: no open SSE session has this id; open GET /sse again",
    )
}

/// The replica a session id names (`REPLICA-RANDOM`), if it names one.
fn holder_of(id: &str) -> Option<&str> {
    let (replica, random) = id.split_once('-')?;
    let hex = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(replica) && hex(random) && replica.len() <= MAX_REPLICA_ID_LEN).then_some(replica)
}

/// Longest replica id a session id may name.
const MAX_REPLICA_ID_LEN: usize = 64;

/// A POST for a session another replica holds, handed to it with who sent it: the identity's
/// binding (checked against the session's owner there) and what the rules need of the caller.
/// The caller's bearer token is not handed on (it would rest in the store): a server configured
/// with `token_passthrough` gets no token for a POST that reached another replica.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct RelayedPost {
    binding: Option<String>,
    caller: Option<RelayedCaller>,
    toolset: Option<String>,
    message: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct RelayedCaller {
    name: String,
    groups: Vec<String>,
    scopes: Vec<String>,
}

/// Reads the POST and hands it to `holder`: 202 once the relay took it, 503 if it could not.
async fn relay_post(
    state: &Arc<AppState>,
    (holder, id): (&str, &str),
    facts: &EdgeFacts,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let message = match read_message(body, &headers, state.settings.limits.max_body_bytes).await {
        Ok(m) => m,
        Err(r) => return *r,
    };
    let post = RelayedPost {
        binding: facts.binding(),
        caller: facts.caller().map(|c| RelayedCaller {
            name: c.name.clone(),
            groups: c.groups.clone(),
            scopes: c.scopes.clone(),
        }),
        toolset: facts.toolset().map(|t| t.to_string()),
        message: message.as_str().to_owned(),
    };
    let Ok(text) = serde_json::to_string(&post) else {
        return unknown_session();
    };
    let Some(relay) = &state.settings.relay else {
        return unknown_session();
    };
    match relay.sender.send(holder, id, &text).await {
        Ok(()) => reply::accepted(),
        Err(e) => {
            tracing::warn!("{e}");
            reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                message.id(),
                ErrorCode::InternalError,
                format!(
                    "Service Unavailable: this SSE session's stream is on another Manifold replica and {e}; send it again"
                ),
            )
        }
    }
}

/// A POST another replica handed over for session `id`: run here as if it had been posted here,
/// if the session is open here and the sender is its owner. `false`: no SSE session `id` here.
pub(crate) fn take_relayed(state: &Arc<AppState>, id: &str, text: &str) -> bool {
    let Some(session) = lock(&state.sse_sessions.open).get(id).cloned() else {
        return false;
    };
    let post: RelayedPost = match serde_json::from_str(text) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(error = %e, "a relayed SSE post did not decode; dropped");
            return true;
        }
    };
    if post.binding != session.owner {
        tracing::debug!(
            "a relayed SSE post came from another identity than the session's; dropped"
        );
        return true;
    }
    let message = match Message::decode_str(&post.message) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(error = %e, "a relayed SSE post held no message; dropped");
            return true;
        }
    };
    let caller = post.caller.map(|c| {
        Arc::new(Caller {
            name: c.name,
            groups: c.groups,
            scopes: c.scopes,
            bearer: None,
        })
    });
    let origin = CallOrigin {
        caller,
        toolset: post.toolset.map(Arc::from),
        trace: None,
    };
    if let Some(message) = session.core.take_unless_request(message) {
        request(state, &session, message, origin);
    }
    true
}

fn request(state: &Arc<AppState>, session: &Arc<SseSession>, message: Message, origin: CallOrigin) {
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
    tokio::spawn(async move {
        let outlet = Arc::new(StreamOutlet(Arc::clone(&session.log)));
        if let Some(response) =
            run_session_call_as(&gateway, &session.core, outlet, &message, &token, origin).await
        {
            session.log.push(response.as_str());
        }
        session.core.end(&id);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_names_its_replica_only_in_the_replica_form_within_the_bound() {
        assert_eq!(holder_of("a1b2c3-00ff"), Some("a1b2c3"));
        let longest = "a".repeat(MAX_REPLICA_ID_LEN);
        assert_eq!(
            holder_of(&format!("{longest}-00ff")),
            Some(longest.as_str())
        );
        let too_long = "a".repeat(MAX_REPLICA_ID_LEN + 1);
        assert_eq!(holder_of(&format!("{too_long}-00ff")), None);
        for not_one in [
            "00ff",
            "-00ff",
            "a1b2-",
            "a1b2-zz",
            "x1-00ff",
            "a1b2-00ff-11",
            "",
        ] {
            assert_eq!(holder_of(not_one), None, "{not_one}");
        }
    }
}
