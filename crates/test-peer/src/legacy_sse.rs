//! The deprecated HTTP+SSE transport of 2024-11-05: `GET /sse` opens a stream whose first event
//! names the POST endpoint (`/message?sessionId=...`); POSTs are answered 202 and every reply
//! travels on the stream. Legacy era only.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::behaviour::Behaviour;
use crate::engine::{self, Connection, Outgoing, Peer, RequestContext};
use crate::error::PeerError;
use crate::http_replies;
use crate::jsonrpc::{self, Incoming};
use crate::poison_free::lock;
use crate::sse_event;

#[derive(Debug)]
struct SseState {
    peer: Arc<Peer>,
    port: u16,
    sessions: Mutex<HashMap<String, Arc<Connection>>>,
    requests_seen: AtomicU64,
}

/// Serves `/sse` and `/message` on 127.0.0.1:`port` until the process ends.
pub async fn serve(peer: Arc<Peer>, port: u16) -> Result<(), PeerError> {
    let listener = http_replies::bind_and_announce(port).await?;
    let port = listener
        .local_addr()
        .map_err(|source| PeerError::Bind { port, source })?
        .port();
    let state = Arc::new(SseState {
        peer,
        port,
        sessions: Mutex::new(HashMap::new()),
        requests_seen: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/sse", get(open_stream))
        .route("/message", post(message))
        .layer(DefaultBodyLimit::max(http_replies::MAX_BODY_BYTES))
        .with_state(state);
    axum::serve(listener, app).await.map_err(PeerError::Serve)
}

/// Removes the session when its stream's body is dropped, i.e. when the client went away.
struct SessionGuard {
    state: Arc<SseState>,
    id: String,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if let Some(connection) = lock(&self.state.sessions).remove(&self.id) {
            connection.cancel_all();
        }
    }
}

async fn open_stream(State(state): State<Arc<SseState>>, uri: Uri, headers: HeaderMap) -> Response {
    let settings = &state.peer.settings;
    if let Some(response) = http_replies::fault(settings, &state.requests_seen, state.port, &uri) {
        return response;
    }
    if !http_replies::origin_allowed(&headers) {
        return http_replies::forbidden_origin();
    }
    let id = http_replies::new_session_id();
    let (sink, messages) = mpsc::unbounded_channel::<Outgoing>();
    let connection = Connection::new(Arc::clone(&state.peer), sink);
    lock(&state.sessions).insert(id.clone(), connection);
    let comments = settings.behaviour == Behaviour::SseComments;
    let first = sse_event::with_comment(
        comments,
        sse_event::endpoint_event(&format!("/message?sessionId={id}")),
    );
    let guard = SessionGuard {
        state: Arc::clone(&state),
        id,
    };
    let stream = futures::stream::unfold(
        (Some(first), messages, guard),
        move |(first, mut messages, guard)| async move {
            if let Some(first) = first {
                return Some((Ok::<Bytes, Infallible>(first), (None, messages, guard)));
            }
            let message = messages.recv().await?;
            let event =
                sse_event::with_comment(comments, sse_event::message_event(None, &message.bytes));
            Some((Ok(event), (None, messages, guard)))
        },
    );
    let mut response_headers = HeaderMap::new();
    response_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response_headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response_headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    (StatusCode::OK, response_headers, Body::from_stream(stream)).into_response()
}

fn session_id_from(uri: &Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("sessionId="))
}

async fn message(
    State(state): State<Arc<SseState>>,
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
    let Some(session_id) = session_id_from(&uri) else {
        return http_replies::plain(
            StatusCode::BAD_REQUEST,
            "the sessionId query parameter is required; take the URL from the endpoint event\n",
        );
    };
    let Some(connection) = lock(&state.sessions).get(session_id).cloned() else {
        return http_replies::plain(
            StatusCode::NOT_FOUND,
            "session not found: its SSE stream closed or never existed; GET /sse again\n",
        );
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(error) => {
            return http_replies::plain(
                StatusCode::BAD_REQUEST,
                &format!("the body is not JSON: {error}\n"),
            );
        }
    };
    match jsonrpc::classify(value) {
        Incoming::Request { id, method, params } => {
            let cancel = connection.begin(&id);
            let ctx = RequestContext {
                connection: Arc::clone(&connection),
                sink: connection.standalone_sink(),
                cancel,
                http_headers: Some(http_replies::header_pairs(&headers)),
                era: None,
            };
            tokio::spawn(async move {
                let finished = id.clone();
                engine::serve_request(ctx, id, method, params).await;
                connection.end(&finished);
            });
        }
        Incoming::Notification { method, params } => {
            engine::notify(&connection, &method, params.as_ref());
        }
        Incoming::Response { id, message } => {
            connection.deliver(&id, message);
        }
        Incoming::Invalid { reason, .. } => {
            return http_replies::plain(
                StatusCode::BAD_REQUEST,
                &format!("not a JSON-RPC message: {reason}\n"),
            );
        }
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}
