//! The audit trail: one row per tool call, appended in order and never updated. The caller
//! computes the hash chain (`prev_sha256`, `row_sha256`) so both backends store identical rows.

use crate::api_keys::{RowLike, with_pool};
use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Most rows one [`AuditTrail::recent`] returns.
pub const MAX_AUDIT_PAGE: u32 = 1000;

/// One audit row as written (the store assigns `seq`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    pub at_ms: i64,
    pub call_id: String,
    pub principal: String,
    pub server: String,
    pub tool: String,
    /// `ok`, `tool_error`, `rpc_error` or `transport_error`.
    pub outcome: String,
    pub args_sha256: String,
    /// Further fields as a JSON object (era, client, duration, ...).
    pub detail_json: String,
    pub prev_sha256: String,
    pub row_sha256: String,
}

/// The `audit_events` repository.
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

fn event(row: &impl RowLike) -> Result<(i64, AuditEvent), sqlx::Error> {
    Ok((
        row.int("seq")?,
        AuditEvent {
            at_ms: row.int("at_ms")?,
            call_id: row.text("call_id")?,
            principal: row.text("principal")?,
            server: row.text("server")?,
            tool: row.text("tool")?,
            outcome: row.text("outcome")?,
            args_sha256: row.text("args_sha256")?,
            detail_json: row.text("detail_json")?,
            prev_sha256: row.text("prev_sha256")?,
            row_sha256: row.text("row_sha256")?,
        },
    ))
}

impl AuditTrail<'_> {
    /// Appends `e`; returns its sequence number once it is durable.
    pub async fn append(&self, e: &AuditEvent) -> Result<i64, StoreError> {
        let sql = "INSERT INTO audit_events (at_ms, call_id, principal, server, tool, outcome, args_sha256, detail_json, prev_sha256, row_sha256) \
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq";
        let seq = with_pool!(self.store, writer, |pool| sqlx::query_scalar::<_, i64>(sql)
            .bind(e.at_ms)
            .bind(&e.call_id)
            .bind(&e.principal)
            .bind(&e.server)
            .bind(&e.tool)
            .bind(&e.outcome)
            .bind(&e.args_sha256)
            .bind(&e.detail_json)
            .bind(&e.prev_sha256)
            .bind(&e.row_sha256)
            .fetch_one(pool)
            .await);
        seq.map_err(|err| self.store.failed(&err))
    }

    /// The newest `limit` rows (at most [`MAX_AUDIT_PAGE`]), oldest first, with their `seq`.
    pub async fn recent(&self, limit: u32) -> Result<Vec<(i64, AuditEvent)>, StoreError> {
        let limit = i64::from(limit.min(MAX_AUDIT_PAGE));
        let sql = "SELECT seq, at_ms, call_id, principal, server, tool, outcome, args_sha256, detail_json, prev_sha256, row_sha256 \
            FROM (SELECT * FROM audit_events ORDER BY seq DESC LIMIT $1) AS newest ORDER BY seq";
        let rows = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sql).bind(limit).fetch_all(pool).await {
                Ok(rows) => rows.iter().map(event).collect::<Result<Vec<_>, _>>(),
                Err(err) => Err(err),
            }
        });
        rows.map_err(|err| self.store.failed(&err))
    }
}
