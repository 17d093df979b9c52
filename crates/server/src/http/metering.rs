//! What the HTTP layer contributes to Manifold's telemetry: body bytes in and out, requests
//! refused before they reached the gateway (by reason), and the W3C trace context of each
//! request's HTTP headers, put in the request's extensions for its handler (`edge_facts.rs`).
//!
//! It runs first in the MCP endpoints' one edge middleware (`admission.rs`), around the others,
//! so that every refusal is seen whichever check made it (the drain, the Origin/Host guard,
//! authentication, the transports' own checks). A refusal is any
//! 4xx/5xx answer on an MCP path that the gateway did not produce: the gateway's own answers are
//! marked ([`answered`]) and counted as requests instead (`observed_call.rs`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use manifold_gateway::TraceHeaders;
use manifold_telemetry::trace_context::{TRACEPARENT, TRACESTATE, TraceContext};
use manifold_telemetry::{RejectReason, RequestOutcome, Telemetry};
use manifold_wire::Era;

use super::AppState;
use super::audited_refusal::EdgeRequest;

/// Largest refusal body read to learn its JSON-RPC error code (refusals are short messages).
pub const MAX_REFUSAL_BODY: u64 = 64 * 1024;

/// Marks a response as the gateway's answer to a request (not a refusal), whatever its status.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GatewayAnswer;

/// Names why a response refuses its request, where the status alone cannot tell (403: Origin
/// or Host).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refused(pub RejectReason);

/// The gateway's answer, marked so the middleware does not count it as a refusal.
pub(crate) fn answered(mut response: Response) -> Response {
    response.extensions_mut().insert(GatewayAnswer);
    response
}

/// The valid trace context in `traceparent` / `tracestate` headers (several `tracestate`
/// headers are one list, joined with commas as the specification says).
pub(crate) fn trace_headers(headers: &HeaderMap) -> Option<TraceHeaders> {
    let parent = headers.get(TRACEPARENT)?.to_str().ok()?;
    let states: Vec<&str> = headers
        .get_all(TRACESTATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let state = (!states.is_empty()).then(|| states.join(","));
    let trace = TraceContext::from_parts(parent, state.as_deref())?;
    Some(TraceHeaders {
        traceparent: trace.parent.to_string(),
        tracestate: trace.state,
    })
}

/// Counts a request the server answered itself (`initialize`, `server/discover`,
/// `subscriptions/listen`), as the gateway's requests are counted.
pub(crate) fn count_request(state: &AppState, method: &str, era: Era, outcome: RequestOutcome) {
    state
        .gateway
        .settings()
        .telemetry
        .metrics
        .request(method, era, outcome);
}

/// Runs `inner` on an MCP endpoint's `request` with both bodies counted, its trace context in
/// its extensions, and a refusal (whichever check made it) counted and audited. Called first by
/// the MCP endpoints' one edge middleware (`admission.rs`); other routes are not metered.
pub(crate) async fn metered<F, Fut>(state: &AppState, request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let telemetry = Arc::clone(&state.gateway.settings().telemetry);
    let trace = trace_headers(request.headers());
    let edge = EdgeRequest::of(&request);
    let mut request = request.map(|body| Body::new(Metered::new(body, &telemetry, Direction::In)));
    request
        .extensions_mut()
        .insert(super::edge_facts::HttpTrace(trace.clone()));
    let response = inner(request).await;
    let status = response.status();
    let refused = (status.is_client_error() || status.is_server_error())
        && response.extensions().get::<GatewayAnswer>().is_none();
    let response = if refused {
        let (response, reason) = count_refusal(&telemetry, response).await;
        crate::http::audited_refusal::record(&telemetry, reason, &edge, trace.as_ref());
        response
    } else {
        response
    };
    response.map(|body| Body::new(Metered::new(body, &telemetry, Direction::Out)))
}

/// Counts a refusal by the reason it names (extension), or by its status and error code.
async fn count_refusal(telemetry: &Telemetry, response: Response) -> (Response, RejectReason) {
    if let Some(Refused(reason)) = response.extensions().get::<Refused>().copied() {
        telemetry.metrics.rejected(reason);
        return (response, reason);
    }
    let status = response.status().as_u16();
    let short = response
        .body()
        .size_hint()
        .upper()
        .is_some_and(|n| n <= MAX_REFUSAL_BODY);
    if !short {
        let reason = RejectReason::classify(status, None);
        telemetry.metrics.rejected(reason);
        return (response, reason);
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_REFUSAL_BODY as usize)
        .await
        .unwrap_or_default();
    let code = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| {
            manifold_wire::patch::get(text, &["error", "code"])
                .ok()
                .flatten()
        })
        .and_then(|c| c.trim().parse::<i64>().ok());
    let reason = RejectReason::classify(status, code);
    telemetry.metrics.rejected(reason);
    (Response::from_parts(parts, Body::from(bytes)), reason)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    In,
    Out,
}

/// A body that counts the bytes passing through it; frames, size hints and the end of stream
/// are the inner body's, so `Content-Length` and streaming behave exactly as without it.
struct Metered {
    inner: Body,
    telemetry: Arc<Telemetry>,
    direction: Direction,
}

impl Metered {
    fn new(inner: Body, telemetry: &Arc<Telemetry>, direction: Direction) -> Metered {
        Metered {
            inner,
            telemetry: Arc::clone(telemetry),
            direction,
        }
    }
}

impl HttpBody for Metered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            let n = data.len() as u64;
            match this.direction {
                Direction::In => this.telemetry.metrics.bytes_in(n),
                Direction::Out => this.telemetry.metrics.bytes_out(n),
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn valid_trace_headers_are_read_and_tracestate_lists_joined() {
        let mut h = HeaderMap::new();
        h.insert(TRACEPARENT, HeaderValue::from_static(PARENT));
        h.append(TRACESTATE, HeaderValue::from_static("a=1"));
        h.append(TRACESTATE, HeaderValue::from_static("b=2"));
        let t = trace_headers(&h).unwrap_or_default();
        assert_eq!(t.traceparent, PARENT);
        assert_eq!(t.tracestate.as_deref(), Some("a=1,b=2"));
        h.insert(TRACEPARENT, HeaderValue::from_static("00-not-a-trace"));
        assert_eq!(trace_headers(&h), None);
        assert_eq!(trace_headers(&HeaderMap::new()), None);
    }
}
