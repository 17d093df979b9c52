//! Streamable HTTP at `/mcp` on 127.0.0.1, for both eras at once.
//!
//! Which era a POST belongs to is read from the request itself: an `Mcp-Session-Id` header, or an
//! `initialize` that names no modern revision, means the legacy era (sessions, server->client
//! requests on the POST's SSE stream, resumable streams, GET for the standalone stream, DELETE to
//! end a session); anything else is admitted as a modern request (headers and `_meta` checked
//! first, GET and DELETE without a session answered 405). A response goes out as plain JSON when
//! it is the only thing its request produced quickly, and as SSE otherwise. Requests whose Host or
//! Origin is not a loopback name are refused with 403, against DNS rebinding.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::{Stream, StreamExt};
use manifold_wire::meta::{self as wire_meta, method};
use manifold_wire::sse::{SseEvent, encode_comment};
use manifold_wire::{Era as WireEra, ErrorCode, Kind, Message, Revision};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::engine::{self, Call, Era, Fixture};
use crate::error::{FixtureError, RpcError};
use crate::modern_validation::{self, RequestHeaders};
use crate::outbox::{Outbox, Outgoing};
use crate::subscriptions::Change;
use crate::transport::http_session::{Session, Sessions};

/// How long a request may take to produce its first output before its response becomes an SSE
/// stream (so long work does not hold back the response headers).
pub const FIRST_OUTPUT_GRACE: Duration = Duration::from_millis(250);

/// How often an idle SSE stream carries a comment, so a vanished client is noticed.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

#[derive(Clone)]
struct App {
    fixture: Arc<Fixture>,
    sessions: Arc<Sessions>,
}

/// Serves until the process ends; prints `listening on 127.0.0.1:PORT` once bound.
pub async fn run(fixture: Arc<Fixture>, port: u16) -> Result<(), FixtureError> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|source| FixtureError::Bind { port, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| FixtureError::Bind { port, source })?;
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("listening on 127.0.0.1:{}\n", bound.port()).as_bytes())
        .await
        .map_err(FixtureError::Stdio)?;
    stdout.flush().await.map_err(FixtureError::Stdio)?;
    let app = App {
        fixture,
        sessions: Arc::new(Sessions::default()),
    };
    let router = Router::new()
        .route("/mcp", post(post_mcp).get(get_mcp).delete(delete_mcp))
        .with_state(app);
    axum::serve(listener, router)
        .await
        .map_err(FixtureError::Serve)
}

fn json_response(status: StatusCode, message: &Message) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        message.as_str().to_owned(),
    )
        .into_response()
}

fn error_response(status: StatusCode, error: &RpcError, message: Option<&Message>) -> Response {
    json_response(
        status,
        &error.to_response(message.and_then(|m| m.id().cloned())),
    )
}

fn sse_response(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

fn with_header(mut response: Response, name: &'static str, value: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(value) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(name), value);
    }
    response
}

fn method_not_allowed() -> Response {
    let error = RpcError::new(
        ErrorCode::InvalidRequest,
        "only POST is served without an Mcp-Session-Id; GET and DELETE need a legacy session",
    );
    let response = error_response(StatusCode::METHOD_NOT_ALLOWED, &error, None);
    with_header(response, "allow", "POST")
}

/// The HTTP status of a modern-era error response.
fn modern_status(code: i64) -> StatusCode {
    match ErrorCode::from_code(code) {
        Some(ErrorCode::MethodNotFound) => StatusCode::NOT_FOUND,
        Some(
            ErrorCode::ParseError
            | ErrorCode::InvalidRequest
            | ErrorCode::InvalidParams
            | ErrorCode::HeaderMismatch
            | ErrorCode::MissingRequiredClientCapability
            | ErrorCode::UnsupportedProtocolVersion,
        ) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// Loopback names only, with or without a port (`localhost`, `127.0.0.1`, `[::1]`).
fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']')
            .next()
            .map(|h| format!("[{h}]"))
            .unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default().to_owned()
    };
    matches!(
        host.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "[::1]"
    )
}

/// 403 for a Host or Origin that is not a loopback name (DNS rebinding protection).
fn refuse_foreign_origin(headers: &HeaderMap) -> Option<Response> {
    let host_ok = headers
        .get(header::HOST)
        .is_none_or(|h| h.to_str().is_ok_and(is_loopback_authority));
    let origin_ok = headers.get(header::ORIGIN).is_none_or(|o| {
        o.to_str().is_ok_and(|o| {
            o.split_once("://")
                .map(|(_, rest)| rest.split('/').next().unwrap_or_default())
                .is_some_and(is_loopback_authority)
        })
    });
    if host_ok && origin_ok {
        return None;
    }
    let error = RpcError::new(
        ErrorCode::Forbidden,
        "this server only answers requests whose Host and Origin name a loopback address (localhost, 127.0.0.1, [::1])",
    );
    Some(error_response(StatusCode::FORBIDDEN, &error, None))
}

fn legacy_revision(text: &str) -> Option<Revision> {
    text.parse::<Revision>()
        .ok()
        .filter(|r| r.era() == WireEra::Legacy)
}

async fn post_mcp(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refusal) = refuse_foreign_origin(&headers) {
        return refusal;
    }
    let message = match Message::decode(&body) {
        Ok(message) => message,
        Err(fault) => return json_response(StatusCode::BAD_REQUEST, &fault.to_response()),
    };
    let session_id = header_text(&headers, wire_meta::header::SESSION_ID).map(str::to_owned);
    let session = match &session_id {
        Some(id) => match app.sessions.get(id) {
            Some(session) => Some(session),
            None => return unknown_session(&message),
        },
        None => None,
    };
    match message.kind() {
        Kind::Result | Kind::Error => match session {
            Some(session) => {
                session.legacy.client_requests.resolve(message);
                StatusCode::ACCEPTED.into_response()
            }
            None => {
                let error = RpcError::new(
                    ErrorCode::InvalidRequest,
                    "a response to the server needs the Mcp-Session-Id of the session that asked",
                );
                error_response(StatusCode::BAD_REQUEST, &error, None)
            }
        },
        Kind::Notification => {
            if let Some(session) = session {
                legacy_notification(&session, &message);
            }
            StatusCode::ACCEPTED.into_response()
        }
        Kind::Request => request(app, &headers, message, session).await,
    }
}

fn unknown_session(message: &Message) -> Response {
    let error = RpcError::new(
        ErrorCode::SessionNotFound,
        "no session has this Mcp-Session-Id (it ended or never existed); send initialize again",
    );
    error_response(StatusCode::NOT_FOUND, &error, Some(message))
}

fn legacy_notification(session: &Session, message: &Message) {
    match message.method() {
        Some(method::INITIALIZED) => session.legacy.mark_initialized(),
        Some(method::CANCELLED) => {
            if let Some(id) = message
                .params_raw(&["requestId"])
                .and_then(|raw| manifold_wire::Id::from_raw(raw).ok())
            {
                session.legacy.cancel(&id);
            }
        }
        _ => {}
    }
}

async fn request(
    app: App,
    headers: &HeaderMap,
    message: Message,
    session: Option<Arc<Session>>,
) -> Response {
    let call = match Call::from_message(&message) {
        Ok(call) => call,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &e, Some(&message)),
    };
    let version = header_text(headers, wire_meta::header::PROTOCOL_VERSION);
    if let Some(session) = session {
        if let Some(v) = version
            && legacy_revision(v).is_none()
        {
            let error = RpcError::new(
                ErrorCode::InvalidRequest,
                format!("MCP-Protocol-Version {v:?} is not a revision this session can speak"),
            );
            return error_response(StatusCode::BAD_REQUEST, &error, Some(&message));
        }
        return serve_legacy(app, session, call).await;
    }
    let legacy_header = version.is_some_and(|v| legacy_revision(v).is_some());
    if call.method == method::INITIALIZE
        && !modern_validation::names_a_revision(&call.params)
        && (version.is_none() || legacy_header)
    {
        let (state, result) = engine::initialize(&call.params);
        let session = app.sessions.create(state);
        let response = json_response(
            StatusCode::OK,
            &Message::result(&call.id, &result.to_string()),
        );
        return with_header(response, "mcp-session-id", &session.id);
    }
    if legacy_header {
        let error = RpcError::new(
            ErrorCode::InvalidRequest,
            "this legacy-era request has no Mcp-Session-Id; send initialize first and use the session it returns",
        );
        return error_response(StatusCode::BAD_REQUEST, &error, Some(&message));
    }
    let mut request_headers = RequestHeaders::new();
    for (name, value) in headers {
        request_headers.push(name.as_str(), value.as_bytes());
    }
    match modern_validation::admit(
        &call.method,
        &call.params,
        Some(&request_headers),
        app.fixture.catalog.dynamic_tool(),
    ) {
        Ok(meta) => serve_modern(app, call, meta).await,
        Err(e) => error_response(modern_status(e.code), &e, Some(&message)),
    }
}

async fn serve_legacy(app: App, session: Arc<Session>, call: Call) -> Response {
    let cancel = match session.legacy.begin(&call.id) {
        Ok(token) => token,
        Err(e) => return json_response(StatusCode::OK, &e.to_response(Some(call.id))),
    };
    let (out, mut rx) = Outbox::channel();
    let id = call.id.clone();
    let legacy = session.legacy.clone();
    tokio::spawn(async move {
        engine::serve(app.fixture, call, Era::Legacy(legacy.clone()), out, cancel).await;
        legacy.end(&id);
    });
    let first = tokio::time::timeout(FIRST_OUTPUT_GRACE, rx.recv()).await;
    match first {
        Ok(Some(Outgoing::Final(response))) => json_response(StatusCode::OK, &response),
        Ok(None) => StatusCode::ACCEPTED.into_response(),
        Ok(Some(item)) => {
            let log = session.open_stream();
            log.record(item);
            tokio::spawn(log.clone().pump(rx));
            sse_response(Body::from_stream(log.reader(0, true)))
        }
        Err(_) => {
            let log = session.open_stream();
            tokio::spawn(log.clone().pump(rx));
            sse_response(Body::from_stream(log.reader(0, true)))
        }
    }
}

async fn serve_modern(app: App, call: Call, meta: modern_validation::ModernMeta) -> Response {
    let cancel = CancellationToken::new();
    let (out, mut rx) = Outbox::channel();
    tokio::spawn(engine::serve(
        app.fixture,
        call,
        Era::Modern(meta),
        out,
        cancel.clone(),
    ));
    let first = tokio::time::timeout(FIRST_OUTPUT_GRACE, rx.recv()).await;
    match first {
        Ok(Some(Outgoing::Final(response))) => {
            let status = response
                .error_object()
                .map_or(StatusCode::OK, |e| modern_status(e.code));
            json_response(status, &response)
        }
        Ok(None) => StatusCode::ACCEPTED.into_response(),
        Ok(Some(item)) => sse_response(Body::from_stream(modern_stream(Some(item), rx, cancel))),
        Err(_) => sse_response(Body::from_stream(modern_stream(None, rx, cancel))),
    }
}

/// A modern request's SSE stream: its outbox as events (no ids: the modern era does not resume),
/// ending with the response. Dropping the stream (the client left) cancels the request.
fn modern_stream(
    first: Option<Outgoing>,
    rx: mpsc::Receiver<Outgoing>,
    cancel: CancellationToken,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    let guard = cancel.drop_guard();
    let state = (first, rx, guard, false);
    futures::stream::unfold(state, |(mut pending, mut rx, guard, finished)| async move {
        if finished {
            return None;
        }
        loop {
            let item = match pending.take() {
                Some(item) => Some(item),
                None => {
                    tokio::select! {
                        item = rx.recv() => item,
                        () = tokio::time::sleep(KEEPALIVE) => {
                            let ping = Bytes::from(encode_comment("keepalive"));
                            return Some((Ok(ping), (None, rx, guard, false)));
                        }
                    }
                }
            };
            match item {
                None => return None,
                Some(Outgoing::CloseStream) => continue,
                Some(Outgoing::Message(m)) => {
                    let frame = Bytes::from(SseEvent::message(m.as_str()).encode());
                    return Some((Ok(frame), (None, rx, guard, false)));
                }
                Some(Outgoing::Final(m)) => {
                    let frame = Bytes::from(SseEvent::message(m.as_str()).encode());
                    return Some((Ok(frame), (None, rx, guard, true)));
                }
            }
        }
    })
}

async fn get_mcp(State(app): State<App>, headers: HeaderMap) -> Response {
    if let Some(refusal) = refuse_foreign_origin(&headers) {
        return refusal;
    }
    let Some(session_id) = header_text(&headers, wire_meta::header::SESSION_ID) else {
        return method_not_allowed();
    };
    let Some(session) = app.sessions.get(session_id) else {
        let error = RpcError::new(
            ErrorCode::SessionNotFound,
            "no session has this Mcp-Session-Id (it ended or never existed); send initialize again",
        );
        return error_response(StatusCode::NOT_FOUND, &error, None);
    };
    if let Some(last) = header_text(&headers, wire_meta::header::LAST_EVENT_ID) {
        return match session.resume_point(last) {
            Some((log, from)) => sse_response(Body::from_stream(log.reader(from, false))),
            None => {
                let error = RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!("Last-Event-ID {last:?} names no stream this session still keeps"),
                );
                error_response(StatusCode::BAD_REQUEST, &error, None)
            }
        };
    }
    let changes = app.fixture.hub.listen();
    sse_response(Body::from_stream(standalone_stream(session, changes)))
}

/// A session's standalone stream: list changes, and updates of resources it subscribed to.
fn standalone_stream(
    session: Arc<Session>,
    changes: broadcast::Receiver<Change>,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    futures::stream::unfold((session, changes), |(session, mut changes)| async move {
        loop {
            let change = tokio::select! {
                change = changes.recv() => change,
                () = tokio::time::sleep(KEEPALIVE) => {
                    return Some((Ok(Bytes::from(encode_comment("keepalive"))), (session, changes)));
                }
            };
            let change = match change {
                Ok(change) => change,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            if let Change::ResourceUpdated(uri) = &change
                && !session.legacy.is_subscribed(uri)
            {
                continue;
            }
            let params = Value::Object(change.params()).to_string();
            let notification = Message::notification(change.method(), Some(&params));
            let frame = Bytes::from(SseEvent::message(notification.as_str()).encode());
            return Some((Ok(frame), (session, changes)));
        }
    })
    .boxed()
}

async fn delete_mcp(State(app): State<App>, headers: HeaderMap) -> Response {
    if let Some(refusal) = refuse_foreign_origin(&headers) {
        return refusal;
    }
    let Some(session_id) = header_text(&headers, wire_meta::header::SESSION_ID) else {
        return method_not_allowed();
    };
    if app.sessions.remove(session_id) {
        StatusCode::OK.into_response()
    } else {
        let error = RpcError::new(
            ErrorCode::SessionNotFound,
            "no session has this Mcp-Session-Id (it ended or never existed)",
        );
        error_response(StatusCode::NOT_FOUND, &error, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_authorities_pass() {
        for ok in [
            "localhost",
            "localhost:3000",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:8080",
            "LOCALHOST",
        ] {
            assert!(is_loopback_authority(ok), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "evil.example.com:80",
            "127.0.0.2",
            "localhost.evil.com",
            "[::2]",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn modern_errors_map_to_the_statuses_the_transport_requires() {
        assert_eq!(modern_status(-32601), StatusCode::NOT_FOUND);
        assert_eq!(modern_status(-32602), StatusCode::BAD_REQUEST);
        assert_eq!(modern_status(-32020), StatusCode::BAD_REQUEST);
        assert_eq!(modern_status(-32021), StatusCode::BAD_REQUEST);
        assert_eq!(modern_status(-32022), StatusCode::BAD_REQUEST);
        assert_eq!(modern_status(-32603), StatusCode::OK);
    }
}
