//! The audit trail: one row per tool call and per refused request, appended in order and chained
//! by SHA-256, so an edit, insertion or deletion inside it is found by [`AuditTrail::verify`]. Old
//! rows are pruned only from the front, leaving an anchor the rest chains on. The store computes
//! the chain inside the appending transaction, under a lock every replica takes, so gateways
//! sharing one PostgreSQL never fork it.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::api_keys::{RowLike, with_pool};
use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Most rows one [`AuditTrail::page`] or [`AuditTrail::search`] returns.
pub const MAX_AUDIT_PAGE: u32 = 1000;
/// Most entries one [`AuditTrail::append_batch`] takes: one transaction stays short enough not to
/// hold the chain lock (and SQLite's one writer) long.
pub const MAX_AUDIT_BATCH: usize = 512;
/// Largest `record_json` one entry may carry, in bytes.
pub const MAX_AUDIT_RECORD_BYTES: usize = 64 * 1024;
/// The `prev_sha256` of the very first row a trail ever holds.
pub const AUDIT_GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The PostgreSQL advisory lock (transaction-scoped) that serialises appends and prunes across
/// replicas: the bytes of "MFAUDIT\0".
pub const AUDIT_CHAIN_LOCK: i64 = 0x4d46_4155_4449_5400;
/// The fields of `record_json` that the row's columns repeat, and must equal.
pub const AUDIT_RECORD_COLUMNS: [&str; 6] = [
    "at_ms",
    "call_id",
    "principal",
    "server",
    "target",
    "outcome",
];

/// One audit row as the gateway hands it in (the store assigns `seq` and the chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub at_ms: i64,
    pub call_id: String,
    pub principal: String,
    pub server: String,
    /// The tool's name, or `"METHOD URI"` / `"METHOD PROMPT"` for other requests.
    pub target: String,
    pub outcome: String,
    /// The canonical JSON object of the row: every field, including the six above under their
    /// own names ([`AUDIT_RECORD_COLUMNS`]). The hash covers exactly this text.
    pub record_json: String,
}

/// One stored audit row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub seq: i64,
    pub entry: AuditEntry,
    pub prev_sha256: String,
    pub row_sha256: String,
}

/// What [`AuditTrail::search`] matches: every field given must match exactly;
/// `since_ms <= at_ms < until_ms`; `seq < before_seq` (the cursor to the next page: the
/// smallest seq of the page before).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub principal: Option<String>,
    pub server: Option<String>,
    pub target: Option<String>,
    pub outcome: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub before_seq: Option<i64>,
}

/// One prune: rows up to `through_seq` were removed; `anchor_sha256` is the `row_sha256` of the
/// last of them, which the first remaining (or next appended) row chains on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneAnchor {
    pub pruned_at_ms: i64,
    pub through_seq: i64,
    pub rows: i64,
    pub anchor_sha256: String,
}

/// What is wrong with the first broken row [`AuditTrail::verify`] finds. Gaps in `seq` are not
/// breaks (a rolled-back append skips numbers); the links are what count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainBreak {
    /// `prev_sha256` is not the `row_sha256` of the row before it (or the genesis or the prune
    /// anchor, for the first row): a row before it was deleted, inserted, or had its hash rewritten.
    PrevLink { expected: String, found: String },
    /// `row_sha256` is not SHA-256 of `prev_sha256 + "\n" + record_json`: the row was edited.
    RowHash { computed: String, stored: String },
    /// A column disagrees with the same field in `record_json`: one of them was edited.
    Column { column: &'static str },
    /// `record_json` is not a JSON object.
    Record { reason: String },
    /// The row's `seq` lies in the pruned prefix: it was inserted after the prune.
    BeforeAnchor { through_seq: i64 },
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainBreak::PrevLink { expected, found } => write!(
                f,
                "its prev_sha256 {found} is not {expected}, the row_sha256 of the row before it: a row before it was deleted, inserted or rewritten"
            ),
            ChainBreak::RowHash { computed, stored } => write!(
                f,
                "its row_sha256 {stored} is not {computed}, the SHA-256 of its prev_sha256 and record_json: the row was edited"
            ),
            ChainBreak::Column { column } => write!(
                f,
                "its {column} column disagrees with the {column} in its record_json: one of them was edited"
            ),
            ChainBreak::Record { reason } => write!(f, "its record_json {reason}"),
            ChainBreak::BeforeAnchor { through_seq } => write!(
                f,
                "it lies in the pruned part of the trail (through seq {through_seq}): it was inserted after the prune"
            ),
        }
    }
}

/// What [`AuditTrail::verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    pub rows_checked: u64,
    /// The `seq` of the first and last rows checked.
    pub first_row: Option<i64>,
    pub last_row: Option<i64>,
    /// The latest prune, whose anchor the first remaining row chains on.
    pub pruned: Option<PruneAnchor>,
    /// The first broken row's `seq` and what is wrong with it; `None` for an intact trail.
    pub first_broken: Option<(i64, ChainBreak)>,
}

impl VerifyReport {
    /// No row is broken.
    pub fn is_intact(&self) -> bool {
        self.first_broken.is_none()
    }
}

/// The lowercase hex SHA-256 of `prev_sha256 + "\n" + record_json`: a row's `row_sha256`.
pub fn audit_row_sha256(prev_sha256: &str, record_json: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_sha256.as_bytes());
    hasher.update(b"\n");
    hasher.update(record_json.as_bytes());
    format!("{:x}", hasher.finalize())
}

/// Why a `record_json` does not fit its entry.
enum RecordFault {
    NotAnObject(String),
    Disagrees(&'static str),
}

impl RecordFault {
    fn into_break(self) -> ChainBreak {
        match self {
            RecordFault::NotAnObject(reason) => ChainBreak::Record { reason },
            RecordFault::Disagrees(column) => ChainBreak::Column { column },
        }
    }
    fn reason(&self) -> String {
        match self {
            RecordFault::NotAnObject(reason) => format!("record_json {reason}"),
            RecordFault::Disagrees(column) => format!(
                "record_json has no {column}, or one different from the entry's {column} column"
            ),
        }
    }
}

fn record_object(record_json: &str) -> Result<Map<String, Value>, RecordFault> {
    serde_json::from_str(record_json)
        .map_err(|e| RecordFault::NotAnObject(format!("is not a JSON object ({e})")))
}

/// The six column fields of a record, borrowed where no escape needs undoing. Every append
/// checks its rows through this, so it skips the other fields instead of building a map of
/// values (the map costed more than the rest of a row's work on the request path).
#[derive(serde::Deserialize)]
struct RecordColumns<'a> {
    at_ms: Option<i64>,
    #[serde(borrow)]
    call_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    principal: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    server: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    target: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    outcome: Option<std::borrow::Cow<'a, str>>,
}

/// Whether `entry`'s columns equal the same fields of its `record_json`.
fn record_fault(entry: &AuditEntry) -> Option<RecordFault> {
    // The typed read decides whenever it can; a record it refuses (a column field of another
    // type, a duplicate key, not an object) is judged by the map, which names the fault.
    if let Ok(columns) = serde_json::from_str::<RecordColumns<'_>>(&entry.record_json) {
        if columns.at_ms != Some(entry.at_ms) {
            return Some(RecordFault::Disagrees("at_ms"));
        }
        let texts = [
            ("call_id", columns.call_id, &entry.call_id),
            ("principal", columns.principal, &entry.principal),
            ("server", columns.server, &entry.server),
            ("target", columns.target, &entry.target),
            ("outcome", columns.outcome, &entry.outcome),
        ];
        return texts
            .into_iter()
            .find(|(_, found, value)| found.as_deref() != Some(value.as_str()))
            .map(|(column, _, _)| RecordFault::Disagrees(column));
    }
    slow_record_fault(entry)
}

/// [`record_fault`] through a map of every field.
fn slow_record_fault(entry: &AuditEntry) -> Option<RecordFault> {
    let record = match record_object(&entry.record_json) {
        Ok(record) => record,
        Err(fault) => return Some(fault),
    };
    if record.get("at_ms").and_then(Value::as_i64) != Some(entry.at_ms) {
        return Some(RecordFault::Disagrees("at_ms"));
    }
    let texts = [
        ("call_id", &entry.call_id),
        ("principal", &entry.principal),
        ("server", &entry.server),
        ("target", &entry.target),
        ("outcome", &entry.outcome),
    ];
    texts
        .into_iter()
        .find(|(column, value)| record.get(*column).and_then(Value::as_str) != Some(value.as_str()))
        .map(|(column, _)| RecordFault::Disagrees(column))
}

impl AuditEntry {
    /// An entry whose columns are read from `record_json` (so they agree with it by
    /// construction); refused when it is too large, not an object, or lacks one of
    /// [`AUDIT_RECORD_COLUMNS`].
    pub fn from_record_json(record_json: String) -> Result<AuditEntry, StoreError> {
        let named = |record: &Map<String, Value>| {
            record
                .get("call_id")
                .and_then(Value::as_str)
                .unwrap_or("(none)")
                .to_owned()
        };
        if record_json.len() > MAX_AUDIT_RECORD_BYTES {
            let call_id = record_object(&record_json)
                .map(|r| named(&r))
                .unwrap_or_else(|_| "(unreadable)".to_owned());
            return Err(StoreError::AuditRecordTooLarge {
                call_id,
                bytes: record_json.len(),
                max: MAX_AUDIT_RECORD_BYTES,
            });
        }
        let record =
            record_object(&record_json).map_err(|fault| StoreError::AuditRecordInvalid {
                call_id: "(unreadable)".to_owned(),
                reason: fault.reason(),
            })?;
        let text = |column: &str| {
            record
                .get(column)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| StoreError::AuditRecordInvalid {
                    call_id: named(&record),
                    reason: format!("record_json has no string {column}"),
                })
        };
        let at_ms = record.get("at_ms").and_then(Value::as_i64).ok_or_else(|| {
            StoreError::AuditRecordInvalid {
                call_id: named(&record),
                reason: "record_json has no integer at_ms".to_owned(),
            }
        })?;
        Ok(AuditEntry {
            at_ms,
            call_id: text("call_id")?,
            principal: text("principal")?,
            server: text("server")?,
            target: text("target")?,
            outcome: text("outcome")?,
            record_json,
        })
    }
}

/// Refuses what an append must not write: a record over [`MAX_AUDIT_RECORD_BYTES`] or one whose
/// columns disagree with it (verify would call that row broken).
fn check_entry(entry: &AuditEntry) -> Result<(), StoreError> {
    if entry.record_json.len() > MAX_AUDIT_RECORD_BYTES {
        return Err(StoreError::AuditRecordTooLarge {
            call_id: entry.call_id.clone(),
            bytes: entry.record_json.len(),
            max: MAX_AUDIT_RECORD_BYTES,
        });
    }
    match record_fault(entry) {
        None => Ok(()),
        Some(fault) => Err(StoreError::AuditRecordInvalid {
            call_id: entry.call_id.clone(),
            reason: fault.reason(),
        }),
    }
}

fn check_limit(limit: u32) -> Result<i64, StoreError> {
    if limit > MAX_AUDIT_PAGE {
        return Err(StoreError::OverLimit {
            what: "audit rows asked for at once (MAX_AUDIT_PAGE)",
            count: u64::from(limit),
            max: u64::from(MAX_AUDIT_PAGE),
            fix: "ask for fewer and page on from the last seq returned",
        });
    }
    Ok(i64::from(limit))
}

/// The `audit_trail` repository.
#[derive(Debug, Clone, Copy)]
pub struct AuditTrail<'s> {
    store: &'s Store,
}

impl Store {
    /// The audit trail repository.
    pub fn audit(&self) -> AuditTrail<'_> {
        AuditTrail { store: self }
    }
}

macro_rules! row_columns {
    () => {
        "seq, at_ms, call_id, principal, server, target, outcome, record_json, prev_sha256, row_sha256"
    };
}

/// What the next appended row chains on: the newest row's hash, else the latest prune's anchor
/// (`NULL` for a trail never written: the genesis).
const CHAIN_TIP_SQL: &str = "SELECT COALESCE(\
    (SELECT row_sha256 FROM audit_trail ORDER BY seq DESC LIMIT 1), \
    (SELECT anchor_sha256 FROM audit_prunes ORDER BY through_seq DESC LIMIT 1))";
/// The newest seq, read back after a batch's `INSERT` on PostgreSQL, instead of `RETURNING seq`:
/// sqlx hands each returned row over on its own, which cost more than writing the row.
const LAST_SEQ_SQL: &str = "SELECT COALESCE(MAX(seq), 0) FROM audit_trail";

/// The seq of the last row an `INSERT` wrote, where the backend tells it with the statement's
/// result: SQLite's `last_insert_rowid` (`seq` is the rowid), so a batch spends no statement, and
/// no hand-off to sqlx's SQLite thread, on asking. PostgreSQL asks ([`LAST_SEQ_SQL`]).
trait LastInserted {
    fn last_seq(&self) -> Option<i64>;
}

impl LastInserted for sqlx::sqlite::SqliteQueryResult {
    fn last_seq(&self) -> Option<i64> {
        Some(self.last_insert_rowid())
    }
}

impl LastInserted for sqlx::postgres::PgQueryResult {
    fn last_seq(&self) -> Option<i64> {
        None
    }
}

/// The seqs of the `inserted` rows of one batch's `INSERT`s, the newest being `last`. Under the
/// chain lock nothing else inserts, and the rows take consecutive seqs in `VALUES` order
/// (SQLite's AUTOINCREMENT gives each row one more than the largest yet; PostgreSQL's identity
/// sequence is drawn once per row, by nobody else).
fn consecutive_seqs(last: i64, inserted: u64) -> Vec<i64> {
    let inserted = i64::try_from(inserted).unwrap_or(i64::MAX);
    (last.saturating_sub(inserted).saturating_add(1)..=last).collect()
}

/// Most rows one `INSERT` of a batch carries (9 parameters each: far below SQLite's 32,766 and
/// PostgreSQL's 65,535).
const MAX_INSERT_CHUNK_ROWS: usize = 256;
/// Up to this many rows, an `INSERT` has a text of its own size, so a small batch (`required`
/// mode commits batches of about 15-25 rows at 64 clients) is one statement.
const MAX_EXACT_INSERT_ROWS: usize = 32;
/// The `INSERT` texts there are: one per size up to [`MAX_EXACT_INSERT_ROWS`], then 64, 128, 256.
const INSERT_SIZES: usize = MAX_EXACT_INSERT_ROWS
    + (MAX_INSERT_CHUNK_ROWS.ilog2() - MAX_EXACT_INSERT_ROWS.ilog2()) as usize;
// The audit INSERTs share the SQLite writer's statement cache with every other repository's
// statements; they take at most half of it, or a full cache would prepare them again and again.
const _: () = assert!(INSERT_SIZES * 2 <= crate::store::STATEMENT_CACHE_CAPACITY);

/// The row counts of the `INSERT`s a batch of `rows` goes in: up to [`MAX_EXACT_INSERT_ROWS`]
/// rows, one `INSERT` of them all; above, the largest power of two that fits (at most
/// [`MAX_INSERT_CHUNK_ROWS`]) and on, so a batch of 240 is 128 + 64 + 32 + 16. A statement's text
/// depends only on its row count, so at most [`INSERT_SIZES`] texts exist and the driver's
/// per-connection cache of prepared statements keeps them all: a batch re-binds statements
/// prepared before, in a few statements (each one a hand-off to sqlx's SQLite worker thread or
/// a PostgreSQL round trip) rather than one per row.
fn insert_chunk_sizes(rows: usize) -> impl Iterator<Item = usize> {
    let mut left = rows;
    std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let size = if left <= MAX_EXACT_INSERT_ROWS {
            left
        } else {
            (1usize << left.ilog2()).min(MAX_INSERT_CHUNK_ROWS)
        };
        left -= size;
        Some(size)
    })
}

/// Where the text of an `INSERT` of `rows` rows (a size [`insert_chunk_sizes`] gives) is kept.
fn insert_size_slot(rows: usize) -> usize {
    if rows <= MAX_EXACT_INSERT_ROWS {
        rows.saturating_sub(1)
    } else {
        MAX_EXACT_INSERT_ROWS - 1 + (rows.ilog2() - MAX_EXACT_INSERT_ROWS.ilog2()) as usize
    }
}

/// The size whose text is kept at `slot`: the inverse of [`insert_size_slot`].
fn insert_slot_size(slot: usize) -> usize {
    if slot < MAX_EXACT_INSERT_ROWS {
        slot + 1
    } else {
        MAX_EXACT_INSERT_ROWS << (slot + 1 - MAX_EXACT_INSERT_ROWS)
    }
}

/// The head of each `INSERT` of a batch; [`insert_sql`] adds a `VALUES` tuple per row.
const INSERT_HEAD_SQL: &str = "INSERT INTO audit_trail (at_ms, call_id, principal, server, target, outcome, record_json, prev_sha256, row_sha256) VALUES ";
/// Values each row of an `INSERT` binds.
const INSERT_ROW_VALUES: usize = 9;

/// How a backend numbers the values it binds: SQLite takes `?` in order, PostgreSQL `$1, $2, ...`.
#[derive(Clone, Copy)]
enum Placeholders {
    Sqlite,
    Postgres,
}

impl Placeholders {
    fn of(store: &Store) -> Placeholders {
        match store.pools {
            Pools::Sqlite { .. } => Placeholders::Sqlite,
            Pools::Postgres(_) => Placeholders::Postgres,
        }
    }
}

/// The text of an `INSERT` of `rows` rows, a size [`insert_chunk_sizes`] gives. Each text is
/// written once per process and kept, rather than rebuilt for every statement (256 rows are 2,304
/// placeholders); with the chain's hashes moved into the statement instead of copied, an appended
/// row takes about 2,000 instructions fewer (`cargo bench -p manifold-audit --bench audit_append`
/// under callgrind, docs/benchmarks.md).
fn insert_sql(rows: usize, placeholders: Placeholders) -> &'static str {
    static SQLITE: std::sync::OnceLock<[String; INSERT_SIZES]> = std::sync::OnceLock::new();
    static POSTGRES: std::sync::OnceLock<[String; INSERT_SIZES]> = std::sync::OnceLock::new();
    let cell = match placeholders {
        Placeholders::Sqlite => &SQLITE,
        Placeholders::Postgres => &POSTGRES,
    };
    let texts = cell.get_or_init(|| {
        std::array::from_fn(|slot| {
            let mut sql = String::from(INSERT_HEAD_SQL);
            for row in 0..insert_slot_size(slot) {
                sql.push_str(if row == 0 { "(" } else { ", (" });
                for value in 0..INSERT_ROW_VALUES {
                    if value > 0 {
                        sql.push_str(", ");
                    }
                    match placeholders {
                        Placeholders::Sqlite => sql.push('?'),
                        Placeholders::Postgres => {
                            sql.push_str(&format!("${}", row * INSERT_ROW_VALUES + value + 1));
                        }
                    }
                }
                sql.push(')');
            }
            sql
        })
    });
    texts
        .get(insert_size_slot(rows))
        .map_or(INSERT_HEAD_SQL, String::as_str)
}
const ANCHOR_SQL: &str = "SELECT through_seq, pruned_at_ms, pruned_rows, anchor_sha256 FROM audit_prunes ORDER BY through_seq DESC LIMIT 1";
/// The last row a prune removes: the one before the first row at or after the cutoff (or the
/// newest row, when none is that new), so the pruned part is always a prefix of the chain.
const LAST_PRUNED_SQL: &str = "SELECT seq, row_sha256 FROM audit_trail WHERE seq < COALESCE(\
    (SELECT MIN(seq) FROM audit_trail WHERE at_ms >= $1), \
    (SELECT MAX(seq) + 1 FROM audit_trail)) ORDER BY seq DESC LIMIT 1";
/// Whether the step-2 table still holds rows to adopt.
const HAS_AUDIT_EVENTS_SQL: &str =
    "SELECT COUNT(*) FROM (SELECT 1 FROM audit_events LIMIT 1) AS any_row";
const AUDIT_EVENTS_SQL: &str = "SELECT seq, at_ms, call_id, principal, server, tool, outcome, args_sha256, detail_json, prev_sha256, row_sha256 \
    FROM audit_events ORDER BY seq LIMIT $1";

/// Runs `$body` (a block that may use `?` on `sqlx::Error`) in a transaction holding the chain:
/// `BEGIN IMMEDIATE` on SQLite's one writer (so another process's writer cannot slip in between
/// reading the tip and appending), `pg_advisory_xact_lock(AUDIT_CHAIN_LOCK)` on PostgreSQL.
/// Commits when the block finishes; an early `?` rolls back.
macro_rules! in_chain_transaction {
    ($store:expr, |$tx:ident| $body:block) => {
        match &$store.pools {
            Pools::Sqlite { writer, .. } => {
                async {
                    let mut $tx = writer.begin_with("BEGIN IMMEDIATE").await?;
                    let value = $body;
                    $tx.commit().await?;
                    Ok::<_, sqlx::Error>(value)
                }
                .await
            }
            Pools::Postgres(pool) => {
                async {
                    let mut $tx = pool.begin().await?;
                    sqlx::query("SELECT pg_advisory_xact_lock($1)")
                        .bind(AUDIT_CHAIN_LOCK)
                        .execute(&mut *$tx)
                        .await?;
                    let value = $body;
                    $tx.commit().await?;
                    Ok::<_, sqlx::Error>(value)
                }
                .await
            }
        }
    };
}

/// Appends `$entries` (an iterator of `&AuditEntry`) to the chain inside `$tx`; the seqs.
/// The chain is computed here first, then the batch goes in multi-row `INSERT`s
/// ([`insert_chunk_sizes`]): a few statements per batch, not one per row (through sqlx's
/// SQLite worker thread or a PostgreSQL round trip, a statement per row cost more than the rows
/// themselves), each one prepared once per connection. Under the chain lock nothing else
/// inserts, so the batch's seqs are the newest ones, ascending in entry order.
macro_rules! append_chained {
    ($tx:ident, $entries:expr, $placeholders:expr) => {{
        let tip: Option<String> = sqlx::query_scalar(CHAIN_TIP_SQL)
            .fetch_one(&mut *$tx)
            .await?;
        let mut prev = tip.unwrap_or_else(|| AUDIT_GENESIS.to_owned());
        let mut chained = std::collections::VecDeque::new();
        for e in $entries {
            let row_sha256 = audit_row_sha256(&prev, &e.record_json);
            let prev_sha256 = std::mem::replace(&mut prev, row_sha256.clone());
            chained.push_back((e, prev_sha256, row_sha256));
        }
        let mut inserted = 0;
        let mut last_seq = None;
        for size in insert_chunk_sizes(chained.len()) {
            let mut insert = sqlx::query(insert_sql(size, $placeholders));
            // The chain's hashes are this append's own, so they are moved into the statement;
            // the entries are the caller's, and are copied.
            for (e, prev_sha256, row_sha256) in chained.drain(..size.min(chained.len())) {
                insert = insert
                    .bind(e.at_ms)
                    .bind(e.call_id.as_str())
                    .bind(e.principal.as_str())
                    .bind(e.server.as_str())
                    .bind(e.target.as_str())
                    .bind(e.outcome.as_str())
                    .bind(e.record_json.as_str())
                    .bind(prev_sha256)
                    .bind(row_sha256);
            }
            let done = insert.execute(&mut *$tx).await?;
            inserted += done.rows_affected();
            last_seq = done.last_seq();
        }
        let last: i64 = match last_seq {
            Some(last) => last,
            None => {
                sqlx::query_scalar(LAST_SEQ_SQL)
                    .fetch_one(&mut *$tx)
                    .await?
            }
        };
        consecutive_seqs(last, inserted)
    }};
}

fn audit_row(row: &impl RowLike) -> Result<AuditRow, sqlx::Error> {
    Ok(AuditRow {
        seq: row.int("seq")?,
        entry: AuditEntry {
            at_ms: row.int("at_ms")?,
            call_id: row.text("call_id")?,
            principal: row.text("principal")?,
            server: row.text("server")?,
            target: row.text("target")?,
            outcome: row.text("outcome")?,
            record_json: row.text("record_json")?,
        },
        prev_sha256: row.text("prev_sha256")?,
        row_sha256: row.text("row_sha256")?,
    })
}

fn prune_anchor(row: &impl RowLike) -> Result<PruneAnchor, sqlx::Error> {
    Ok(PruneAnchor {
        pruned_at_ms: row.int("pruned_at_ms")?,
        through_seq: row.int("through_seq")?,
        rows: row.int("pruned_rows")?,
        anchor_sha256: row.text("anchor_sha256")?,
    })
}

/// A row of the step-2 `audit_events` table as an entry of the chain: its columns carry over
/// (`tool` becomes `target`), and every old column is kept in `record_json`.
fn adopted_entry(row: &impl RowLike) -> Result<(i64, AuditEntry), sqlx::Error> {
    let seq = row.int("seq")?;
    let (at_ms, call_id, principal) = (
        row.int("at_ms")?,
        row.text("call_id")?,
        row.text("principal")?,
    );
    let (server, target, outcome) = (row.text("server")?, row.text("tool")?, row.text("outcome")?);
    let detail_json = row.text("detail_json")?;
    let detail = serde_json::from_str::<Value>(&detail_json).unwrap_or(Value::String(detail_json));
    let record = serde_json::json!({
        "at_ms": at_ms,
        "call_id": call_id,
        "principal": principal,
        "server": server,
        "target": target,
        "outcome": outcome,
        "args_sha256": row.text("args_sha256")?,
        "detail": detail,
        "adopted_from": {
            "table": "audit_events",
            "seq": seq,
            "prev_sha256": row.text("prev_sha256")?,
            "row_sha256": row.text("row_sha256")?,
        },
    });
    let entry = AuditEntry {
        at_ms,
        call_id,
        principal,
        server,
        target,
        outcome,
        record_json: record.to_string(),
    };
    Ok((seq, entry))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A bound value of a search, in placeholder order.
enum Param<'a> {
    Text(&'a str),
    Int(i64),
}

impl AuditTrail<'_> {
    /// Appends all `entries` in one transaction, in order, chaining each on the one before
    /// (the first on the newest row, the latest prune's anchor, or [`AUDIT_GENESIS`]). Returns
    /// their seqs once durable. At most [`MAX_AUDIT_BATCH`] entries; an entry over
    /// [`MAX_AUDIT_RECORD_BYTES`] or whose columns disagree with its `record_json` refuses the
    /// whole batch, naming its call id.
    pub async fn append_batch(&self, entries: &[AuditEntry]) -> Result<Vec<i64>, StoreError> {
        if entries.len() > MAX_AUDIT_BATCH {
            return Err(StoreError::OverLimit {
                what: "audit entries in one append (MAX_AUDIT_BATCH)",
                count: u64::try_from(entries.len()).unwrap_or(u64::MAX),
                max: u64::try_from(MAX_AUDIT_BATCH).unwrap_or(u64::MAX),
                fix: "split the batch and append each part in order",
            });
        }
        entries.iter().try_for_each(check_entry)?;
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = Placeholders::of(self.store);
        let seqs = in_chain_transaction!(self.store, |tx| {
            append_chained!(tx, entries, placeholders)
        });
        seqs.map_err(|e| self.store.failed(&e))
    }

    /// Up to `limit` (at most [`MAX_AUDIT_PAGE`]) rows after `after_seq`, oldest first: page on
    /// by passing the last seq returned.
    pub async fn page(&self, after_seq: i64, limit: u32) -> Result<Vec<AuditRow>, StoreError> {
        let limit = check_limit(limit)?;
        let sql = concat!(
            "SELECT ",
            row_columns!(),
            " FROM audit_trail WHERE seq > $1 ORDER BY seq LIMIT $2"
        );
        let rows = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sql)
                .bind(after_seq)
                .bind(limit)
                .fetch_all(pool)
                .await
            {
                Ok(rows) => rows.iter().map(audit_row).collect::<Result<Vec<_>, _>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| self.store.failed(&e))
    }

    /// Up to `limit` (at most [`MAX_AUDIT_PAGE`]) rows matching `filter`, newest first.
    pub async fn search(
        &self,
        filter: &AuditFilter,
        limit: u32,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let limit = check_limit(limit)?;
        let mut clauses = Vec::new();
        let mut params = Vec::new();
        let texts = [
            ("principal", &filter.principal),
            ("server", &filter.server),
            ("target", &filter.target),
            ("outcome", &filter.outcome),
        ];
        for (column, value) in texts {
            if let Some(value) = value {
                params.push(Param::Text(value));
                clauses.push(format!("{column} = ${}", params.len()));
            }
        }
        let bounds = [
            ("at_ms >=", filter.since_ms),
            ("at_ms <", filter.until_ms),
            ("seq <", filter.before_seq),
        ];
        for (clause, bound) in bounds {
            if let Some(bound) = bound {
                params.push(Param::Int(bound));
                clauses.push(format!("{clause} ${}", params.len()));
            }
        }
        let mut sql = concat!("SELECT ", row_columns!(), " FROM audit_trail").to_owned();
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ${}", params.len() + 1));
        let rows = with_pool!(self.store, readers, |pool| {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
            for param in &params {
                query = match param {
                    Param::Text(text) => query.bind(*text),
                    Param::Int(int) => query.bind(*int),
                };
            }
            match query.bind(limit).fetch_all(pool).await {
                Ok(rows) => rows.iter().map(audit_row).collect::<Result<Vec<_>, _>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| self.store.failed(&e))
    }

    /// What the next row chains on, as `(seq, row_sha256)`: the newest row, or after a prune of
    /// every row, the prune's `(through_seq, anchor_sha256)`. `None` for a trail never written.
    pub async fn head(&self) -> Result<Option<(i64, String)>, StoreError> {
        let newest = "SELECT seq, row_sha256 FROM audit_trail ORDER BY seq DESC LIMIT 1";
        let found = with_pool!(self.store, readers, |pool| {
            match sqlx::query(newest).fetch_optional(pool).await {
                Ok(Some(row)) => match (row.int("seq"), row.text("row_sha256")) {
                    (Ok(seq), Ok(sha)) => Ok(Some((seq, sha))),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                },
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .map_err(|e| self.store.failed(&e))?;
        match found {
            Some(head) => Ok(Some(head)),
            None => Ok(self
                .anchor()
                .await?
                .map(|a| (a.through_seq, a.anchor_sha256))),
        }
    }

    /// The latest prune, if the trail was ever pruned.
    pub async fn anchor(&self) -> Result<Option<PruneAnchor>, StoreError> {
        let found = with_pool!(self.store, readers, |pool| {
            match sqlx::query(ANCHOR_SQL).fetch_optional(pool).await {
                Ok(Some(row)) => prune_anchor(&row).map(Some),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        });
        found.map_err(|e| self.store.failed(&e))
    }

    /// Removes, in one transaction, the rows before the first row at or after `at_ms` (all rows,
    /// when none is that new) and records the prune's anchor. A row older than `at_ms` that
    /// follows a newer one (clocks of replicas disagreeing) stays, so what is removed is always
    /// a prefix of the chain and the rest still verifies. `None` when nothing is that old.
    pub async fn prune_before(&self, at_ms: i64) -> Result<Option<PruneAnchor>, StoreError> {
        let pruned_at_ms = now_ms();
        let pruned = in_chain_transaction!(self.store, |tx| {
            let last = sqlx::query(LAST_PRUNED_SQL)
                .bind(at_ms)
                .fetch_optional(&mut *tx)
                .await?;
            match last {
                None => None,
                Some(last) => {
                    let (through_seq, anchor_sha256) = (last.int("seq")?, last.text("row_sha256")?);
                    let deleted = sqlx::query("DELETE FROM audit_trail WHERE seq <= $1")
                        .bind(through_seq)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    let anchor = PruneAnchor {
                        pruned_at_ms,
                        through_seq,
                        rows: i64::try_from(deleted).unwrap_or(i64::MAX),
                        anchor_sha256,
                    };
                    sqlx::query("INSERT INTO audit_prunes (through_seq, pruned_at_ms, pruned_rows, anchor_sha256) VALUES ($1, $2, $3, $4)")
                        .bind(anchor.through_seq)
                        .bind(anchor.pruned_at_ms)
                        .bind(anchor.rows)
                        .bind(&anchor.anchor_sha256)
                        .execute(&mut *tx)
                        .await?;
                    Some(anchor)
                }
            }
        });
        pruned.map_err(|e| self.store.failed(&e))
    }

    /// Checks the trail from the latest prune's anchor (or the genesis) to the head it had when
    /// verify began, a page of [`MAX_AUDIT_PAGE`] rows at a time, and reports the first broken
    /// row. Appends and prunes may run meanwhile: a prune that removes rows verify has not
    /// reached yet is recognised by its anchor, not reported as a break.
    pub async fn verify(&self) -> Result<VerifyReport, StoreError> {
        let mut anchor = self.anchor().await?;
        let Some((head_seq, _)) = self.head().await? else {
            return Ok(VerifyReport {
                rows_checked: 0,
                first_row: None,
                last_row: None,
                pruned: anchor,
                first_broken: None,
            });
        };
        let mut expected_prev = anchor
            .as_ref()
            .map_or_else(|| AUDIT_GENESIS.to_owned(), |a| a.anchor_sha256.clone());
        let mut report = VerifyReport {
            rows_checked: 0,
            first_row: None,
            last_row: None,
            pruned: None,
            first_broken: None,
        };
        let mut after = 0;
        'pages: loop {
            let rows = self.page(after, MAX_AUDIT_PAGE).await?;
            let full_page = rows.len() == usize::try_from(MAX_AUDIT_PAGE).unwrap_or(usize::MAX);
            for row in rows {
                if row.seq > head_seq {
                    break 'pages;
                }
                after = row.seq;
                let mut fault = check_row(&row, &expected_prev, anchor.as_ref());
                if report.first_broken.is_none()
                    && matches!(fault, Some(ChainBreak::PrevLink { .. }))
                {
                    // Pruned while verifying (everything checked so far, and more, removed)?
                    // Then the row chains on the newer anchor.
                    let checked_through = report.last_row.unwrap_or(0);
                    let newer = self.anchor().await?.filter(|a| {
                        (checked_through..row.seq).contains(&a.through_seq)
                            && a.anchor_sha256 == row.prev_sha256
                            && anchor
                                .as_ref()
                                .is_none_or(|old| a.through_seq > old.through_seq)
                    });
                    if let Some(newer) = newer {
                        anchor = Some(newer);
                        fault = check_row(&row, &row.prev_sha256, anchor.as_ref());
                    }
                }
                if let (Some(fault), None) = (fault, &report.first_broken) {
                    report.first_broken = Some((row.seq, fault));
                }
                report.rows_checked += 1;
                report.first_row.get_or_insert(row.seq);
                report.last_row = Some(row.seq);
                expected_prev = row.row_sha256;
            }
            if !full_page {
                break;
            }
        }
        report.pruned = anchor;
        Ok(report)
    }

    /// Moves the rows of the step-2 `audit_events` table onto the end of the chain, oldest
    /// first, a batch per transaction (each deleting what it moved), so an interrupted move
    /// resumes at the next open and no row is lost or moved twice.
    pub(crate) async fn adopt_audit_events(&self) -> Result<(), StoreError> {
        let pending = with_pool!(self.store, readers, |pool| {
            sqlx::query_scalar::<_, i64>(HAS_AUDIT_EVENTS_SQL)
                .fetch_one(pool)
                .await
        })
        .map_err(|e| self.store.failed(&e))?;
        if pending == 0 {
            return Ok(());
        }
        let batch = i64::try_from(MAX_AUDIT_BATCH).unwrap_or(i64::MAX);
        let placeholders = Placeholders::of(self.store);
        loop {
            let moved = in_chain_transaction!(self.store, |tx| {
                let rows = sqlx::query(AUDIT_EVENTS_SQL)
                    .bind(batch)
                    .fetch_all(&mut *tx)
                    .await?;
                let adopted = rows
                    .iter()
                    .map(adopted_entry)
                    .collect::<Result<Vec<_>, _>>()?;
                match adopted.last() {
                    None => 0,
                    Some((last_seq, _)) => {
                        append_chained!(tx, adopted.iter().map(|(_, e)| e), placeholders);
                        sqlx::query("DELETE FROM audit_events WHERE seq <= $1")
                            .bind(*last_seq)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected()
                    }
                }
            })
            .map_err(|e| self.store.failed(&e))?;
            if moved == 0 {
                return Ok(());
            }
        }
    }
}

/// The first thing wrong with `row`, given the hash it should chain on.
fn check_row(
    row: &AuditRow,
    expected_prev: &str,
    anchor: Option<&PruneAnchor>,
) -> Option<ChainBreak> {
    if let Some(anchor) = anchor.filter(|a| row.seq <= a.through_seq) {
        return Some(ChainBreak::BeforeAnchor {
            through_seq: anchor.through_seq,
        });
    }
    if row.prev_sha256 != expected_prev {
        return Some(ChainBreak::PrevLink {
            expected: expected_prev.to_owned(),
            found: row.prev_sha256.clone(),
        });
    }
    let computed = audit_row_sha256(&row.prev_sha256, &row.entry.record_json);
    if computed != row.row_sha256 {
        return Some(ChainBreak::RowHash {
            computed,
            stored: row.row_sha256.clone(),
        });
    }
    record_fault(&row.entry).map(RecordFault::into_break)
}

#[cfg(test)]
mod tests;
