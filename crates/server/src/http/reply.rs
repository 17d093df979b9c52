//! HTTP responses the transports send: JSON-RPC bodies with the status the protocol asks for,
//! SSE streams with the headers proxies need, and the empty 202.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::Stream;
use manifold_wire::{ErrorCode, ErrorObject, Id, Message};

use crate::stream_log::{ReaderOptions, Start, StreamLog};

/// A JSON body.
pub fn json(status: StatusCode, body: impl Into<String>) -> Response {
    let mut r = (status, body.into()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A call's JSON answer. A rate-limit refusal also carries `Retry-After` (in seconds), so an HTTP
/// client or proxy that knows nothing of JSON-RPC still backs off; the status stays that of the
/// answer, because MCP clients read JSON-RPC errors from 200 replies.
pub fn json_answer(status: StatusCode, body: String) -> Response {
    let retry_after = retry_after_secs(&body);
    let mut r = json(status, body);
    if let Some(secs) = retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// The wait a rate-limit refusal asks for; the substring test keeps ordinary answers from being
/// decoded twice.
fn retry_after_secs(body: &str) -> Option<u64> {
    if !body.contains("retryAfterMs") {
        return None;
    }
    let message = Message::decode(body.as_bytes()).ok()?;
    manifold_gateway::rate_limit::retry_after_secs_of(&message)
}

/// A JSON-RPC error response with an HTTP status.
pub fn rpc_error(status: StatusCode, id: Option<&Id>, error: &ErrorObject) -> Response {
    json(
        status,
        Message::error(id.cloned(), error).as_str().to_owned(),
    )
}

/// A JSON-RPC error from a code and message.
pub fn error(
    status: StatusCode,
    id: Option<&Id>,
    code: ErrorCode,
    message: impl Into<String>,
) -> Response {
    rpc_error(status, id, &ErrorObject::new(code, message))
}

/// `202 Accepted` with no body.
pub fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

const EVENT_STREAM: &str = "text/event-stream";

/// Whether a response is an SSE stream (made by [`sse`]) rather than a complete body.
pub fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == EVENT_STREAM.as_bytes())
}

/// An SSE response over a stream of encoded events.
pub fn sse(stream: impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    let mut r = Response::new(Body::from_stream(stream));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// An SSE response reading a stream log from its first event. Only resuming into a gap can be
/// refused, so a refusal here is Manifold's own fault: 500.
pub fn sse_from_beginning(log: &Arc<StreamLog>, options: ReaderOptions) -> Response {
    match log.reader(Start::Beginning, options) {
        Ok(stream) => sse(stream),
        Err(why) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            ErrorCode::InternalError,
            why.to_string(),
        ),
    }
}

/// `405` naming what the endpoint allows.
pub fn method_not_allowed(allow: &'static str, why: &str) -> Response {
    let mut r = error(
        StatusCode::METHOD_NOT_ALLOWED,
        None,
        ErrorCode::InvalidRequest,
        why,
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// `406` for a client that accepts none of the forms the endpoint can answer in.
pub fn not_acceptable(id: Option<&Id>, needs: &str) -> Response {
    error(
        StatusCode::NOT_ACCEPTABLE,
        id,
        ErrorCode::InvalidRequest,
        format!("Not Acceptable: the Accept header must allow {needs}"),
    )
}

/// `413` for a body over the bound.
pub fn too_large(limit: usize) -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        None,
        ErrorCode::MessageTooLarge,
        format!("the request body is larger than {limit} bytes, Manifold's limit for one message"),
    )
}

/// 404 for a session id this gateway does not know, or that belongs to another identity.
pub(crate) fn session_gone(id: Option<&Id>) -> Response {
    error(
        StatusCode::NOT_FOUND,
        id,
        ErrorCode::SessionNotFound,
        "Not Found: this MCP session has ended or was not minted by this gateway; start a new one with initialize",
    )
}
