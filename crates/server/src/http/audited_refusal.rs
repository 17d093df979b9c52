//! Requests refused at the HTTP edge, before the gateway saw them (no valid credentials, a
//! browser Origin or Host not allowed), go on the audit trail too: failed authentication is what
//! an auditor looks for first. A flood of such requests must not crowd real calls out of the
//! trail's queue (in required mode a full queue refuses calls), so at most
//! [`MAX_AUDITED_REFUSALS_PER_SECOND`] get a row; the rest are still counted in
//! `manifold_rejected_requests_total`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use manifold_gateway::TraceHeaders;
use manifold_telemetry::audit::{AuditFacts, AuditOutcome};
use manifold_telemetry::{RejectReason, Telemetry, TraceParent};

use super::endpoint_path::{MCP_PATHS, endpoint_of};

/// What the audit row of an edge refusal says about the request: kept without allocating, as
/// every MCP request passes here and few are refused.
pub(crate) struct EdgeRequest {
    pub method: axum::http::Method,
    /// One of [`MCP_PATHS`].
    pub path: &'static str,
    pub bytes_in: u64,
}

impl EdgeRequest {
    pub(crate) fn of(request: &axum::extract::Request) -> EdgeRequest {
        // A tool set's endpoint counts as its endpoint: set names stay out of metric labels.
        let path = endpoint_of(request.uri().path());
        EdgeRequest {
            method: request.method().clone(),
            path: MCP_PATHS
                .iter()
                .find(|p| **p == path)
                .copied()
                .unwrap_or("-"),
            bytes_in: request
                .headers()
                .get(axum::http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        }
    }

    /// `POST /mcp`, as the row names it.
    pub fn method_and_path(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// Edge refusals recorded per second, per process; more are counted but get no row.
pub const MAX_AUDITED_REFUSALS_PER_SECOND: u64 = 100;

/// (second, rows recorded in it), packed: the high 44 bits the second, the low 20 the count.
static WINDOW: AtomicU64 = AtomicU64::new(0);
const COUNT_BITS: u32 = 20;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Whether one more row fits in this second's budget.
fn within_budget(second: u64) -> bool {
    let mut current = WINDOW.load(Ordering::Relaxed);
    loop {
        let (window, count) = (current >> COUNT_BITS, current & ((1 << COUNT_BITS) - 1));
        let next = if window == second {
            if count >= MAX_AUDITED_REFUSALS_PER_SECOND {
                return false;
            }
            current + 1
        } else {
            (second << COUNT_BITS) | 1
        };
        match WINDOW.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(seen) => current = seen,
        }
    }
}

/// The audit outcome of an edge refusal that gets a row; `None` for malformed requests (parse
/// errors, bad headers, bodies too large), which are protocol noise, not refusals of a caller.
fn outcome_of(reason: RejectReason) -> Option<AuditOutcome> {
    match reason {
        RejectReason::Unauthenticated => Some(AuditOutcome::Unauthenticated),
        RejectReason::Forbidden | RejectReason::Origin | RejectReason::Host => {
            Some(AuditOutcome::RefusedByPolicy)
        }
        _ => None,
    }
}

/// Records the refusal's row, within the budget, when the trail is on.
pub(crate) fn record(
    telemetry: &Telemetry,
    reason: RejectReason,
    request: &EdgeRequest,
    trace: Option<&TraceHeaders>,
) {
    let (Some(sink), Some(outcome)) = (&telemetry.audit, outcome_of(reason)) else {
        return;
    };
    let at_ms = now_ms();
    if !within_budget(u64::try_from(at_ms / 1000).unwrap_or(0)) {
        return;
    }
    let what = request.method_and_path();
    let facts = AuditFacts {
        at_ms,
        call_id: manifold_telemetry::call_id::next_call_id(),
        principal: "-".to_owned(),
        server: "-".to_owned(),
        method: what.clone(),
        target: what,
        outcome: Some(outcome),
        error: Some(reason.as_str().to_owned()),
        bytes_in: request.bytes_in,
        trace_id: trace
            .and_then(|t| TraceParent::parse(&t.traceparent).ok())
            .map(|p| p.trace_id_hex()),
        ..AuditFacts::default()
    };
    // Nobody waits on a refusal's row: the refusal has been answered already.
    drop(sink.record(facts));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_allows_its_rows_per_second_then_refuses_until_the_next() {
        let second = 1_000_000_007;
        let allowed = (0..MAX_AUDITED_REFUSALS_PER_SECOND * 2)
            .filter(|_| within_budget(second))
            .count();
        assert_eq!(allowed as u64, MAX_AUDITED_REFUSALS_PER_SECOND);
        assert!(within_budget(second + 1), "a new second has a new budget");
    }

    #[test]
    fn only_refusals_of_a_caller_get_a_row() {
        assert_eq!(
            outcome_of(RejectReason::Unauthenticated),
            Some(AuditOutcome::Unauthenticated)
        );
        assert_eq!(
            outcome_of(RejectReason::Origin),
            Some(AuditOutcome::RefusedByPolicy)
        );
        assert_eq!(outcome_of(RejectReason::ParseError), None);
        assert_eq!(outcome_of(RejectReason::BodyTooLarge), None);
    }
}
