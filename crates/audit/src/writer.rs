//! The audit writer: rows from every request go into one bounded queue, and one task writes
//! them to the store in batches (one transaction each), so a call pays for an enqueue, not for
//! a database write. What a mode promises is decided here:
//!
//! - `best_effort`: a row is queued and the call goes on; a full queue or a store that keeps
//!   failing drops rows, counted in metrics and `manifold_health`.
//! - `required`: a call's answer waits for its row's batch to commit (batches still share one
//!   transaction among concurrent calls); while writes fail, or the queue is full, new calls are
//!   refused. So no answer that reached a client lacks its row, even if the gateway is killed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use manifold_store::{AuditEntry, MAX_AUDIT_BATCH, MAX_AUDIT_RECORD_BYTES, Store};
use manifold_telemetry::AuditMetrics;
use manifold_telemetry::audit::{
    AuditAck, AuditFacts, AuditMode, AuditSink, AuditStatus, AuditUnavailable,
};
use tokio::sync::{mpsc, oneshot};

/// Rows that may wait for the writer. Beyond it, best effort drops and required refuses.
pub const AUDIT_QUEUE_CAPACITY: usize = 16_384;
/// How long a required-mode answer waits for its row before it is withheld with an error.
pub const REQUIRED_ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts at a failing batch, in best-effort mode, before its rows are dropped.
pub const BEST_EFFORT_ATTEMPTS: u32 = 3;
/// The first wait after a failed write; it doubles up to [`MAX_WRITE_BACKOFF`].
pub const FIRST_WRITE_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_WRITE_BACKOFF: Duration = Duration::from_secs(5);
/// While writes are failing and nothing is queued, how often the store is probed, so required
/// mode serves again soon after the store comes back.
pub const FAILING_PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// In best-effort mode, how long the writer waits for more rows before writing a batch that is
/// not full; a row may reach the store this much later, a call never waits for it. At 24k calls/s
/// 20 ms fills a batch ([`MAX_AUDIT_BATCH`] rows) where 5 ms made batches of about 240, and each
/// transaction's fixed cost is shared by twice the rows: about 2 us less gateway CPU per call
/// (docs/benchmarks.md); 40 ms (1,400-row batches of a larger bound) gained nothing more.
pub const BEST_EFFORT_BATCH_LINGER: Duration = Duration::from_millis(20);
/// Most bytes of records one batch takes (rows stop being added once it is reached), so a
/// batch of rows with large recorded arguments stays one modest transaction.
pub const MAX_AUDIT_BATCH_BYTES: usize = 4 * 1024 * 1024;
/// How long a shutdown waits for the queue to be written.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

struct Pending {
    entry: AuditEntry,
    /// Whom to tell once the row is durable (required mode).
    ack: Option<oneshot::Sender<Result<(), AuditUnavailable>>>,
}

enum Work {
    Row(Pending),
    /// Write everything queued before this, then answer.
    Flush(oneshot::Sender<()>),
}

/// What the writer task and the request path share.
struct Shared {
    mode: AuditMode,
    record_arguments: bool,
    metrics: AuditMetrics,
    /// Rows queued and not yet written or dropped.
    depth: AtomicUsize,
    written: AtomicU64,
    dropped: AtomicU64,
    /// Why the last write failed, while writes are failing.
    failing: Mutex<Option<String>>,
}

impl Shared {
    fn failing(&self) -> Option<String> {
        self.failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_failing(&self, why: Option<String>) {
        *self.failing.lock().unwrap_or_else(PoisonError::into_inner) = why;
    }

    fn settle(&self, rows: usize) {
        let before = self.depth.fetch_sub(rows, Ordering::Relaxed);
        self.metrics.queue_depth(before.saturating_sub(rows));
    }

    fn drop_rows(&self, rows: usize) {
        let rows64 = u64::try_from(rows).unwrap_or(u64::MAX);
        self.dropped.fetch_add(rows64, Ordering::Relaxed);
        self.metrics.dropped(rows64);
        self.settle(rows);
    }
}

/// The audit trail's sink: cheap to share; one writer task behind it.
pub struct AuditWriter {
    shared: Arc<Shared>,
    queue: mpsc::Sender<Work>,
}

impl AuditWriter {
    /// Starts the writer task on the current runtime, writing to `store`.
    pub fn start(
        store: Arc<Store>,
        mode: AuditMode,
        record_arguments: bool,
        metrics: AuditMetrics,
    ) -> AuditWriter {
        let (queue, rows) = mpsc::channel(AUDIT_QUEUE_CAPACITY);
        let shared = Arc::new(Shared {
            mode,
            record_arguments,
            metrics,
            depth: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            failing: Mutex::new(None),
        });
        tokio::spawn(write_rows(Arc::clone(&shared), store, rows));
        AuditWriter { shared, queue }
    }

    /// Writes every row queued so far (waiting at most [`FLUSH_TIMEOUT`]); for a clean
    /// shutdown, before the store closes. Returns whether the queue was written.
    pub async fn flush(&self) -> bool {
        let (done, flushed) = oneshot::channel();
        if self.queue.send(Work::Flush(done)).await.is_err() {
            return false;
        }
        matches!(
            tokio::time::timeout(FLUSH_TIMEOUT, flushed).await,
            Ok(Ok(()))
        )
    }

    fn refuse(reason: impl Into<String>) -> AuditAck {
        let unavailable = AuditUnavailable {
            reason: reason.into(),
        };
        Box::pin(std::future::ready(Err(unavailable)))
    }
}

/// The row the store keeps for `facts`; arguments are left out of a record over the store's
/// size limit (their digest stays). Public for the `audit_append` benchmark, which appends the
/// rows the writer makes.
pub fn audit_entry(mut facts: AuditFacts) -> AuditEntry {
    let mut record_json = facts.record_json();
    if record_json.len() > MAX_AUDIT_RECORD_BYTES {
        facts.arguments = None;
        facts.error = facts.error.map(|e| e.chars().take(256).collect());
        record_json = facts.record_json();
    }
    let outcome = facts.outcome().as_str().to_owned();
    AuditEntry {
        at_ms: facts.at_ms,
        call_id: facts.call_id,
        principal: facts.principal,
        server: facts.server,
        target: facts.target,
        outcome,
        record_json,
    }
}

impl AuditSink for AuditWriter {
    fn admit(&self) -> Result<(), AuditUnavailable> {
        if self.shared.mode != AuditMode::Required {
            return Ok(());
        }
        if let Some(why) = self.shared.failing() {
            return Err(AuditUnavailable { reason: why });
        }
        if self.shared.depth.load(Ordering::Relaxed) >= AUDIT_QUEUE_CAPACITY {
            return Err(AuditUnavailable {
                reason: format!("its queue of {AUDIT_QUEUE_CAPACITY} rows is full"),
            });
        }
        Ok(())
    }

    fn record(&self, facts: AuditFacts) -> AuditAck {
        let required = self.shared.mode == AuditMode::Required;
        let (ack, acked) = if required {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let work = Work::Row(Pending {
            entry: audit_entry(facts),
            ack,
        });
        let depth = self.shared.depth.fetch_add(1, Ordering::Relaxed) + 1;
        self.shared.metrics.queue_depth(depth);
        if let Err(refused) = self.queue.try_send(work) {
            let closed = matches!(refused, mpsc::error::TrySendError::Closed(_));
            self.shared.drop_rows(1);
            if !required {
                return Box::pin(std::future::ready(Ok(())));
            }
            return AuditWriter::refuse(if closed {
                "its writer has stopped".to_owned()
            } else {
                format!("its queue of {AUDIT_QUEUE_CAPACITY} rows is full")
            });
        }
        match acked {
            None => Box::pin(std::future::ready(Ok(()))),
            Some(acked) => Box::pin(async move {
                match tokio::time::timeout(REQUIRED_ACK_TIMEOUT, acked).await {
                    Ok(Ok(written)) => written,
                    Ok(Err(_)) => Err(AuditUnavailable {
                        reason: "its writer stopped before the row was written".to_owned(),
                    }),
                    Err(_) => Err(AuditUnavailable {
                        reason: format!(
                            "the row was not written within {}s",
                            REQUIRED_ACK_TIMEOUT.as_secs()
                        ),
                    }),
                }
            }),
        }
    }

    fn answers_wait(&self) -> bool {
        self.shared.mode == AuditMode::Required
    }

    fn records_arguments(&self) -> bool {
        self.shared.record_arguments
    }

    fn status(&self) -> AuditStatus {
        AuditStatus {
            mode: self.shared.mode.as_str(),
            queue_depth: self.shared.depth.load(Ordering::Relaxed),
            queue_capacity: AUDIT_QUEUE_CAPACITY,
            written: self.shared.written.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            failing: self.shared.failing(),
        }
    }
}

/// The writer task: takes what is queued (up to a batch), writes it in one transaction, tells
/// the waiting calls, and on failure keeps the batch (required) or retries then drops it (best
/// effort). Ends when every sender is gone, after writing what is left.
async fn write_rows(shared: Arc<Shared>, store: Arc<Store>, mut queue: mpsc::Receiver<Work>) {
    let mut batch = Batch::default();
    let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
    let mut attempts = 0u32;
    let mut backoff = FIRST_WRITE_BACKOFF;
    let mut open = true;
    while open || !batch.is_empty() {
        if batch.is_empty() {
            match tokio::time::timeout(FAILING_PROBE_INTERVAL, queue.recv()).await {
                Ok(Some(work)) => take(work, &mut batch, &mut flushes),
                Ok(None) => open = false,
                Err(_) => {
                    if shared.failing().is_some() && store.audit().head().await.is_ok() {
                        tracing::info!("the audit trail can be written again");
                        shared.set_failing(None);
                    }
                }
            }
        }
        drain(&mut queue, &mut batch, &mut flushes, &mut open);
        // Best effort: nobody waits for these rows, so a short wait lets a busy gateway fill
        // a bigger batch, and one transaction (and one fsync) covers many more calls.
        if shared.mode == AuditMode::BestEffort
            && open
            && flushes.is_empty()
            && !batch.is_empty()
            && !batch.is_full()
        {
            tokio::time::sleep(BEST_EFFORT_BATCH_LINGER).await;
            drain(&mut queue, &mut batch, &mut flushes, &mut open);
        }
        if batch.is_empty() {
            flushes.drain(..).for_each(|f| {
                let _ = f.send(());
            });
            continue;
        }
        let started = Instant::now();
        match store.audit().append_batch(&batch.entries).await {
            Ok(_) => {
                let rows = batch.len();
                shared.metrics.batch_written(rows, started.elapsed());
                shared
                    .written
                    .fetch_add(u64::try_from(rows).unwrap_or(u64::MAX), Ordering::Relaxed);
                if shared.failing().is_some() {
                    tracing::info!("the audit trail can be written again");
                    shared.set_failing(None);
                }
                shared.settle(rows);
                for ack in batch.acks.drain(..).flatten() {
                    let _ = ack.send(Ok(()));
                }
                batch.clear();
                if queue.is_empty() {
                    flushes.drain(..).for_each(|f| {
                        let _ = f.send(());
                    });
                }
                attempts = 0;
                backoff = FIRST_WRITE_BACKOFF;
            }
            Err(e) => {
                let why = e.to_string();
                if shared.failing().as_deref() != Some(why.as_str()) {
                    tracing::error!(error = %why, rows = batch.len(), mode = shared.mode.as_str(), "could not write audit rows");
                }
                shared.set_failing(Some(why));
                attempts += 1;
                if shared.mode == AuditMode::BestEffort && attempts >= BEST_EFFORT_ATTEMPTS {
                    shared.drop_rows(batch.len());
                    batch.clear();
                    attempts = 0;
                }
                if !open {
                    // Shutting down and the store refuses: what is left cannot be kept.
                    shared.drop_rows(batch.len());
                    batch.clear();
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_WRITE_BACKOFF);
            }
        }
    }
    flushes.drain(..).for_each(|f| {
        let _ = f.send(());
    });
}

/// Takes what is queued now, up to a full batch.
fn drain(
    queue: &mut mpsc::Receiver<Work>,
    batch: &mut Batch,
    flushes: &mut Vec<oneshot::Sender<()>>,
    open: &mut bool,
) {
    while *open && !batch.is_full() {
        match queue.try_recv() {
            Ok(work) => take(work, batch, flushes),
            Err(mpsc::error::TryRecvError::Empty) => break,
            Err(mpsc::error::TryRecvError::Disconnected) => *open = false,
        }
    }
}

fn take(work: Work, batch: &mut Batch, flushes: &mut Vec<oneshot::Sender<()>>) {
    match work {
        Work::Row(pending) => {
            batch.bytes = batch.bytes.saturating_add(pending.entry.record_json.len());
            batch.entries.push(pending.entry);
            batch.acks.push(pending.ack);
        }
        Work::Flush(done) => flushes.push(done),
    }
}

/// The rows taken for the next write, and whom to tell of each: kept apart so the store gets
/// the entries as they are, without a copy.
#[derive(Default)]
struct Batch {
    entries: Vec<AuditEntry>,
    acks: Vec<Option<oneshot::Sender<Result<(), AuditUnavailable>>>>,
    /// The records' bytes, bounded by [`MAX_AUDIT_BATCH_BYTES`].
    bytes: usize,
}

impl Batch {
    /// Whether a batch takes no more rows: [`MAX_AUDIT_BATCH`] of them, or
    /// [`MAX_AUDIT_BATCH_BYTES`] of records (large recorded arguments).
    fn is_full(&self) -> bool {
        self.entries.len() >= MAX_AUDIT_BATCH || self.bytes >= MAX_AUDIT_BATCH_BYTES
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.acks.clear();
        self.bytes = 0;
    }
}
