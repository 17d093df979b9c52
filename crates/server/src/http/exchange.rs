//! The request/reply helpers every HTTP transport shares: reading a bounded body into a message,
//! what a request's `Accept` headers allow and so how its reply is sent, and answering a call
//! whose messages go to a stream log (`/mcp` in both eras, `/message`). Kept below the
//! transports so that none of them imports another for these.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use manifold_wire::{ErrorCode, Id, Message, meta};
use tokio_util::sync::CancellationToken;

use super::reply;
use crate::accept::Accepts;
use crate::stream_log::StreamLog;

/// A header's value; one that is not text reads as a NUL (matching nothing expected).
pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|v| v.to_str().unwrap_or("\u{0}"))
}

/// What the request's `Accept` headers allow (all of them: a client may send several).
pub(crate) fn accepts(headers: &HeaderMap) -> Accepts {
    let mut values = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok());
    match (values.next(), values.next()) {
        (None, _) => Accepts::parse(None),
        // One header, the common case: read as it is, nothing joined.
        (Some(one), None) => Accepts::parse(Some(one)),
        (Some(first), Some(second)) => {
            let all: Vec<&str> = [first, second].into_iter().chain(values).collect();
            Accepts::parse(Some(&all.join(",")))
        }
    }
}

/// How a request's reply is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyMode {
    /// The client does not accept SSE.
    JsonOnly,
    /// An SSE stream from the start.
    Sse,
    /// JSON, unless the call sends something before its answer.
    Deferred,
}

pub(crate) fn reply_mode(accepts: &Accepts, request: &Message) -> ReplyMode {
    let progress = request
        .params_raw(&["_meta", meta::PROGRESS_TOKEN])
        .is_some();
    if !accepts.sse_ok() {
        ReplyMode::JsonOnly
    } else if progress || accepts.wants_sse() || !accepts.json_ok() {
        ReplyMode::Sse
    } else {
        ReplyMode::Deferred
    }
}

/// Cancels a call if the handler waiting for its first output goes away (the client left).
struct CancelOnDrop(Option<CancellationToken>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.cancel();
        }
    }
}

/// Answers a call whose messages go to `log`: as a stream (`stream()` builds it), or as JSON
/// when the call finished with nothing but its answer.
pub(crate) async fn deliver(
    log: &Arc<StreamLog>,
    mode: ReplyMode,
    cancel: CancellationToken,
    id: Option<&Id>,
    json_status: fn(&str) -> StatusCode,
    stream: impl FnOnce() -> Response,
) -> Response {
    if mode == ReplyMode::Sse {
        return stream();
    }
    let mut guard = CancelOnDrop(Some(cancel));
    log.wait_for_output().await;
    guard.0 = None;
    if let Some(data) = log.sole_event_if_finished() {
        return super::metering::answered(reply::json_answer(json_status(&data), data.to_string()));
    }
    if log.finished_at().is_some() && log.appended() == 0 {
        return reply::error(
            StatusCode::OK,
            id,
            ErrorCode::RequestCancelled,
            "the request was cancelled",
        );
    }
    stream()
}

/// Reads a body within the bound and decodes it; a body that is no JSON-RPC message gets 400
/// with the parse error (with its id when one could be read).
pub(crate) async fn read_message(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Message, Box<Response>> {
    let bytes = read_body(body, headers, limit).await?;
    Message::decode(&bytes).map_err(|fault| {
        Box::new(reply::json(
            StatusCode::BAD_REQUEST,
            fault.to_response().as_str().to_owned(),
        ))
    })
}

/// Reads a body within the bound.
async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<bytes::Bytes, Box<Response>> {
    let declared =
        header(headers, header::CONTENT_LENGTH.as_str()).and_then(|l| l.parse::<usize>().ok());
    if declared.is_some_and(|l| l > limit) {
        return Err(Box::new(reply::too_large(limit)));
    }
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| Box::new(reply::too_large(limit)))
}
