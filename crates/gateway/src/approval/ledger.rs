//! Where approvals are recorded: every question Manifold asks a person before a risky call, what
//! it was bound to, who answered and how it ended. The gateway crate knows no database, so the
//! ledger is a trait: the binary backs it with the store's `approvals` table (shared with
//! `manifold approvals`, another process, and with other replicas), and [`MemoryLedger`] serves
//! gateways without a store and the tests.
//!
//! Every change of state is conditional on the state the writer saw, so an answer and a timeout
//! racing each other settle exactly once, and an approval is used at most once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

/// A question asked, waiting for an answer.
pub const PENDING: &str = "pending";
/// Answered yes; not yet used.
pub const APPROVED: &str = "approved";
/// Answered yes, and the call ran (an approval is single use).
pub const USED: &str = "used";
/// Answered no.
pub const REJECTED: &str = "rejected";
/// Nobody answered within the window.
pub const TIMED_OUT: &str = "timed_out";
/// The caller cancelled the call, or its stream closed, while the question was open.
pub const CANCELLED: &str = "cancelled";
/// The gateway holding the call stopped before it was answered.
pub const ABANDONED: &str = "abandoned";

/// Every state a ledger row can be in.
pub const STATES: &[&str] = &[
    PENDING, APPROVED, USED, REJECTED, TIMED_OUT, CANCELLED, ABANDONED,
];

/// How a question was put.
pub const CHANNEL_ELICITATION: &str = "elicitation";
pub const CHANNEL_INPUT_REQUIRED: &str = "input_required";
pub const CHANNEL_OUT_OF_BAND: &str = "out_of_band";

/// Longest arguments text kept beside a row for approvers to read (larger: digest only).
pub const MAX_LEDGER_ARGUMENTS_BYTES: usize = 64 * 1024;

/// One approval as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// `apr_` and 32 hex digits of randomness: not guessable.
    pub id: String,
    pub state: String,
    /// The caller's identity; `None` when authentication is off.
    pub caller: Option<String>,
    pub server: String,
    /// The tool's exposed name.
    pub tool: String,
    /// SHA-256 (hex) of the call's canonical arguments.
    pub arguments_sha256: String,
    /// SHA-256 (hex) of the tool definition in force when asked (its pin when pinned).
    pub definition_sha256: String,
    /// The arguments as shown, when at most [`MAX_LEDGER_ARGUMENTS_BYTES`].
    pub arguments_json: Option<String>,
    /// Who may answer, as configured: `caller`, `group:NAME`, `identity:NAME`.
    pub approvers: Vec<String>,
    /// How the question was put: one of the `CHANNEL_*` names.
    pub channel: String,
    /// The rule that asked, as errors name it.
    pub rule: String,
    /// The process holding the call, `host:pid`, so a restarted gateway can say it stopped.
    pub holder: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub answered_by: Option<String>,
    pub answered_at_ms: Option<i64>,
    /// Why it ended, in words, when it did not end by an answer.
    pub note: Option<String>,
}

/// What a ledger could not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("the approval ledger ({location}) failed: {reason}")]
    Failed { location: String, reason: String },
}

pub type LedgerFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LedgerError>> + Send + 'a>>;

/// Where approvals live.
pub trait ApprovalLedger: Send + Sync {
    /// Records a new question (state [`PENDING`]).
    fn insert<'a>(&'a self, entry: &'a LedgerEntry) -> LedgerFuture<'a, ()>;
    /// One row by id.
    fn get<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, Option<LedgerEntry>>;
    /// Moves `id` from `from` to `to`, stamping `by` and `at_ms` as the answer when given and
    /// `note`; `false` when the row is not in `from` (someone else settled it first).
    fn transition<'a>(&'a self, change: Transition<'a>) -> LedgerFuture<'a, bool>;
    /// Rows newest first, at most `limit`; only [`PENDING`] ones when `pending_only`.
    fn list(&self, pending_only: bool, limit: usize) -> LedgerFuture<'_, Vec<LedgerEntry>>;
    /// Marks every [`PENDING`] row held by `holder` [`ABANDONED`]; returns how many.
    fn abandon_held_by<'a>(&'a self, holder: &'a str, at_ms: i64) -> LedgerFuture<'a, u64>;
    /// Where the ledger lives, for messages.
    fn describe(&self) -> String;
    /// Whether other processes (`manifold approvals`, other replicas) read and answer this
    /// ledger; without that, only an inline question can be answered.
    fn is_shared(&self) -> bool {
        true
    }
}

/// One conditional change of state.
#[derive(Debug, Clone, Copy)]
pub struct Transition<'a> {
    pub id: &'a str,
    pub from: &'a str,
    pub to: &'a str,
    /// Who answered, for an answer (approved, rejected).
    pub by: Option<&'a str>,
    pub at_ms: i64,
    pub note: Option<&'a str>,
}

/// A ledger in this process's memory: for gateways without a store and for tests. Rows are
/// forgotten oldest first past [`MAX_MEMORY_LEDGER_ROWS`].
#[derive(Debug, Default)]
pub struct MemoryLedger {
    rows: Mutex<(Vec<String>, HashMap<String, LedgerEntry>)>,
    /// Tests answer a memory ledger from beside the gateway, as `manifold approvals` would.
    shared: bool,
}

/// Rows a [`MemoryLedger`] keeps.
pub const MAX_MEMORY_LEDGER_ROWS: usize = 10_000;

impl MemoryLedger {
    /// A memory ledger that counts as answerable from outside the call (tests answer it).
    pub fn shared() -> MemoryLedger {
        MemoryLedger {
            shared: true,
            ..MemoryLedger::default()
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut (Vec<String>, HashMap<String, LedgerEntry>)) -> T) -> T {
        f(&mut self.rows.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Applies one transition to a row in memory; shared by [`MemoryLedger`] and its tests.
pub fn apply_transition(row: &mut LedgerEntry, change: &Transition<'_>) -> bool {
    if row.state != change.from {
        return false;
    }
    row.state = change.to.to_owned();
    if let Some(by) = change.by {
        row.answered_by = Some(by.to_owned());
        row.answered_at_ms = Some(change.at_ms);
    }
    if let Some(note) = change.note {
        row.note = Some(note.to_owned());
    }
    true
}

impl ApprovalLedger for MemoryLedger {
    fn insert<'a>(&'a self, entry: &'a LedgerEntry) -> LedgerFuture<'a, ()> {
        self.with(|(order, rows)| {
            if rows.insert(entry.id.clone(), entry.clone()).is_none() {
                order.push(entry.id.clone());
            }
            while order.len() > MAX_MEMORY_LEDGER_ROWS {
                let old = order.remove(0);
                rows.remove(&old);
            }
        });
        Box::pin(async { Ok(()) })
    }

    fn get<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, Option<LedgerEntry>> {
        let row = self.with(|(_, rows)| rows.get(id).cloned());
        Box::pin(async move { Ok(row) })
    }

    fn transition<'a>(&'a self, change: Transition<'a>) -> LedgerFuture<'a, bool> {
        let done = self.with(|(_, rows)| {
            rows.get_mut(change.id)
                .is_some_and(|row| apply_transition(row, &change))
        });
        Box::pin(async move { Ok(done) })
    }

    fn list(&self, pending_only: bool, limit: usize) -> LedgerFuture<'_, Vec<LedgerEntry>> {
        let rows = self.with(|(order, rows)| {
            order
                .iter()
                .rev()
                .filter_map(|id| rows.get(id))
                .filter(|r| !pending_only || r.state == PENDING)
                .take(limit)
                .cloned()
                .collect()
        });
        Box::pin(async move { Ok(rows) })
    }

    fn abandon_held_by<'a>(&'a self, holder: &'a str, at_ms: i64) -> LedgerFuture<'a, u64> {
        let n = self.with(|(_, rows)| {
            let mut n = 0;
            for row in rows.values_mut() {
                if row.holder == holder && row.state == PENDING {
                    row.state = ABANDONED.to_owned();
                    row.answered_at_ms = Some(at_ms);
                    n += 1;
                }
            }
            n
        });
        Box::pin(async move { Ok(n) })
    }

    fn describe(&self) -> String {
        "this gateway's memory".to_owned()
    }

    fn is_shared(&self) -> bool {
        self.shared
    }
}
