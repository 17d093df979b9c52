//! The store: opened once at start (migrating it, refusing what it cannot safely use), then shared
//! by the repositories of each concern. SQLite gets one writer connection and a few readers in WAL
//! mode; PostgreSQL gets a pool that reconnects by itself after the server comes back.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::error::StoreError;
use crate::location::{REDACTED_PASSWORD, StoreLocation, data_dir_of};
use crate::process_lock::{ProcessLock, unwritable};
use crate::schema::{POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, latest_version, migrate_error};

/// How long a call waits for a connection (or for PostgreSQL to come back) before failing.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long SQLite waits on a lock held by a reader checkpointing, before failing.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// SQLite reader connections (the writer is always exactly one).
pub const SQLITE_READERS: u32 = 4;
/// PostgreSQL connections per gateway process.
pub const POSTGRES_CONNECTIONS: u32 = 8;
/// Prepared statements each connection keeps (sqlx's default is 100): the audit trail's
/// `INSERT`s alone come in 35 sizes, and every repository's statements share the writer, so a
/// full cache would re-prepare a large `INSERT` (thousands of placeholders) again and again.
pub const STATEMENT_CACHE_CAPACITY: usize = 256;

/// The connections, per backend.
#[derive(Debug, Clone)]
pub(crate) enum Pools {
    Sqlite {
        writer: SqlitePool,
        readers: SqlitePool,
    },
    Postgres(PgPool),
}

/// Manifold's durable store. Cheap to share by reference; [`Store::close`] waits for writes.
pub struct Store {
    pub(crate) pools: Pools,
    pub(crate) location: StoreLocation,
    /// Secrets to scrub from driver messages (the URL's password).
    pub(crate) scrub: Vec<String>,
    _lock: Option<ProcessLock>,
}

/// Shows where the store is and nothing else: the pools and the scrub list hold the password.
impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) and migrates the store at `location`.
    pub async fn open(location: &StoreLocation) -> Result<Store, StoreError> {
        let store = match location {
            StoreLocation::Sqlite { data_dir } => open_sqlite(location, data_dir, true).await,
            StoreLocation::Postgres { url } => open_postgres(location, url).await,
        }?;
        store.finish_upgrade().await
    }

    /// Opens the store for one short command (`manifold keys`) that may run beside a gateway
    /// holding the store: on SQLite it takes no process lock and relies on SQLite's own locking,
    /// waiting up to [`SQLITE_BUSY_TIMEOUT`] for the gateway's writer. Close it promptly.
    pub async fn open_for_command(location: &StoreLocation) -> Result<Store, StoreError> {
        let store = match location {
            StoreLocation::Sqlite { data_dir } => open_sqlite(location, data_dir, false).await,
            StoreLocation::Postgres { url } => open_postgres(location, url).await,
        }?;
        store.finish_upgrade().await
    }

    /// The part of an upgrade SQL cannot do: rows of the step-2 `audit_events` table join the
    /// audit chain, which needs SHA-256. A store that fails here is closed, so a retry reopens it.
    async fn finish_upgrade(self) -> Result<Store, StoreError> {
        match self.audit().adopt_audit_events().await {
            Ok(()) => Ok(self),
            Err(e) => {
                self.close().await;
                Err(e)
            }
        }
    }

    /// For tests only: caps the SQLite file at its current size plus `extra_pages` pages on the
    /// writer connection (`PRAGMA max_page_count`), so a test can make the disk "full" and see
    /// [`StoreError::Full`]. Lasts until the writer reconnects; does nothing on PostgreSQL.
    #[doc(hidden)]
    pub async fn cap_sqlite_growth_for_tests(&self, extra_pages: u32) -> Result<(), StoreError> {
        let Pools::Sqlite { writer, .. } = &self.pools else {
            return Ok(());
        };
        let capped = async {
            let mut conn = writer.acquire().await?;
            let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
                .fetch_one(&mut *conn)
                .await?;
            let max = pages.saturating_add(i64::from(extra_pages));
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "PRAGMA max_page_count = {max}"
            )))
            .execute(&mut *conn)
            .await
            .map(|_| ())
        };
        capped.await.map_err(|e| self.failed(&e))
    }

    /// Where this store lives.
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// The schema version the database is at.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        let sql = "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success";
        let version: i64 = match &self.pools {
            Pools::Sqlite { readers, .. } => sqlx::query_scalar(sql).fetch_one(readers).await,
            Pools::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        }
        .map_err(|e| self.failed(&e))?;
        Ok(version)
    }

    /// Closes every connection (SQLite checkpoints its WAL) and releases the process lock.
    pub async fn close(self) {
        match &self.pools {
            Pools::Sqlite { writer, readers } => {
                readers.close().await;
                writer.close().await;
            }
            Pools::Postgres(pool) => pool.close().await,
        }
    }

    /// A driver failure during use, named by location and scrubbed of secrets.
    pub(crate) fn failed(&self, e: &sqlx::Error) -> StoreError {
        match (&self.location, &self.pools) {
            (StoreLocation::Sqlite { data_dir }, _) => {
                sqlite_error(&data_dir.join(crate::SQLITE_FILE_NAME), e)
            }
            (StoreLocation::Postgres { .. }, _) => {
                let location = self.location.shown();
                let reason = scrubbed(&e.to_string(), &self.scrub);
                match e {
                    sqlx::Error::Database(db)
                        if db.code().as_deref() == Some(POSTGRES_DISK_FULL) =>
                    {
                        StoreError::Full { location, reason }
                    }
                    _ => StoreError::Unavailable { location, reason },
                }
            }
        }
    }
}

async fn open_sqlite(
    location: &StoreLocation,
    data_dir: &Path,
    take_process_lock: bool,
) -> Result<Store, StoreError> {
    std::fs::create_dir_all(data_dir).map_err(|e| unwritable(data_dir, &e))?;
    probe_writable(data_dir)?;
    let file = data_dir.join(crate::SQLITE_FILE_NAME);
    let lock = if take_process_lock {
        Some(ProcessLock::acquire(data_dir, &file)?)
    } else {
        None
    };
    let options = SqliteConnectOptions::new()
        .filename(&file)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // FULL: a write acknowledged to a caller survives a power cut, not only a crash.
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(SQLITE_BUSY_TIMEOUT)
        .foreign_keys(true)
        .statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    let writer = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options.clone())
        .await
        .map_err(|e| sqlite_error(&file, &e))?;
    let shown = location.shown();
    if let Err(e) = SQLITE_MIGRATIONS.run(&writer).await {
        let newest = newest_applied_sqlite(&writer).await;
        writer.close().await;
        return Err(match e {
            sqlx::migrate::MigrateError::Execute(inner)
            | sqlx::migrate::MigrateError::ExecuteMigration(inner, _) => {
                sqlite_error(&file, &inner)
            }
            other => migrate_error(other, &shown, latest_version(&SQLITE_MIGRATIONS), newest),
        });
    }
    let readers = SqlitePoolOptions::new()
        .max_connections(SQLITE_READERS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options.read_only(true))
        .await
        .map_err(|e| sqlite_error(&file, &e))?;
    Ok(Store {
        pools: Pools::Sqlite { writer, readers },
        location: location.clone(),
        scrub: Vec::new(),
        _lock: lock,
    })
}

/// Proves the directory takes new files before anything else is tried, so a read-only data dir
/// is reported as that rather than as a SQLite failure halfway through.
fn probe_writable(data_dir: &Path) -> Result<(), StoreError> {
    let probe = data_dir.join(format!(".store-write-probe-{}", std::process::id()));
    std::fs::File::create(&probe).map_err(|e| unwritable(data_dir, &e))?;
    std::fs::remove_file(&probe).map_err(|e| unwritable(data_dir, &e))
}

async fn newest_applied_sqlite(pool: &SqlitePool) -> Option<i64> {
    let sql = "SELECT MAX(version) FROM _sqlx_migrations";
    sqlx::query_scalar(sql).fetch_one(pool).await.ok().flatten()
}

async fn open_postgres(location: &StoreLocation, url: &str) -> Result<Store, StoreError> {
    let shown = location.shown();
    let parsed = url::Url::parse(url).ok();
    let is_postgres = parsed
        .as_ref()
        .is_some_and(|u| matches!(u.scheme(), "postgres" | "postgresql"));
    let options = match PgConnectOptions::from_str(url) {
        Ok(options) if is_postgres => options,
        _ => return Err(StoreError::NotPostgres { location: shown }),
    };
    let scrub: Vec<String> = parsed
        .and_then(|u| u.password().map(str::to_owned))
        .into_iter()
        .flat_map(|raw| {
            let decoded = url::form_urlencoded::parse(format!("p={raw}").as_bytes())
                .map(|(_, v)| v.into_owned())
                .next();
            [Some(raw), decoded]
        })
        .flatten()
        .filter(|s| !s.is_empty())
        .collect();
    let unavailable = |reason: String| StoreError::Unavailable {
        location: shown.clone(),
        reason: scrubbed(&reason, &scrub),
    };
    let pool = PgPoolOptions::new()
        .max_connections(POSTGRES_CONNECTIONS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options.statement_cache_capacity(STATEMENT_CACHE_CAPACITY))
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    if let Err(e) = POSTGRES_MIGRATIONS.run(&pool).await {
        let sql = "SELECT MAX(version) FROM _sqlx_migrations";
        let newest: Option<i64> = sqlx::query_scalar(sql)
            .fetch_one(&pool)
            .await
            .ok()
            .flatten();
        pool.close().await;
        let known = latest_version(&POSTGRES_MIGRATIONS);
        return Err(match migrate_error(e, &shown, known, newest) {
            StoreError::Migrate { location, reason } => StoreError::Migrate {
                location,
                reason: scrubbed(&reason, &scrub),
            },
            other => other,
        });
    }
    Ok(Store {
        pools: Pools::Postgres(pool),
        location: location.clone(),
        scrub,
        _lock: None,
    })
}

/// SQLite's primary result codes that decide the message (extended codes carry them in the low byte).
const SQLITE_READONLY: i64 = 8;
const SQLITE_CORRUPT: i64 = 11;
const SQLITE_CANTOPEN: i64 = 14;
const SQLITE_NOTADB: i64 = 26;
const SQLITE_FULL: i64 = 13;
/// PostgreSQL's SQLSTATE `disk_full`.
const POSTGRES_DISK_FULL: &str = "53100";

fn sqlite_error(file: &Path, e: &sqlx::Error) -> StoreError {
    let code = match e {
        sqlx::Error::Database(db) => db.code().and_then(|c| c.parse::<i64>().ok()),
        _ => None,
    };
    let reason = e.to_string();
    match code.map(|c| c & 0xff) {
        Some(SQLITE_CORRUPT | SQLITE_NOTADB) => StoreError::Corrupt {
            path: file.to_path_buf(),
            reason,
        },
        Some(SQLITE_FULL) => StoreError::Full {
            location: file.display().to_string(),
            reason,
        },
        Some(SQLITE_READONLY | SQLITE_CANTOPEN) => StoreError::ReadOnly {
            dir: PathBuf::from(data_dir_of(file)),
            reason,
        },
        _ => StoreError::Unavailable {
            location: file.display().to_string(),
            reason,
        },
    }
}

/// `text` with every secret replaced by [`REDACTED_PASSWORD`].
pub(crate) fn scrubbed(text: &str, secrets: &[String]) -> String {
    secrets.iter().fold(text.to_owned(), |t, s| {
        t.replace(s.as_str(), REDACTED_PASSWORD)
    })
}

/// The migrator of a backend, for tests that walk earlier schemas.
pub fn migrator_for(location: &StoreLocation) -> &'static Migrator {
    match location {
        StoreLocation::Sqlite { .. } => &SQLITE_MIGRATIONS,
        StoreLocation::Postgres { .. } => &POSTGRES_MIGRATIONS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_sane() {
        const { assert!(SQLITE_READERS >= 1 && POSTGRES_CONNECTIONS >= 1) };
        assert!(ACQUIRE_TIMEOUT >= Duration::from_secs(1));
        assert!(SQLITE_BUSY_TIMEOUT >= Duration::from_secs(1));
    }

    #[test]
    fn scrubbing_removes_every_secret() {
        let out = scrubbed(
            "auth failed for p@ss and p%40ss",
            &["p@ss".into(), "p%40ss".into()],
        );
        assert_eq!(out, "auth failed for *** and ***");
    }
}
