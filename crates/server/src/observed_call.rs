//! One downstream request through the gateway, observed: counted by method, era and outcome,
//! run inside its span, and handed the trace context its upstream calls continue.
//!
//! Every transport (Streamable HTTP in both eras, HTTP+SSE, stdio) runs requests through
//! `session::run_call`, which runs them through here, so each is counted exactly once: with the
//! outcome of its answer, or as cancelled when it is dropped unanswered (client cancellation, a
//! closed stream, the drain's cut-off).

use std::sync::Arc;

use manifold_gateway::{Gateway, RequestContext, TraceHeaders};
use manifold_telemetry::trace_context::{TRACEPARENT, TRACESTATE};
use manifold_telemetry::{RequestOutcome, Telemetry, TraceContext, spans};
use manifold_wire::{Era, Kind, Message};
use tracing::Instrument as _;

/// Counts the request once: with its outcome, or as cancelled if dropped first.
struct Counted<'a> {
    telemetry: &'a Telemetry,
    method: &'a str,
    era: Era,
    done: bool,
}

impl Counted<'_> {
    fn finish(&mut self, outcome: RequestOutcome) {
        self.done = true;
        self.telemetry
            .metrics
            .request(self.method, self.era, outcome);
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.finish(RequestOutcome::Cancelled);
        }
    }
}

fn meta_string(request: &Message, key: &str) -> Option<String> {
    request
        .params_raw(&["_meta", key])
        .and_then(|raw| serde_json::from_str::<String>(raw).ok())
}

fn as_headers(trace: TraceContext) -> TraceHeaders {
    TraceHeaders {
        traceparent: trace.parent.to_string(),
        tracestate: trace.state,
    }
}

/// Runs `request` through the gateway. `ctx.trace` comes in as the HTTP headers' trace context
/// (or `None`); while spans are exported it becomes the request span's own context, parented on
/// the request's `_meta` context or, failing that, the headers'.
pub async fn handle(gateway: &Gateway, mut ctx: RequestContext, request: &Message) -> Message {
    let telemetry = Arc::clone(&gateway.settings().telemetry);
    let method = request.method().unwrap_or_default();
    let mut counted = Counted {
        telemetry: &telemetry,
        method,
        era: ctx.client.revision.era(),
        done: false,
    };
    let span = spans::downstream_request(method, ctx.client.revision);
    if manifold_telemetry::otlp::exporting() && !span.is_disabled() {
        let from_meta = meta_string(request, TRACEPARENT);
        let meta_state = meta_string(request, TRACESTATE);
        let from_headers = ctx.trace.take();
        let incoming = TraceContext::resolve(
            (from_meta.as_deref(), meta_state.as_deref()),
            (
                from_headers.as_ref().map(|t| t.traceparent.as_str()),
                from_headers.as_ref().and_then(|t| t.tracestate.as_deref()),
            ),
        );
        if let Some(parent) = &incoming {
            spans::adopt(&span, parent);
        }
        if let Some(session) = &ctx.session {
            span.record("mcp.session.id", session.tag());
        }
        ctx.trace = spans::outgoing(&span, incoming).map(as_headers);
    }
    let response = gateway.handle(&ctx, request).instrument(span.clone()).await;
    let outcome = match response.kind() {
        Kind::Result => RequestOutcome::Ok,
        _ => {
            spans::mark_failed(&span);
            RequestOutcome::Error
        }
    };
    counted.finish(outcome);
    response
}
