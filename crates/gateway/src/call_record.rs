//! What the gateway records about the calls it routes: a call id on every tool result, the
//! tool-call metrics, one log line per call, and a span per upstream call that carries the trace
//! context on to the upstream in `_meta`.
//!
//! Kept out of `router.rs` so that routing reads as routing: the router calls
//! [`Gateway::recorded_call_tool`] for `tools/call` and reaches upstreams through
//! [`Gateway::forward`], which wraps its own `forward_unobserved`. The only `_meta` keys patched
//! are Manifold's (`io.manifold/callId`) and the trace context ones (`traceparent`,
//! `tracestate`); everything else in requests and results crosses untouched.

use std::sync::Arc;
use std::time::Instant;

use manifold_telemetry::call_log::{ANONYMOUS_CALLER, CALL_ID_META, CallRecord};
use manifold_telemetry::labels::{AUTHORED_UPSTREAM, BUILTIN_UPSTREAM};
use manifold_telemetry::metrics::ToolHandles;
use manifold_telemetry::trace_context::{TRACEPARENT, TRACESTATE};
use manifold_telemetry::{CallOutcome, Telemetry, TraceContext, spans};
use manifold_upstream::UpstreamError;
use manifold_wire::id::json_string;
use manifold_wire::patch::{self, Part};
use manifold_wire::{Kind, Message};
use tracing::Instrument;

use crate::builtin;
use crate::context::{RequestContext, SessionId};
use crate::state::Core;

/// Where a tool call goes, as its metrics and log line name it.
struct Target<'c> {
    upstream: &'c str,
    tool: &'c str,
    /// Whether the name resolved (built-in or upstream tool); unknown names get no metrics.
    known: bool,
}

/// A call between its start and its record; dropped unfinished, it records a cancellation.
struct CallInProgress<'a> {
    telemetry: &'a Telemetry,
    handles: Option<Arc<ToolHandles>>,
    call_id: String,
    ctx: &'a RequestContext,
    request: &'a Message,
    upstream: &'a str,
    tool: &'a str,
    started: Instant,
    done: bool,
}

/// How a call ended, beyond its outcome label.
#[derive(Default)]
struct Ending {
    retries: u32,
    error: Option<String>,
    error_code: Option<i64>,
}

impl CallInProgress<'_> {
    fn record(&mut self, outcome: CallOutcome, ending: Ending) {
        self.done = true;
        self.ctx.audit.tool_call(
            self.upstream,
            self.tool,
            outcome,
            ending.retries,
            ending.error.as_deref(),
        );
        let elapsed = self.started.elapsed();
        if let Some(h) = &self.handles {
            h.call_finished(outcome, elapsed);
        }
        let policy = &self.telemetry.call_log;
        if !policy.enabled() {
            return;
        }
        let trace_id = trace_of(self.ctx, self.request).map(|t| t.parent.trace_id_hex());
        let caller = self.ctx.caller.as_deref();
        policy.emit(&CallRecord {
            call_id: &self.call_id,
            caller: caller.map_or(ANONYMOUS_CALLER, |c| c.name.as_str()),
            groups: caller.map_or(&[], |c| c.groups.as_slice()),
            session_tag: self.ctx.session.as_ref().map(SessionId::tag),
            upstream: self.upstream,
            tool: self.tool,
            duration: elapsed,
            outcome,
            retries: ending.retries,
            error: ending.error.as_deref(),
            error_code: ending.error_code,
            arguments: self.request.params_raw(&["arguments"]),
            trace_id: trace_id.as_deref(),
        });
    }
}

impl Drop for CallInProgress<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.record(CallOutcome::Cancelled, Ending::default());
        }
    }
}

/// The trace a request belongs to: the context handed down with it (its own span's while spans
/// are exported), else what its `_meta` carries.
fn trace_of(ctx: &RequestContext, request: &Message) -> Option<TraceContext> {
    let from_ctx = ctx
        .trace
        .as_ref()
        .and_then(|t| TraceContext::from_parts(&t.traceparent, t.tracestate.as_deref()));
    if manifold_telemetry::otlp::exporting() {
        return from_ctx;
    }
    let meta = request.params_raw(&["_meta", TRACEPARENT]);
    let meta = meta.and_then(|raw| serde_json::from_str::<String>(raw).ok());
    meta.and_then(|p| TraceContext::from_parts(&p, None))
        .or(from_ctx)
}

/// How a finished call ended, read from its response.
fn outcome_of(
    response: &Message,
    upstream_failure: Option<String>,
    retries: u32,
) -> (CallOutcome, Ending) {
    let mut ending = Ending {
        retries,
        ..Ending::default()
    };
    match response.kind() {
        Kind::Result => {
            let is = |path: &[&str], value: &str| {
                response.result_at(path).is_some_and(|v| v.trim() == value)
            };
            let outcome = if let Some(why) = upstream_failure {
                ending.error = Some(why);
                CallOutcome::UpstreamError
            } else if is(&["resultType"], "\"input_required\"") {
                CallOutcome::InputRequired
            } else if is(&["isError"], "true") {
                CallOutcome::ToolError
            } else {
                CallOutcome::Ok
            };
            (outcome, ending)
        }
        _ => {
            ending.error_code = response
                .error_raw()
                .and_then(|e| patch::decoded::get(e, &["code"]).ok().flatten())
                .and_then(|c| c.trim().parse().ok());
            (CallOutcome::Error, ending)
        }
    }
}

impl Core {
    /// Where a `tools/call` goes: the built-in tool, the upstream tool it resolves to (through
    /// `manifold_call_tool` too), or an unknown name.
    fn call_target<'c>(
        &self,
        catalog: &'c crate::catalog::build::Catalog,
        name: &'c str,
        called_through: Option<&'c str>,
    ) -> Target<'c> {
        if let Some(target) = called_through
            && let Some((server, original)) = catalog.tool(target)
        {
            return Target {
                upstream: server,
                tool: original,
                known: true,
            };
        }
        let name = called_through
            .filter(|t| !builtin::NAMES.contains(t) && self.is_hosted(catalog, t))
            .unwrap_or(name);
        if !builtin::NAMES.contains(&name) && self.is_hosted(catalog, name) {
            return Target {
                upstream: AUTHORED_UPSTREAM,
                tool: name,
                known: true,
            };
        }
        if builtin::NAMES.contains(&name) {
            return Target {
                upstream: BUILTIN_UPSTREAM,
                tool: name,
                known: true,
            };
        }
        match catalog.tool(name) {
            Some((server, original)) => Target {
                upstream: server,
                tool: original,
                known: true,
            },
            None => Target {
                upstream: "-",
                tool: name,
                known: false,
            },
        }
    }

    /// `tools/call` with its record: a call id in the result's `_meta` (`isError` results too),
    /// metrics by upstream and tool, and one log line, also when the call is cancelled.
    pub(crate) async fn recorded_call_tool(
        &self,
        ctx: &RequestContext,
        request: &Message,
    ) -> Message {
        let telemetry = Arc::clone(&self.settings().telemetry);
        let catalog = self.catalog();
        let name = request.params_str(&["name"]).unwrap_or_default();
        let through = (name == builtin::CALL)
            .then(|| request.params_str(&["arguments", "name"]))
            .flatten();
        let target = self.call_target(&catalog, &name, through.as_deref());
        let handles = target
            .known
            .then(|| telemetry.metrics.tool(target.upstream, target.tool));
        if let Some(h) = &handles {
            h.call_started();
        }
        let mut call = CallInProgress {
            telemetry: &telemetry,
            handles,
            call_id: ctx.audit.call_id(),
            ctx,
            request,
            upstream: target.upstream,
            tool: target.tool,
            started: Instant::now(),
            done: false,
        };
        tracing::Span::current().record("manifold.call_id", call.call_id.as_str());
        let answer = self.call_tool(ctx, request).await;
        let response = answer.message;
        let (outcome, ending) = outcome_of(&response, answer.upstream_failure, answer.retries);
        let response = if response.kind() == Kind::Result {
            response
                .patch(
                    Part::Result,
                    &["_meta", CALL_ID_META],
                    &json_string(&call.call_id),
                )
                .unwrap_or(response)
        } else {
            response
        };
        call.record(outcome, ending);
        response
    }

    /// Sends a request to an upstream inside its own span, with the trace context it should
    /// continue in `params._meta`: this span's while spans are exported; otherwise the context
    /// that came in HTTP headers, unless the request's `_meta` already carries one.
    pub(crate) async fn forward(
        &self,
        ctx: &RequestContext,
        server: &str,
        outgoing: &Message,
    ) -> Result<Message, UpstreamError> {
        let method = outgoing.method().unwrap_or_default();
        let span = spans::upstream_call(server, method);
        let arrived = ctx
            .trace
            .as_ref()
            .and_then(|t| TraceContext::from_parts(&t.traceparent, t.tracestate.as_deref()));
        let passed_on = if manifold_telemetry::otlp::exporting() {
            // Inside a request span the upstream span is its child already; only a call with no
            // enclosing span (the gateway driven directly) is parented on the context it got.
            if tracing::Span::current().is_disabled()
                && let Some(parent) = &arrived
            {
                spans::adopt(&span, parent);
            }
            if !span.is_disabled()
                && method == "tools/call"
                && let Some(tool) = outgoing.params_str(&["name"])
            {
                span.record("gen_ai.tool.name", tool.as_str());
            }
            spans::outgoing(&span, arrived)
        } else {
            arrived.filter(|_| !carries_trace(outgoing))
        };
        let with_trace = passed_on.and_then(|t| with_trace_meta(outgoing, &t));
        let message = with_trace.as_ref().unwrap_or(outgoing);
        let result = self
            .forward_unobserved(ctx, server, message)
            .instrument(span.clone())
            .await;
        if result.is_err() {
            spans::mark_failed(&span);
        }
        result
    }
}

/// Whether a request already carries a valid `traceparent` in its `_meta` (it wins over headers).
fn carries_trace(message: &Message) -> bool {
    message
        .params_raw(&["_meta", TRACEPARENT])
        .and_then(|raw| serde_json::from_str::<String>(raw).ok())
        .is_some_and(|p| manifold_telemetry::TraceParent::parse(&p).is_ok())
}

/// The request with `trace` in `params._meta`; `None` when it already says exactly that (or
/// cannot be patched, and so goes as it is).
fn with_trace_meta(message: &Message, trace: &TraceContext) -> Option<Message> {
    let parent = trace.parent.to_string();
    let current = message
        .params_raw(&["_meta", TRACEPARENT])
        .and_then(|raw| serde_json::from_str::<String>(raw).ok());
    let current_state = message
        .params_raw(&["_meta", TRACESTATE])
        .and_then(|raw| serde_json::from_str::<String>(raw).ok());
    if current.as_deref() == Some(parent.as_str()) && current_state == trace.state {
        return None;
    }
    let mut patched = message
        .patch(Part::Params, &["_meta", TRACEPARENT], &json_string(&parent))
        .ok()?;
    if let Some(state) = &trace.state {
        patched = patched
            .patch(Part::Params, &["_meta", TRACESTATE], &json_string(state))
            .unwrap_or(patched);
    }
    Some(patched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifold_wire::Id;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn trace_context_is_added_to_meta_and_nothing_else_changes() {
        let request = Message::request(
            &Id::Num(7),
            "tools/call",
            Some(
                r#"{"name":"echo","arguments":{"n":1.0,"s":"\u00e9"},"_meta":{"progressToken":3}}"#,
            ),
        );
        let trace = TraceContext::from_parts(PARENT, Some("v=1")).unwrap();
        let patched = with_trace_meta(&request, &trace).unwrap();
        assert_eq!(
            patched.params().unwrap(),
            format!(
                r#"{{"name":"echo","arguments":{{"n":1.0,"s":"\u00e9"}},"_meta":{{"{TRACESTATE}":"v=1","{TRACEPARENT}":"{PARENT}","progressToken":3}}}}"#
            )
        );
        assert!(
            with_trace_meta(&patched, &trace).is_none(),
            "already there: no copy"
        );
        assert!(carries_trace(&patched));
        assert!(!carries_trace(&request));
    }

    #[test]
    fn outcomes_distinguish_tool_upstream_and_protocol_failures() {
        let id = Id::Num(1);
        let ok = Message::result(&id, r#"{"content":[],"isError":false}"#);
        let tool = Message::result(&id, r#"{"content":[],"isError":true}"#);
        let retried = Message::result(
            &id,
            r#"{"content":[],"isError":true,"_meta":{"io.manifold/retries":2}}"#,
        );
        let asked = Message::result(&id, r#"{"resultType":"input_required"}"#);
        let failed = Message::error(
            Some(id.clone()),
            &manifold_wire::ErrorObject::new(manifold_wire::ErrorCode::InvalidParams, "x"),
        );
        assert_eq!(outcome_of(&ok, None, 0).0, CallOutcome::Ok);
        assert_eq!(outcome_of(&tool, None, 0).0, CallOutcome::ToolError);
        let (outcome, ending) = outcome_of(&retried, Some("peer is down".to_owned()), 2);
        assert_eq!(outcome, CallOutcome::UpstreamError);
        assert_eq!(ending.retries, 2);
        assert_eq!(ending.error.as_deref(), Some("peer is down"));
        assert_eq!(outcome_of(&asked, None, 0).0, CallOutcome::InputRequired);
        let (outcome, ending) = outcome_of(&failed, None, 0);
        assert_eq!(
            (outcome, ending.error_code),
            (CallOutcome::Error, Some(-32602))
        );
    }
}
