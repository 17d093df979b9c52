//! The spans a trace gets inside Manifold: one per downstream request (a server span, parented
//! on the caller's trace context) and one per upstream call (a client span, whose context is what
//! the upstream receives as its parent).
//!
//! They are ordinary `tracing` spans under [`TRACE_TARGET`]; the OTLP layer ([`crate::otlp`])
//! turns them into OpenTelemetry spans. When no exporter is installed they are disabled
//! callsites, and the helpers here return at once: the trace context a request brought is then
//! passed on unchanged, so a trace still crosses the gateway.

use std::str::FromStr;

use manifold_wire::Revision;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::labels;
pub use crate::otlp::TRACE_TARGET;
use crate::otlp::exporting;
use crate::trace_context::{TraceContext, TraceParent};

/// The span of one request from a client.
pub fn downstream_request(method: &str, revision: Revision) -> Span {
    let method = labels::method(method);
    tracing::info_span!(
        target: TRACE_TARGET,
        "mcp.request",
        otel.name = method,
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = method,
        mcp.protocol.version = revision.as_str(),
        mcp.session.id = Empty,
        manifold.call_id = Empty,
    )
}

/// The span of one request Manifold sends to an upstream.
pub fn upstream_call(server: &str, method: &str) -> Span {
    let method = labels::method(method);
    tracing::info_span!(
        target: TRACE_TARGET,
        "mcp.upstream",
        otel.name = %format_args!("{method} {server}"),
        otel.kind = "client",
        otel.status_code = Empty,
        mcp.method.name = method,
        manifold.upstream = server,
        gen_ai.tool.name = Empty,
        manifold.call_id = Empty,
    )
}

/// Marks a span failed (OpenTelemetry status `ERROR`).
pub fn mark_failed(span: &Span) {
    span.record("otel.status_code", "ERROR");
}

fn remote_context(parent: &TraceContext) -> opentelemetry::Context {
    let state = parent
        .state
        .as_deref()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let span_context = SpanContext::new(
        TraceId::from_bytes(parent.parent.trace_id),
        SpanId::from_bytes(parent.parent.parent_id),
        TraceFlags::new(parent.parent.flags),
        true,
        state,
    );
    opentelemetry::Context::new().with_remote_span_context(span_context)
}

/// Makes `parent` the span's parent (before the span is first entered). No effect without an
/// exporter.
pub fn adopt(span: &Span, parent: &TraceContext) {
    if !exporting() || span.is_disabled() {
        return;
    }
    if let Err(e) = span.set_parent(remote_context(parent)) {
        tracing::debug!(error = %e, "could not parent a span on the incoming trace context");
    }
}

/// The span's own trace context, to hand on to whoever it calls; `None` without an exporter.
pub fn context_of(span: &Span) -> Option<TraceContext> {
    if !exporting() || span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let otel = cx.span();
    let sc = otel.span_context();
    if !sc.is_valid() {
        return None;
    }
    let state = sc.trace_state().header();
    Some(TraceContext {
        parent: TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            parent_id: sc.span_id().to_bytes(),
            flags: sc.trace_flags().to_u8(),
        },
        state: (!state.is_empty()).then_some(state),
    })
}

/// What to pass on from within `span`: its own context when spans are exported, else what
/// arrived (`fallback`), unchanged.
pub fn outgoing(span: &Span, fallback: Option<TraceContext>) -> Option<TraceContext> {
    context_of(span).or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    const INCOMING: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn without_an_exporter_what_arrived_is_passed_on_unchanged() {
        let incoming = TraceContext::from_parts(INCOMING, Some("vendor=1"));
        let span = downstream_request("tools/call", Revision::V2025_11_25);
        assert_eq!(context_of(&span), None);
        assert_eq!(outgoing(&span, incoming.clone()), incoming);
    }

    #[test]
    fn a_trace_crosses_the_request_span_and_the_upstream_span() {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("test"))
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(TRACE_TARGET, tracing::Level::INFO),
            );
        let subscriber = tracing_subscriber::registry().with(layer);
        crate::otlp::set_exporting(true);
        let incoming = TraceContext::from_parts(INCOMING, Some("vendor=1")).unwrap();
        let (to_gateway, to_upstream) = tracing::subscriber::with_default(subscriber, || {
            let request = downstream_request("tools/call", Revision::V2026_07_28);
            adopt(&request, &incoming);
            let to_gateway = context_of(&request).unwrap();
            let _in_request = request.enter();
            let call = upstream_call("peer", "tools/call");
            adopt(&call, &to_gateway);
            let to_upstream = outgoing(&call, Some(to_gateway.clone())).unwrap();
            (to_gateway, to_upstream)
        });
        crate::otlp::set_exporting(false);
        let trace = incoming.parent.trace_id;
        assert_eq!(to_gateway.parent.trace_id, trace);
        assert_eq!(to_upstream.parent.trace_id, trace);
        assert_ne!(to_upstream.parent.parent_id, to_gateway.parent.parent_id);
        assert_ne!(to_gateway.parent.parent_id, incoming.parent.parent_id);
        assert!(to_upstream.parent.sampled());
        assert_eq!(to_upstream.state.as_deref(), Some("vendor=1"));
        let spans = exporter.get_finished_spans().unwrap();
        let find = |name: &str| {
            spans
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("no span {name}: {spans:?}"))
        };
        let server = find("tools/call");
        let client = find("tools/call peer");
        assert_eq!(server.span_context.trace_id().to_bytes(), trace);
        assert_eq!(server.parent_span_id.to_bytes(), incoming.parent.parent_id);
        assert_eq!(
            server.span_context.span_id().to_bytes(),
            to_gateway.parent.parent_id
        );
        assert_eq!(client.parent_span_id, server.span_context.span_id());
        assert_eq!(
            client.span_context.span_id().to_bytes(),
            to_upstream.parent.parent_id
        );
        assert_eq!(client.span_kind, opentelemetry::trace::SpanKind::Client);
        assert_eq!(server.span_kind, opentelemetry::trace::SpanKind::Server);
    }
}
