//! manifold-telemetry: what Manifold tells its operators, and how it stays cheap.
//!
//! Prometheus metrics with bounded labels ([`metrics`], [`labels`]), one log line per tool call
//! with secrets and argument values hidden ([`call_log`], [`redact`]), call ids ([`call_id`]),
//! W3C trace context ([`trace_context`]), spans ([`spans`]) and their OTLP export ([`otlp`]).
//! It knows nothing of HTTP or of the gateway: the gateway and the server call into it with
//! plain values, and hand it snapshots of their state at scrape time.

pub mod call_id;
pub mod call_log;
pub mod labels;
pub mod metrics;
pub mod otlp;
pub mod redact;
pub mod spans;
pub mod trace_context;

pub use call_log::{ArgumentLogging, CALL_ID_META, CallLogPolicy, CallRecord};
pub use labels::{CallOutcome, RejectReason, RequestOutcome};
pub use metrics::{Metrics, SessionCount, Snapshot, UpstreamSnapshot, UpstreamState};
pub use trace_context::{TraceContext, TraceParent};

/// Everything the gateway and the server record into: the metrics registry and the policy of
/// call log lines. One per process, shared in an `Arc`; `Default` gives a fresh registry and the
/// default policy (argument values hidden), which is what tests want.
#[derive(Debug, Default)]
pub struct Telemetry {
    pub metrics: Metrics,
    pub call_log: CallLogPolicy,
}

impl Telemetry {
    pub fn new(call_log: CallLogPolicy) -> Telemetry {
        Telemetry {
            metrics: Metrics::new(),
            call_log,
        }
    }
}
