//! Approvals in the store: every question Manifold asks a person before a risky call, one row per
//! question, so that it outlives the gateway that asked and can be answered from another process
//! (`manifold approvals approve`) or another replica. The gateway's ledger trait is backed by this
//! repository in the binary; this crate knows nothing of the gateway, so [`ApprovalRecord`]
//! mirrors its ledger entry field for field.
//!
//! Every change of state is conditional on the state the writer saw (`UPDATE ... WHERE id = ? AND
//! state = ?`), so an answer and a timeout racing each other settle exactly once, and an approval
//! is used at most once, also across processes.

use crate::api_keys::with_pool;
use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Longest approval id accepted (`apr_` and 32 hex digits need 36).
pub const MAX_APPROVAL_ID_LEN: usize = 64;
/// Longest name (caller, server, tool, rule, holder, channel, approver, answerer, state, digest).
pub const MAX_APPROVAL_NAME_LEN: usize = 1024;
/// Largest arguments text kept beside a row (the gateway's `MAX_LEDGER_ARGUMENTS_BYTES`).
pub const MAX_LEDGER_ARGUMENTS_BYTES: usize = 64 * 1024;
/// Longest note (why a row ended, in words).
pub const MAX_APPROVAL_NOTE_LEN: usize = 1024;
/// Most approver entries one row may carry.
pub const MAX_APPROVERS: usize = 64;
/// Most rows one [`Approvals::list`] returns.
pub const MAX_APPROVAL_PAGE: usize = 1000;

/// The state of a question waiting for an answer (the only state `abandon_held_by` touches).
pub const APPROVAL_PENDING: &str = "pending";
/// The state `abandon_held_by` moves rows to.
pub const APPROVAL_ABANDONED: &str = "abandoned";

/// One approval as stored (the gateway's `LedgerEntry`, field for field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    pub id: String,
    pub state: String,
    /// The caller's identity; `None` when authentication is off.
    pub caller: Option<String>,
    pub server: String,
    pub tool: String,
    pub arguments_sha256: String,
    pub definition_sha256: String,
    /// The arguments as shown, at most [`MAX_LEDGER_ARGUMENTS_BYTES`].
    pub arguments_json: Option<String>,
    /// Who may answer: `caller`, `group:NAME`, `identity:NAME` (stored as a JSON array).
    pub approvers: Vec<String>,
    pub channel: String,
    pub rule: String,
    /// The process holding the call, `host:pid`.
    pub holder: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub answered_by: Option<String>,
    pub answered_at_ms: Option<i64>,
    pub note: Option<String>,
}

/// The `approvals` repository.
#[derive(Debug, Clone, Copy)]
pub struct Approvals<'s> {
    store: &'s Store,
}

impl Store {
    /// The approvals ledger.
    pub fn approvals(&self) -> Approvals<'_> {
        Approvals { store: self }
    }
}

fn invalid(field: &'static str, reason: String) -> StoreError {
    StoreError::Invalid {
        what: "approval",
        field,
        reason,
    }
}

fn check_len(field: &'static str, value: &str, max: usize) -> Result<(), StoreError> {
    if value.is_empty() || value.len() > max {
        return Err(invalid(field, format!("must be 1 to {max} bytes")));
    }
    Ok(())
}

fn check_id(id: &str) -> Result<(), StoreError> {
    check_len("id", id, MAX_APPROVAL_ID_LEN)
}

fn check_note(note: Option<&str>) -> Result<(), StoreError> {
    match note {
        Some(n) if n.len() > MAX_APPROVAL_NOTE_LEN => Err(invalid(
            "note",
            format!("is {} bytes, more than {MAX_APPROVAL_NOTE_LEN}", n.len()),
        )),
        _ => Ok(()),
    }
}

fn check_record(r: &ApprovalRecord) -> Result<(), StoreError> {
    check_id(&r.id)?;
    for (field, value) in [
        ("state", r.state.as_str()),
        ("server", &r.server),
        ("tool", &r.tool),
        ("arguments_sha256", &r.arguments_sha256),
        ("definition_sha256", &r.definition_sha256),
        ("channel", &r.channel),
        ("rule", &r.rule),
        ("holder", &r.holder),
    ] {
        check_len(field, value, MAX_APPROVAL_NAME_LEN)?;
    }
    for (field, value) in [
        ("caller", r.caller.as_deref()),
        ("answered_by", r.answered_by.as_deref()),
    ] {
        if let Some(v) = value {
            check_len(field, v, MAX_APPROVAL_NAME_LEN)?;
        }
    }
    if let Some(a) = &r.arguments_json
        && a.len() > MAX_LEDGER_ARGUMENTS_BYTES
    {
        return Err(invalid(
            "arguments_json",
            format!(
                "is {} bytes, more than {MAX_LEDGER_ARGUMENTS_BYTES} (MAX_LEDGER_ARGUMENTS_BYTES: keep the digest alone)",
                a.len()
            ),
        ));
    }
    if r.approvers.len() > MAX_APPROVERS {
        return Err(invalid(
            "approvers",
            format!("has more than {MAX_APPROVERS} entries"),
        ));
    }
    for a in &r.approvers {
        check_len("approvers", a, MAX_APPROVAL_NAME_LEN)?;
    }
    check_note(r.note.as_deref())
}

/// A row of either backend as an [`ApprovalRecord`].
trait ApprovalRow {
    fn approval(&self) -> Result<ApprovalRecord, sqlx::Error>;
}

macro_rules! approval_row {
    ($row:ty) => {
        impl ApprovalRow for $row {
            fn approval(&self) -> Result<ApprovalRecord, sqlx::Error> {
                use sqlx::Row as _;
                let approvers: String = self.try_get("approvers_json")?;
                let approvers: Vec<String> =
                    serde_json::from_str(&approvers).map_err(|e| sqlx::Error::ColumnDecode {
                        index: "approvers_json".to_owned(),
                        source: Box::new(e),
                    })?;
                Ok(ApprovalRecord {
                    id: self.try_get("id")?,
                    state: self.try_get("state")?,
                    caller: self.try_get("caller")?,
                    server: self.try_get("server")?,
                    tool: self.try_get("tool")?,
                    arguments_sha256: self.try_get("arguments_sha256")?,
                    definition_sha256: self.try_get("definition_sha256")?,
                    arguments_json: self.try_get("arguments_json")?,
                    approvers,
                    channel: self.try_get("channel")?,
                    rule: self.try_get("rule")?,
                    holder: self.try_get("holder")?,
                    created_at_ms: self.try_get("created_at_ms")?,
                    expires_at_ms: self.try_get("expires_at_ms")?,
                    answered_by: self.try_get("answered_by")?,
                    answered_at_ms: self.try_get("answered_at_ms")?,
                    note: self.try_get("note")?,
                })
            }
        }
    };
}
approval_row!(sqlx::sqlite::SqliteRow);
approval_row!(sqlx::postgres::PgRow);

const COLUMNS: &str = "id, state, caller, server, tool, arguments_sha256, definition_sha256, arguments_json, \
    approvers_json, channel, rule, holder, created_at_ms, expires_at_ms, answered_by, answered_at_ms, note";

const INSERT_SQL: &str = "INSERT INTO approvals (id, state, caller, server, tool, arguments_sha256, definition_sha256, \
    arguments_json, approvers_json, channel, rule, holder, created_at_ms, expires_at_ms, answered_by, answered_at_ms, note) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)";
/// `$4` (who answered) and `$5` (when: given only with `$4`) and `$6` (the note) keep what the
/// row had when not given, as the gateway's in-memory ledger does.
const TRANSITION_SQL: &str = "UPDATE approvals SET state = $3, answered_by = COALESCE($4, answered_by), \
    answered_at_ms = COALESCE($5, answered_at_ms), note = COALESCE($6, note) WHERE id = $1 AND state = $2";
const ABANDON_SQL: &str =
    "UPDATE approvals SET state = $3, answered_at_ms = $2 WHERE holder = $1 AND state = $4";

impl Approvals<'_> {
    /// Records a new question; an id already present is refused with
    /// [`StoreError::AlreadyExists`] (nothing is replaced).
    pub async fn insert(&self, record: &ApprovalRecord) -> Result<(), StoreError> {
        check_record(record)?;
        let approvers = serde_json::Value::from(record.approvers.clone()).to_string();
        let result = with_pool!(self.store, writer, |pool| sqlx::query(INSERT_SQL)
            .bind(&record.id)
            .bind(&record.state)
            .bind(&record.caller)
            .bind(&record.server)
            .bind(&record.tool)
            .bind(&record.arguments_sha256)
            .bind(&record.definition_sha256)
            .bind(&record.arguments_json)
            .bind(&approvers)
            .bind(&record.channel)
            .bind(&record.rule)
            .bind(&record.holder)
            .bind(record.created_at_ms)
            .bind(record.expires_at_ms)
            .bind(&record.answered_by)
            .bind(record.answered_at_ms)
            .bind(&record.note)
            .execute(pool)
            .await
            .map(|_| ()));
        result.map_err(|e| match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::AlreadyExists {
                location: self.store.location.shown(),
                what: "an approval with this id",
                key: record.id.clone(),
            },
            _ => self.store.failed(&e),
        })
    }

    /// One row by id.
    pub async fn get(&self, id: &str) -> Result<Option<ApprovalRecord>, StoreError> {
        if id.is_empty() || id.len() > MAX_APPROVAL_ID_LEN {
            return Ok(None);
        }
        let sql = sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM approvals WHERE id = $1"));
        let found = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sql).bind(id).fetch_optional(pool).await {
                Ok(Some(row)) => row.approval().map(Some),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        });
        found.map_err(|e| self.store.failed(&e))
    }

    /// Moves `id` from `from` to `to`, stamping `by` and `at_ms` as the answer when `by` is given,
    /// and `note` when given; `false` when the row is not in `from` (or not there at all).
    pub async fn transition(
        &self,
        id: &str,
        from: &str,
        to: &str,
        by: Option<&str>,
        at_ms: i64,
        note: Option<&str>,
    ) -> Result<bool, StoreError> {
        check_id(id)?;
        check_len("state", to, MAX_APPROVAL_NAME_LEN)?;
        if let Some(by) = by {
            check_len("answered_by", by, MAX_APPROVAL_NAME_LEN)?;
        }
        check_note(note)?;
        let answered_at = by.map(|_| at_ms);
        let changed = with_pool!(self.store, writer, |pool| sqlx::query(TRANSITION_SQL)
            .bind(id)
            .bind(from)
            .bind(to)
            .bind(by)
            .bind(answered_at)
            .bind(note)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()));
        changed.map(|n| n == 1).map_err(|e| self.store.failed(&e))
    }

    /// Rows newest first (by creation time, then id), at most `limit` (≤ [`MAX_APPROVAL_PAGE`]);
    /// only pending ones when `pending_only`.
    pub async fn list(
        &self,
        pending_only: bool,
        limit: usize,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        if limit > MAX_APPROVAL_PAGE {
            return Err(StoreError::OverLimit {
                what: "approvals in one listing",
                count: limit as u64,
                max: MAX_APPROVAL_PAGE as u64,
                fix: "ask for at most MAX_APPROVAL_PAGE rows",
            });
        }
        let filter = if pending_only {
            "WHERE state = $2 "
        } else {
            ""
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM approvals {filter}ORDER BY created_at_ms DESC, id DESC LIMIT $1"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = with_pool!(self.store, readers, |pool| {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.clone())).bind(limit);
            if pending_only {
                query = query.bind(APPROVAL_PENDING);
            }
            match query.fetch_all(pool).await {
                Ok(rows) => rows
                    .iter()
                    .map(ApprovalRow::approval)
                    .collect::<Result<Vec<_>, _>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| self.store.failed(&e))
    }

    /// Marks every pending row held by `holder` abandoned at `at_ms`; returns how many.
    pub async fn abandon_held_by(&self, holder: &str, at_ms: i64) -> Result<u64, StoreError> {
        check_len("holder", holder, MAX_APPROVAL_NAME_LEN)?;
        let changed = with_pool!(self.store, writer, |pool| sqlx::query(ABANDON_SQL)
            .bind(holder)
            .bind(at_ms)
            .bind(APPROVAL_ABANDONED)
            .bind(APPROVAL_PENDING)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()));
        changed.map_err(|e| self.store.failed(&e))
    }
}
