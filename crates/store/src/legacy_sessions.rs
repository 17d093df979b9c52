//! What a legacy session asked for, kept where every replica can read it: the resources it
//! subscribed to, the log level it chose, and whether it ended. A replica that receives a request
//! of a session another replica started reads this to carry on where the other left off. Each
//! change is one row operation, so two replicas changing one session at once lose neither
//! change. Sessions are named by the SHA-256 of their id, never by the id itself.

use sqlx::Row;

use crate::api_keys::with_pool;
use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Longest subscribed URI kept (longer ones are refused, and the session keeps them locally).
pub const MAX_LEGACY_URI_BYTES: usize = 8 * 1024;
/// Most subscriptions kept for one session.
pub const MAX_LEGACY_SUBSCRIPTIONS: usize = 1024;
/// Longest log level name accepted (`emergency` is the longest MCP defines).
pub const MAX_LEGACY_LOG_LEVEL_LEN: usize = 16;

/// One session's shared state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LegacySessionRecord {
    /// Subscribed URIs, in byte order.
    pub subscriptions: Vec<String>,
    pub log_level: Option<String>,
    pub ended: bool,
}

/// The `legacy_sessions` repository.
#[derive(Debug, Clone, Copy)]
pub struct LegacySessions<'s> {
    store: &'s Store,
}

impl Store {
    /// Legacy session state shared by replicas.
    pub fn legacy_sessions(&self) -> LegacySessions<'_> {
        LegacySessions { store: self }
    }
}

/// The change one call makes.
enum Change<'a> {
    Subscribe(&'a str),
    Unsubscribe(&'a str),
    LogLevel(&'a str),
    End,
}

fn check_id(id_sha256: &str) -> Result<(), StoreError> {
    let hex = id_sha256.len() == 64 && id_sha256.bytes().all(|b| b.is_ascii_hexdigit());
    if hex {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what: "legacy session",
            field: "id_sha256",
            reason: "must be 64 hex digits (a SHA-256)".to_owned(),
        })
    }
}

impl LegacySessions<'_> {
    /// Adds a subscription; one already kept is kept once. Past
    /// [`MAX_LEGACY_SUBSCRIPTIONS`] for the session, refused.
    pub async fn subscribe(
        &self,
        id_sha256: &str,
        uri: &str,
        at_ms: i64,
    ) -> Result<(), StoreError> {
        if uri.is_empty() || uri.len() > MAX_LEGACY_URI_BYTES {
            return Err(StoreError::Invalid {
                what: "legacy session",
                field: "uri",
                reason: format!("must be 1 to {MAX_LEGACY_URI_BYTES} bytes (MAX_LEGACY_URI_BYTES)"),
            });
        }
        self.change(id_sha256, Change::Subscribe(uri), at_ms).await
    }

    /// Forgets a subscription (none kept: nothing changes but the session's time).
    pub async fn unsubscribe(
        &self,
        id_sha256: &str,
        uri: &str,
        at_ms: i64,
    ) -> Result<(), StoreError> {
        self.change(id_sha256, Change::Unsubscribe(uri), at_ms)
            .await
    }

    /// Sets the session's log level.
    pub async fn set_log_level(
        &self,
        id_sha256: &str,
        level: &str,
        at_ms: i64,
    ) -> Result<(), StoreError> {
        if level.is_empty() || level.len() > MAX_LEGACY_LOG_LEVEL_LEN {
            return Err(StoreError::Invalid {
                what: "legacy session",
                field: "log_level",
                reason: format!("must be 1 to {MAX_LEGACY_LOG_LEVEL_LEN} bytes"),
            });
        }
        self.change(id_sha256, Change::LogLevel(level), at_ms).await
    }

    /// Marks the session ended: every replica refuses it from now on.
    pub async fn end(&self, id_sha256: &str, at_ms: i64) -> Result<(), StoreError> {
        self.change(id_sha256, Change::End, at_ms).await
    }

    async fn change(
        &self,
        id_sha256: &str,
        change: Change<'_>,
        at_ms: i64,
    ) -> Result<(), StoreError> {
        check_id(id_sha256)?;
        let touch = "INSERT INTO legacy_sessions (id_sha256, updated_ms) VALUES ($1, $2) \
                     ON CONFLICT (id_sha256) DO UPDATE SET updated_ms = excluded.updated_ms";
        // Those other than the one asked for: subscribing again at the bound changes nothing.
        let count =
            "SELECT COUNT(*) FROM legacy_session_subscriptions WHERE id_sha256 = $1 AND uri <> $2";
        let subscribe = "INSERT INTO legacy_session_subscriptions (id_sha256, uri) VALUES ($1, $2) \
                         ON CONFLICT (id_sha256, uri) DO NOTHING";
        let unsubscribe =
            "DELETE FROM legacy_session_subscriptions WHERE id_sha256 = $1 AND uri = $2";
        let level = "UPDATE legacy_sessions SET log_level = $2 WHERE id_sha256 = $1";
        let end = "UPDATE legacy_sessions SET ended = TRUE WHERE id_sha256 = $1";
        macro_rules! write {
            ($pool:expr) => {
                async {
                    let mut tx = $pool.begin().await?;
                    sqlx::query(touch)
                        .bind(id_sha256)
                        .bind(at_ms)
                        .execute(&mut *tx)
                        .await?;
                    let full = match change {
                        Change::Subscribe(uri) => {
                            let kept: i64 = sqlx::query_scalar(count)
                                .bind(id_sha256)
                                .bind(uri)
                                .fetch_one(&mut *tx)
                                .await?;
                            let full = usize::try_from(kept).unwrap_or(usize::MAX)
                                >= MAX_LEGACY_SUBSCRIPTIONS;
                            if !full {
                                sqlx::query(subscribe)
                                    .bind(id_sha256)
                                    .bind(uri)
                                    .execute(&mut *tx)
                                    .await?;
                            }
                            full
                        }
                        Change::Unsubscribe(uri) => {
                            sqlx::query(unsubscribe)
                                .bind(id_sha256)
                                .bind(uri)
                                .execute(&mut *tx)
                                .await?;
                            false
                        }
                        Change::LogLevel(l) => {
                            sqlx::query(level)
                                .bind(id_sha256)
                                .bind(l)
                                .execute(&mut *tx)
                                .await?;
                            false
                        }
                        Change::End => {
                            sqlx::query(end).bind(id_sha256).execute(&mut *tx).await?;
                            false
                        }
                    };
                    tx.commit().await?;
                    Ok::<bool, sqlx::Error>(full)
                }
                .await
            };
        }
        let full = match &self.store.pools {
            Pools::Postgres(pool) => write!(pool),
            Pools::Sqlite { writer, .. } => write!(writer),
        }
        .map_err(|e| self.store.failed(&e))?;
        if full {
            return Err(StoreError::OverLimit {
                what: "subscriptions of one legacy session (MAX_LEGACY_SUBSCRIPTIONS)",
                count: u64::try_from(MAX_LEGACY_SUBSCRIPTIONS)
                    .map_or(u64::MAX, |m| m.saturating_add(1)),
                max: u64::try_from(MAX_LEGACY_SUBSCRIPTIONS).unwrap_or(u64::MAX),
                fix: "unsubscribe from resources the session no longer watches",
            });
        }
        Ok(())
    }

    /// The session's shared state; `None` for a session no replica recorded anything of.
    pub async fn get(&self, id_sha256: &str) -> Result<Option<LegacySessionRecord>, StoreError> {
        check_id(id_sha256)?;
        let session = "SELECT log_level, ended FROM legacy_sessions WHERE id_sha256 = $1";
        let subscriptions = "SELECT uri FROM legacy_session_subscriptions WHERE id_sha256 = $1 ORDER BY uri LIMIT $2";
        let limit = i64::try_from(MAX_LEGACY_SUBSCRIPTIONS).unwrap_or(i64::MAX);
        let found = with_pool!(self.store, readers, |pool| {
            async {
                let Some(row) = sqlx::query(session)
                    .bind(id_sha256)
                    .fetch_optional(pool)
                    .await?
                else {
                    return Ok(None);
                };
                let uris = sqlx::query(subscriptions)
                    .bind(id_sha256)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?
                    .iter()
                    .map(|r| r.try_get::<String, _>("uri"))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok::<_, sqlx::Error>(Some(LegacySessionRecord {
                    subscriptions: uris,
                    log_level: row.try_get("log_level")?,
                    ended: row.try_get("ended")?,
                }))
            }
            .await
        });
        found.map_err(|e| self.store.failed(&e))
    }

    /// Forgets sessions unchanged since before `before_ms` (a session older than its lifetime
    /// cannot be resumed anyway); returns how many went.
    pub async fn prune(&self, before_ms: i64) -> Result<u64, StoreError> {
        let orphans = "DELETE FROM legacy_session_subscriptions WHERE id_sha256 IN \
                       (SELECT id_sha256 FROM legacy_sessions WHERE updated_ms < $1)";
        let sessions = "DELETE FROM legacy_sessions WHERE updated_ms < $1";
        macro_rules! prune {
            ($pool:expr) => {
                async {
                    let mut tx = $pool.begin().await?;
                    sqlx::query(orphans)
                        .bind(before_ms)
                        .execute(&mut *tx)
                        .await?;
                    let gone = sqlx::query(sessions)
                        .bind(before_ms)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    tx.commit().await?;
                    Ok::<u64, sqlx::Error>(gone)
                }
                .await
            };
        }
        let gone = match &self.store.pools {
            Pools::Postgres(pool) => prune!(pool),
            Pools::Sqlite { writer, .. } => prune!(writer),
        };
        gone.map_err(|e| self.store.failed(&e))
    }
}
