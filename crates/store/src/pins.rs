//! Pinned tool definitions in the store: one row per server and tool, so that every gateway (and
//! `manifold pins approve`, in another process) writes single rows under conditions instead of
//! rewriting one shared file. Every write bumps `pin_revision` in the same transaction, so a
//! gateway learns of another writer's change by reading one row.
//!
//! Writes are conditional on what the writer decided against: a first sight is stored only where
//! nothing is pinned, and a change is recorded or cleared only while the pin is still the one it
//! was compared with. A gateway that saw a change just before someone approved it therefore cannot
//! undo the approval.

use std::collections::BTreeMap;

use crate::api_keys::with_pool;
use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Longest server or tool name a pin is kept under.
pub const MAX_PIN_NAME_LEN: usize = 1024;
/// Largest definition kept beside a pin (larger ones are pinned by digest alone).
pub const MAX_PIN_DEFINITION_BYTES: usize = 256 * 1024;
/// Most writes one [`ToolPins::apply`] or [`ToolPins::import`] takes (one transaction).
pub const MAX_PIN_BATCH: usize = 1000;

/// One pin as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRecord {
    pub server: String,
    pub tool: String,
    /// SHA-256 (hex) of the canonical pinned members.
    pub sha256: String,
    /// A short digest per member, to name what changes later.
    pub parts: BTreeMap<String, String>,
    /// The definition as the server sent it, when known and at most [`MAX_PIN_DEFINITION_BYTES`].
    pub definition_json: Option<String>,
    pub pinned_at_ms: i64,
    /// When a person approved this definition (`None`: pinned on first sight).
    pub approved_at_ms: Option<i64>,
    /// A definition seen that differs from the pin, waiting for approval.
    pub change: Option<PinChangeRecord>,
}

/// A recorded change of one pinned tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinChangeRecord {
    /// The pin's digest when the change was seen.
    pub pinned_sha256: String,
    pub seen_sha256: String,
    pub parts: BTreeMap<String, String>,
    /// The members that differ.
    pub fields: Vec<String>,
    pub definition_json: Option<String>,
    pub seen_at_ms: i64,
}

/// One conditional write a gateway decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinWriteRecord {
    /// First sight: stored unless the tool is pinned already (`change` is ignored).
    Pin(PinRecord),
    /// Records (or replaces) the tool's change, unless its pin is no longer `change.pinned_sha256`.
    RecordChange {
        server: String,
        tool: String,
        change: PinChangeRecord,
    },
    /// Back to the pinned definition: forgets the change, unless the pin is no longer `pinned_sha256`.
    ClearChange {
        server: String,
        tool: String,
        pinned_sha256: String,
    },
}

/// Every pin, and the revision it was read at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PinSnapshot {
    pub revision: i64,
    /// By server, then tool.
    pub pins: Vec<PinRecord>,
}

/// The `tool_pins` repository.
#[derive(Debug, Clone, Copy)]
pub struct ToolPins<'s> {
    store: &'s Store,
}

impl Store {
    /// The pinned tool definitions.
    pub fn pins(&self) -> ToolPins<'_> {
        ToolPins { store: self }
    }
}

fn invalid(field: &'static str, reason: String) -> StoreError {
    StoreError::Invalid {
        what: "tool pin",
        field,
        reason,
    }
}

fn check_names(server: &str, tool: &str) -> Result<(), StoreError> {
    for (field, value) in [("server", server), ("tool", tool)] {
        if value.is_empty() || value.len() > MAX_PIN_NAME_LEN {
            return Err(invalid(
                field,
                format!("must be 1 to {MAX_PIN_NAME_LEN} bytes"),
            ));
        }
    }
    Ok(())
}

fn check_definition(definition: Option<&String>) -> Result<(), StoreError> {
    match definition {
        Some(d) if d.len() > MAX_PIN_DEFINITION_BYTES => Err(invalid(
            "definition",
            format!(
                "is {} bytes, more than {MAX_PIN_DEFINITION_BYTES} (pin it by digest alone)",
                d.len()
            ),
        )),
        _ => Ok(()),
    }
}

fn check_batch(len: usize) -> Result<(), StoreError> {
    if len > MAX_PIN_BATCH {
        return Err(StoreError::OverLimit {
            what: "tool pin writes in one batch",
            count: len as u64,
            max: MAX_PIN_BATCH as u64,
            fix: "split the writes into batches of at most MAX_PIN_BATCH",
        });
    }
    Ok(())
}

fn check_write(w: &PinWriteRecord) -> Result<(), StoreError> {
    match w {
        PinWriteRecord::Pin(p) => {
            check_names(&p.server, &p.tool)?;
            check_definition(p.definition_json.as_ref())
        }
        PinWriteRecord::RecordChange {
            server,
            tool,
            change,
        } => {
            check_names(server, tool)?;
            check_definition(change.definition_json.as_ref())
        }
        PinWriteRecord::ClearChange { server, tool, .. } => check_names(server, tool),
    }
}

fn parts_json(parts: &BTreeMap<String, String>) -> String {
    let map: serde_json::Map<String, serde_json::Value> = parts
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

fn fields_json(fields: &[String]) -> String {
    serde_json::Value::from(fields.to_vec()).to_string()
}

fn decode_parts(column: &str, text: &str) -> Result<BTreeMap<String, String>, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(e),
    })
}

fn decode_fields(column: &str, text: &str) -> Result<Vec<String>, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(e),
    })
}

/// A row of either backend as a [`PinRecord`].
trait PinRow {
    fn pin(&self) -> Result<PinRecord, sqlx::Error>;
}

macro_rules! pin_row {
    ($row:ty) => {
        impl PinRow for $row {
            fn pin(&self) -> Result<PinRecord, sqlx::Error> {
                use sqlx::Row as _;
                let parts: String = self.try_get("parts_json")?;
                let seen: Option<String> = self.try_get("changed_seen_sha256")?;
                let change = match seen {
                    None => None,
                    Some(seen_sha256) => {
                        let parts: Option<String> = self.try_get("changed_parts_json")?;
                        let fields: Option<String> = self.try_get("changed_fields_json")?;
                        let pinned: Option<String> = self.try_get("changed_pinned_sha256")?;
                        let seen_at: Option<i64> = self.try_get("changed_seen_at_ms")?;
                        Some(PinChangeRecord {
                            pinned_sha256: pinned.unwrap_or_default(),
                            seen_sha256,
                            parts: decode_parts(
                                "changed_parts_json",
                                parts.as_deref().unwrap_or("{}"),
                            )?,
                            fields: decode_fields(
                                "changed_fields_json",
                                fields.as_deref().unwrap_or("[]"),
                            )?,
                            definition_json: self.try_get("changed_definition_json")?,
                            seen_at_ms: seen_at.unwrap_or(0),
                        })
                    }
                };
                Ok(PinRecord {
                    server: self.try_get("server")?,
                    tool: self.try_get("tool")?,
                    sha256: self.try_get("sha256")?,
                    parts: decode_parts("parts_json", &parts)?,
                    definition_json: self.try_get("definition_json")?,
                    pinned_at_ms: self.try_get("pinned_at_ms")?,
                    approved_at_ms: self.try_get("approved_at_ms")?,
                    change,
                })
            }
        }
    };
}
pin_row!(sqlx::sqlite::SqliteRow);
pin_row!(sqlx::postgres::PgRow);

/// Runs `$body` in one write transaction (`BEGIN IMMEDIATE` on SQLite, so it holds the write lock
/// from its first statement, also against another process's writer), committing when it succeeds.
macro_rules! in_pin_transaction {
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
                    let value = $body;
                    $tx.commit().await?;
                    Ok::<_, sqlx::Error>(value)
                }
                .await
            }
        }
    };
}

const BUMP_SQL: &str =
    "UPDATE pin_revision SET revision = revision + 1 WHERE id = 1 RETURNING revision";
const INSERT_PIN_SQL: &str = "INSERT INTO tool_pins (server, tool, sha256, parts_json, definition_json, pinned_at_ms, approved_at_ms, \
    changed_pinned_sha256, changed_seen_sha256, changed_parts_json, changed_fields_json, changed_definition_json, changed_seen_at_ms) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (server, tool) DO NOTHING";
const RECORD_CHANGE_SQL: &str = "UPDATE tool_pins SET changed_pinned_sha256 = $3, changed_seen_sha256 = $4, changed_parts_json = $5, \
    changed_fields_json = $6, changed_definition_json = $7, changed_seen_at_ms = $8 WHERE server = $1 AND tool = $2 AND sha256 = $3";
const CLEAR_CHANGE_SQL: &str = "UPDATE tool_pins SET changed_pinned_sha256 = NULL, changed_seen_sha256 = NULL, changed_parts_json = NULL, \
    changed_fields_json = NULL, changed_definition_json = NULL, changed_seen_at_ms = NULL WHERE server = $1 AND tool = $2 AND sha256 = $3";
const APPROVE_SQL: &str = "UPDATE tool_pins SET sha256 = changed_seen_sha256, parts_json = COALESCE(changed_parts_json, '{}'), \
    definition_json = changed_definition_json, pinned_at_ms = $2, approved_at_ms = $2, changed_pinned_sha256 = NULL, \
    changed_seen_sha256 = NULL, changed_parts_json = NULL, changed_fields_json = NULL, changed_definition_json = NULL, \
    changed_seen_at_ms = NULL WHERE server = $1 AND changed_seen_sha256 IS NOT NULL RETURNING tool";
const SELECT_SQL: &str = "SELECT server, tool, sha256, parts_json, definition_json, pinned_at_ms, approved_at_ms, changed_pinned_sha256, \
    changed_seen_sha256, changed_parts_json, changed_fields_json, changed_definition_json, changed_seen_at_ms FROM tool_pins ORDER BY server, tool";

/// Binds a whole pin row (with its change, if any) to [`INSERT_PIN_SQL`], on either backend.
macro_rules! insert_pin {
    ($tx:ident, $pin:expr, $with_change:expr) => {{
        let p: &PinRecord = $pin;
        let change = if $with_change {
            p.change.as_ref()
        } else {
            None
        };
        sqlx::query(INSERT_PIN_SQL)
            .bind(&p.server)
            .bind(&p.tool)
            .bind(&p.sha256)
            .bind(parts_json(&p.parts))
            .bind(&p.definition_json)
            .bind(p.pinned_at_ms)
            .bind(p.approved_at_ms)
            .bind(change.map(|c| c.pinned_sha256.clone()))
            .bind(change.map(|c| c.seen_sha256.clone()))
            .bind(change.map(|c| parts_json(&c.parts)))
            .bind(change.map(|c| fields_json(&c.fields)))
            .bind(change.and_then(|c| c.definition_json.clone()))
            .bind(change.map(|c| c.seen_at_ms))
            .execute(&mut *$tx)
            .await?
            .rows_affected()
    }};
}

impl ToolPins<'_> {
    /// The revision counter: it changes with every write.
    pub async fn revision(&self) -> Result<i64, StoreError> {
        let sql = "SELECT revision FROM pin_revision WHERE id = 1";
        let revision = with_pool!(self.store, readers, |pool| sqlx::query_scalar::<_, i64>(
            sql
        )
        .fetch_one(pool)
        .await);
        revision.map_err(|e| self.store.failed(&e))
    }

    /// Every pin and the revision. The revision is read first: a write landing in between is seen
    /// in the rows and again at the next poll, never missed.
    pub async fn snapshot(&self) -> Result<PinSnapshot, StoreError> {
        let revision = self.revision().await?;
        let pins = with_pool!(self.store, readers, |pool| {
            match sqlx::query(SELECT_SQL).fetch_all(pool).await {
                Ok(rows) => rows.iter().map(PinRow::pin).collect::<Result<Vec<_>, _>>(),
                Err(e) => Err(e),
            }
        });
        let pins = pins.map_err(|e| self.store.failed(&e))?;
        Ok(PinSnapshot { revision, pins })
    }

    /// Applies `writes` in order in one transaction, each under its condition; returns the
    /// revision after it (one more than before, whatever the conditions decided).
    pub async fn apply(&self, writes: &[PinWriteRecord]) -> Result<i64, StoreError> {
        check_batch(writes.len())?;
        for w in writes {
            check_write(w)?;
        }
        let revision = in_pin_transaction!(self.store, |tx| {
            let revision: i64 = sqlx::query_scalar(BUMP_SQL).fetch_one(&mut *tx).await?;
            for w in writes {
                match w {
                    PinWriteRecord::Pin(p) => {
                        insert_pin!(tx, p, false);
                    }
                    PinWriteRecord::RecordChange {
                        server,
                        tool,
                        change,
                    } => {
                        sqlx::query(RECORD_CHANGE_SQL)
                            .bind(server)
                            .bind(tool)
                            .bind(&change.pinned_sha256)
                            .bind(&change.seen_sha256)
                            .bind(parts_json(&change.parts))
                            .bind(fields_json(&change.fields))
                            .bind(&change.definition_json)
                            .bind(change.seen_at_ms)
                            .execute(&mut *tx)
                            .await?;
                    }
                    PinWriteRecord::ClearChange {
                        server,
                        tool,
                        pinned_sha256,
                    } => {
                        sqlx::query(CLEAR_CHANGE_SQL)
                            .bind(server)
                            .bind(tool)
                            .bind(pinned_sha256)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
            }
            revision
        });
        revision.map_err(|e| self.store.failed(&e))
    }

    /// Accepts every recorded change of `server`: the definitions seen become its pins, approved
    /// at `at_ms`. Returns the tools approved, by name (none: nothing was waiting, and nothing is
    /// written).
    pub async fn approve(&self, server: &str, at_ms: i64) -> Result<Vec<String>, StoreError> {
        let approved = in_pin_transaction!(self.store, |tx| {
            let mut tools: Vec<String> = sqlx::query_scalar(APPROVE_SQL)
                .bind(server)
                .bind(at_ms)
                .fetch_all(&mut *tx)
                .await?;
            if !tools.is_empty() {
                sqlx::query(BUMP_SQL).fetch_one(&mut *tx).await?;
            }
            tools.sort();
            tools
        });
        approved.map_err(|e| self.store.failed(&e))
    }

    /// Stores whole pins (with their changes) where the store has none for that tool (an import
    /// of `pins.json`); returns how many were stored. At most [`MAX_PIN_BATCH`] per call.
    pub async fn import(&self, pins: &[PinRecord]) -> Result<usize, StoreError> {
        check_batch(pins.len())?;
        for p in pins {
            check_names(&p.server, &p.tool)?;
            check_definition(p.definition_json.as_ref())?;
            check_definition(p.change.as_ref().and_then(|c| c.definition_json.as_ref()))?;
        }
        let stored = in_pin_transaction!(self.store, |tx| {
            let mut stored = 0usize;
            for p in pins {
                if insert_pin!(tx, p, true) > 0 {
                    stored += 1;
                }
            }
            if stored > 0 {
                sqlx::query(BUMP_SQL).fetch_one(&mut *tx).await?;
            }
            stored
        });
        stored.map_err(|e| self.store.failed(&e))
    }
}
