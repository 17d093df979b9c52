//! The request/reply helpers every HTTP transport shares: reading a bounded body into a message,
//! what a request's `Accept` headers allow and so how its reply is sent, and answering a call
//! whose messages go to a stream log (`/mcp` in both eras, `/message`). Kept below the
//! transports so that none of them imports another for these.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures::future::BoxFuture;
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

/// A call whose messages go to a stream log, run in its request's own task until it ends or
/// sends something before its answer. Most calls end first, and their answer goes back as a JSON
/// body without a task spawned for the call (and, when a worker thread was idle, without waking
/// it to look for that task). A call that sends something first goes on as a task of its own, as
/// a reply stream needs. Dropped with the call still in it (the client went away), the call is
/// cancelled and left to wind down on a task of its own, as a spawned call would be.
pub(crate) struct InlineCall {
    call: Option<BoxFuture<'static, ()>>,
    cancel: CancellationToken,
}

impl InlineCall {
    pub(crate) fn new(call: BoxFuture<'static, ()>, cancel: CancellationToken) -> InlineCall {
        InlineCall {
            call: Some(call),
            cancel,
        }
    }

    /// Runs the call until it ends or `log` has output; what is left then runs on its own.
    pub(crate) async fn run_until_output(&mut self, log: &StreamLog) {
        let ended = match self.call.as_mut() {
            None => return,
            Some(call) => tokio::select! {
                biased;
                () = call.as_mut() => true,
                () = log.wait_for_output() => false,
            },
        };
        if let Some(rest) = self.call.take()
            && !ended
        {
            tokio::spawn(rest);
        }
    }
}

impl Drop for InlineCall {
    fn drop(&mut self) {
        if let Some(rest) = self.call.take() {
            self.cancel.cancel();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(rest);
            }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    /// Long enough for a task on another thread to run; only a hang guard.
    const PATIENCE: Duration = Duration::from_secs(10);

    fn log() -> Arc<StreamLog> {
        StreamLog::new(None, None, 16, 1 << 16)
    }

    #[tokio::test]
    async fn a_call_that_ends_before_any_output_has_ended_when_the_run_returns() {
        let ended = Arc::new(AtomicBool::new(false));
        let (log, flag) = (log(), Arc::clone(&ended));
        let call_log = Arc::clone(&log);
        let call = Box::pin(async move {
            tokio::task::yield_now().await;
            call_log.push_final(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
            flag.store(true, Ordering::SeqCst);
        });
        InlineCall::new(call, CancellationToken::new())
            .run_until_output(&log)
            .await;
        assert!(
            ended.load(Ordering::SeqCst),
            "the call ran to its end in place"
        );
        assert!(log.sole_event_if_finished().is_some());
    }

    #[tokio::test]
    async fn a_call_that_sends_something_first_goes_on_as_its_own_task() {
        let log = log();
        let (go_on, may_end) = oneshot::channel::<()>();
        let (ended, has_ended) = oneshot::channel::<()>();
        let call_log = Arc::clone(&log);
        let call = Box::pin(async move {
            call_log.push(r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#);
            let _ = may_end.await;
            call_log.push_final(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
            let _ = ended.send(());
        });
        let token = CancellationToken::new();
        InlineCall::new(call, token.clone())
            .run_until_output(&log)
            .await;
        assert_eq!(log.appended(), 1, "the run returned at the first output");
        go_on.send(()).unwrap();
        tokio::time::timeout(PATIENCE, has_ended)
            .await
            .unwrap()
            .unwrap();
        assert!(!token.is_cancelled());
    }

    #[tokio::test]
    async fn a_call_dropped_before_its_end_is_cancelled_and_winds_down_on_its_own_task() {
        let log = log();
        let token = CancellationToken::new();
        let (wound_down, has_wound_down) = oneshot::channel::<()>();
        let watched = token.clone();
        let call = Box::pin(async move {
            watched.cancelled().await;
            let _ = wound_down.send(());
        });
        let mut inline = InlineCall::new(call, token.clone());
        let ran = tokio::time::timeout(Duration::from_millis(20), inline.run_until_output(&log));
        assert!(ran.await.is_err(), "the call waits for its cancellation");
        drop(inline);
        assert!(token.is_cancelled());
        tokio::time::timeout(PATIENCE, has_wound_down)
            .await
            .unwrap()
            .unwrap();
    }
}
