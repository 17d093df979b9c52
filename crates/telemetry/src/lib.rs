//! manifold-telemetry: what Manifold tells its operators, and how it stays cheap.
//!
//! Prometheus metrics with bounded labels ([`metrics`], [`labels`]), one log line per tool call
//! with secrets and argument values hidden ([`call_log`], [`redact`]), call ids ([`call_id`]),
//! W3C trace context ([`trace_context`]), spans ([`spans`]) and their OTLP export ([`otlp`]).
//! It knows nothing of HTTP or of the gateway: the gateway and the server call into it with
//! plain values, and hand it snapshots of their state at scrape time.

pub mod audit;
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
pub use metrics::{
    AuditMetrics, EgressDecision, Metrics, SandboxControlSnapshot, SessionCount, Snapshot,
    UpstreamSnapshot, UpstreamState,
};
pub use trace_context::{TraceContext, TraceParent};

/// Everything the gateway and the server record into: the metrics registry, the policy of
/// call log lines and the audit trail's sink. One per process, shared in an `Arc`; `Default`
/// gives a fresh registry, the default policy (argument values hidden) and no audit trail,
/// which is what tests want.
#[derive(Default)]
pub struct Telemetry {
    pub metrics: Metrics,
    pub call_log: CallLogPolicy,
    /// Where audit rows go; `None`: no trail (`[audit] enabled = false`, or no store).
    pub audit: Option<std::sync::Arc<dyn audit::AuditSink>>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("metrics", &self.metrics)
            .field("call_log", &self.call_log)
            .field("audit", &self.audit.as_ref().map(|a| a.status()))
            .finish()
    }
}

impl Telemetry {
    pub fn new(call_log: CallLogPolicy) -> Telemetry {
        Telemetry {
            metrics: Metrics::new(),
            call_log,
            audit: None,
        }
    }

    /// The same, writing audit rows to `sink`.
    pub fn with_audit(mut self, sink: std::sync::Arc<dyn audit::AuditSink>) -> Telemetry {
        self.audit = Some(sink);
        self
    }
}
