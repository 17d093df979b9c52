//! Dashboard sign-ins in the store, so that every replica behind a load balancer knows them: a
//! session opened on one replica is honoured by the next, and a sign-out or a revoked key ends it
//! everywhere. Only the SHA-256 of the cookie's value is kept. What a session says about its
//! operator is the binary's JSON; this crate keeps it as text.

use sqlx::Row;

use crate::api_keys::with_pool;
use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Largest operator or flash JSON kept.
pub const MAX_DASHBOARD_SESSION_BYTES: usize = 64 * 1024;

/// One dashboard session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DashboardSessionRecord {
    /// Lowercase hex SHA-256 of the cookie's value.
    pub id_sha256: String,
    pub operator_json: String,
    /// The API key that signed in, if one did.
    pub key_id: Option<String>,
    pub last_seen_ms: i64,
    /// When the session ends whatever its use (an access token's sign-in).
    pub ends_ms: Option<i64>,
}

/// The `dashboard_sessions` repository.
#[derive(Debug, Clone, Copy)]
pub struct DashboardSessions<'s> {
    store: &'s Store,
}

impl Store {
    /// Dashboard sign-ins shared by replicas.
    pub fn dashboard_sessions(&self) -> DashboardSessions<'_> {
        DashboardSessions { store: self }
    }
}

impl DashboardSessions<'_> {
    /// Adds a session, first forgetting those idle since before `idle_before_ms` and, past
    /// `max` sessions, the least recently seen.
    pub async fn open(
        &self,
        session: &DashboardSessionRecord,
        idle_before_ms: i64,
        max: usize,
    ) -> Result<(), StoreError> {
        if session.operator_json.len() > MAX_DASHBOARD_SESSION_BYTES {
            return Err(StoreError::Invalid {
                what: "dashboard session",
                field: "operator_json",
                reason: format!("at most {MAX_DASHBOARD_SESSION_BYTES} bytes"),
            });
        }
        self.prune(idle_before_ms).await?;
        let keep = i64::try_from(max.saturating_sub(1)).unwrap_or(i64::MAX);
        let crowd = "DELETE FROM dashboard_sessions WHERE id_sha256 IN (SELECT id_sha256 FROM dashboard_sessions ORDER BY last_seen_ms DESC LIMIT -1 OFFSET $1)";
        let crowd_pg = "DELETE FROM dashboard_sessions WHERE id_sha256 IN (SELECT id_sha256 FROM dashboard_sessions ORDER BY last_seen_ms DESC OFFSET $1)";
        let insert = "INSERT INTO dashboard_sessions (id_sha256, operator_json, key_id, last_seen_ms, ends_ms, flash_json) VALUES ($1, $2, $3, $4, $5, NULL)";
        macro_rules! write {
            ($pool:expr, $crowd:expr) => {
                async {
                    sqlx::query($crowd).bind(keep).execute($pool).await?;
                    sqlx::query(insert)
                        .bind(&session.id_sha256)
                        .bind(&session.operator_json)
                        .bind(&session.key_id)
                        .bind(session.last_seen_ms)
                        .bind(session.ends_ms)
                        .execute($pool)
                        .await
                        .map(|_| ())
                }
                .await
            };
        }
        let written: Result<(), sqlx::Error> = match &self.store.pools {
            Pools::Postgres(pool) => write!(pool, crowd_pg),
            Pools::Sqlite { writer, .. } => write!(writer, crowd),
        };
        written.map_err(|e| self.store.failed(&e))
    }

    /// The session whose cookie hashes to `id_sha256`.
    pub async fn get(&self, id_sha256: &str) -> Result<Option<DashboardSessionRecord>, StoreError> {
        let sql = "SELECT id_sha256, operator_json, key_id, last_seen_ms, ends_ms FROM dashboard_sessions WHERE id_sha256 = $1";
        let found = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sql).bind(id_sha256).fetch_optional(pool).await {
                Ok(Some(row)) => (|| {
                    Ok(Some(DashboardSessionRecord {
                        id_sha256: row.try_get("id_sha256")?,
                        operator_json: row.try_get("operator_json")?,
                        key_id: row.try_get("key_id")?,
                        last_seen_ms: row.try_get("last_seen_ms")?,
                        ends_ms: row.try_get("ends_ms")?,
                    }))
                })(),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        });
        found.map_err(|e| self.store.failed(&e))
    }

    /// Marks the session seen at `at_ms`.
    pub async fn touch(&self, id_sha256: &str, at_ms: i64) -> Result<(), StoreError> {
        let sql = "UPDATE dashboard_sessions SET last_seen_ms = $1 WHERE id_sha256 = $2";
        let done = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(at_ms)
            .bind(id_sha256)
            .execute(pool)
            .await
            .map(|_| ()));
        done.map_err(|e| self.store.failed(&e))
    }

    /// Ends one session.
    pub async fn close(&self, id_sha256: &str) -> Result<(), StoreError> {
        let sql = "DELETE FROM dashboard_sessions WHERE id_sha256 = $1";
        let done = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(id_sha256)
            .execute(pool)
            .await
            .map(|_| ()));
        done.map_err(|e| self.store.failed(&e))
    }

    /// Ends every session the key `key_id` opened; returns how many.
    pub async fn close_for_key(&self, key_id: &str) -> Result<u64, StoreError> {
        let sql = "DELETE FROM dashboard_sessions WHERE key_id = $1";
        let done = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(key_id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()));
        done.map_err(|e| self.store.failed(&e))
    }

    /// Sets (or, with `None`, clears) the line the session's next page shows.
    pub async fn set_flash(&self, id_sha256: &str, flash: Option<&str>) -> Result<(), StoreError> {
        if flash.is_some_and(|f| f.len() > MAX_DASHBOARD_SESSION_BYTES) {
            return Err(StoreError::Invalid {
                what: "dashboard session",
                field: "flash_json",
                reason: format!("at most {MAX_DASHBOARD_SESSION_BYTES} bytes"),
            });
        }
        let sql = "UPDATE dashboard_sessions SET flash_json = $1 WHERE id_sha256 = $2";
        let done = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(flash)
            .bind(id_sha256)
            .execute(pool)
            .await
            .map(|_| ()));
        done.map_err(|e| self.store.failed(&e))
    }

    /// Takes the line the session's next page shows, leaving none: one page shows it once.
    pub async fn take_flash(&self, id_sha256: &str) -> Result<Option<String>, StoreError> {
        let sql = "UPDATE dashboard_sessions AS d SET flash_json = NULL \
                   FROM (SELECT id_sha256, flash_json FROM dashboard_sessions WHERE id_sha256 = $1) AS old \
                   WHERE d.id_sha256 = old.id_sha256 RETURNING old.flash_json";
        let taken = match &self.store.pools {
            // `old` reads the row as it was before this statement changed it.
            Pools::Postgres(pool) => sqlx::query_scalar::<_, Option<String>>(sql)
                .bind(id_sha256)
                .fetch_optional(pool)
                .await
                .map(Option::flatten),
            Pools::Sqlite { writer, .. } => {
                async {
                    let mut tx = writer.begin().await?;
                    let flash: Option<Option<String>> = sqlx::query_scalar(
                        "SELECT flash_json FROM dashboard_sessions WHERE id_sha256 = $1",
                    )
                    .bind(id_sha256)
                    .fetch_optional(&mut *tx)
                    .await?;
                    sqlx::query(
                        "UPDATE dashboard_sessions SET flash_json = NULL WHERE id_sha256 = $1",
                    )
                    .bind(id_sha256)
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(flash.flatten())
                }
                .await
            }
        };
        taken.map_err(|e| self.store.failed(&e))
    }

    /// Forgets sessions idle since before `idle_before_ms`; returns how many went.
    pub async fn prune(&self, idle_before_ms: i64) -> Result<u64, StoreError> {
        let sql = "DELETE FROM dashboard_sessions WHERE last_seen_ms < $1";
        let done = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(idle_before_ms)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()));
        done.map_err(|e| self.store.failed(&e))
    }
}
