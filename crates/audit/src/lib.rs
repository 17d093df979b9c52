//! manifold-audit: the audit trail's writer. The request path hands rows to an [`AuditWriter`]
//! through manifold-telemetry's `AuditSink`; the writer queues them, writes them to the store in
//! batches, keeps each mode's promise, and prunes old rows.

mod retention;
mod writer;

pub use retention::{PRUNE_INTERVAL, cutoff_ms, prune_once, spawn_pruning};
pub use writer::{
    AUDIT_QUEUE_CAPACITY, AuditWriter, BEST_EFFORT_ATTEMPTS, BEST_EFFORT_BATCH_LINGER,
    FAILING_PROBE_INTERVAL, FIRST_WRITE_BACKOFF, FLUSH_TIMEOUT, MAX_AUDIT_BATCH_BYTES,
    MAX_WRITE_BACKOFF, REQUIRED_ACK_TIMEOUT, audit_entry,
};
