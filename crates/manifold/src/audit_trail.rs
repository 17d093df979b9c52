//! The audit trail for `manifold serve`: per `[audit]`, a writer on the gateway's store and the
//! background pruning, started before the gateway and flushed after it has drained, so the rows
//! of the last calls are written before the store closes.

use std::sync::Arc;

use manifold_audit::{AuditWriter, spawn_pruning};
use manifold_config::Config;
use manifold_store::Store;
use manifold_telemetry::Telemetry;
use manifold_telemetry::audit::AuditSink;

/// The running trail: its writer and its pruning task.
pub struct RunningTrail {
    writer: Arc<AuditWriter>,
    pruning: tokio::task::JoinHandle<()>,
}

/// Starts the trail when `[audit] enabled` (the default) and returns what the gateway records
/// into: `telemetry` with the writer as its audit sink.
pub fn start(
    config: &Config,
    store: &Arc<Store>,
    telemetry: Telemetry,
) -> (Arc<Telemetry>, Option<RunningTrail>) {
    if !config.audit.enabled {
        return (Arc::new(telemetry), None);
    }
    let writer = Arc::new(AuditWriter::start(
        Arc::clone(store),
        config.audit.mode,
        config.audit.record_arguments,
        telemetry.metrics.audit(),
    ));
    let pruning = spawn_pruning(Arc::clone(store), config.audit.retain);
    let sink: Arc<dyn AuditSink> = writer.clone();
    (
        Arc::new(telemetry.with_audit(sink)),
        Some(RunningTrail { writer, pruning }),
    )
}

impl RunningTrail {
    /// Writes what is queued and stops pruning; before the store closes.
    pub async fn stop(self) {
        self.pruning.abort();
        if !self.writer.flush().await {
            tracing::warn!(
                queued = self.writer.status().queue_depth,
                "not every audit row could be written before shutdown"
            );
        }
    }
}
