//! Authored tools in the store: an append-only log of versions per tool name (creation, update,
//! disable, enable, delete, rollback each append one), so that every replica sees the same tools,
//! a gateway restart keeps them, and any earlier version can be shown or rolled back to. This
//! crate keeps the definition as the JSON text it was given; what it means is manifold-authored's.

use crate::api_keys::with_pool;
use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Longest tool name, action or author stored.
pub const MAX_AUTHORED_NAME_LEN: usize = 1024;
/// Largest stored definition (code, schemas and all); manifold-authored's own bounds are lower.
pub const MAX_AUTHORED_DEFINITION_BYTES: usize = 1024 * 1024;
/// Most versions one [`AuthoredTools::history`] returns.
pub const MAX_AUTHORED_HISTORY: usize = 1000;

/// One version of one authored tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthoredToolVersion {
    pub name: String,
    /// 1 for the first version of a name, one more for each row after it.
    pub version: i64,
    /// What made this version: `create`, `update`, `disable`, `enable`, `delete`, `rollback`.
    pub action: String,
    pub definition_json: String,
    /// Who made it: an identity, or `local` when authentication is off.
    pub author: String,
    pub created_at_ms: i64,
    pub enabled: bool,
    pub deleted: bool,
}

/// The `authored_tools` repository.
#[derive(Debug, Clone, Copy)]
pub struct AuthoredTools<'s> {
    store: &'s Store,
}

impl Store {
    /// Authored tools and their versions.
    pub fn authored_tools(&self) -> AuthoredTools<'_> {
        AuthoredTools { store: self }
    }
}

fn check(record: &AuthoredToolVersion) -> Result<(), StoreError> {
    let invalid = |field: &'static str, reason: String| StoreError::Invalid {
        what: "authored tool version",
        field,
        reason,
    };
    for (field, value) in [
        ("name", &record.name),
        ("action", &record.action),
        ("author", &record.author),
    ] {
        if value.is_empty() || value.len() > MAX_AUTHORED_NAME_LEN {
            return Err(invalid(
                field,
                format!("must be 1 to {MAX_AUTHORED_NAME_LEN} bytes"),
            ));
        }
    }
    if record.definition_json.len() > MAX_AUTHORED_DEFINITION_BYTES {
        return Err(invalid(
            "definition_json",
            format!(
                "is {} bytes, more than {MAX_AUTHORED_DEFINITION_BYTES}",
                record.definition_json.len()
            ),
        ));
    }
    if record.version < 1 {
        return Err(invalid("version", "must be 1 or more".to_owned()));
    }
    Ok(())
}

trait VersionRow {
    fn version(&self) -> Result<AuthoredToolVersion, sqlx::Error>;
}

macro_rules! version_row {
    ($row:ty) => {
        impl VersionRow for $row {
            fn version(&self) -> Result<AuthoredToolVersion, sqlx::Error> {
                use sqlx::Row as _;
                let enabled: i64 = self.try_get("enabled")?;
                let deleted: i64 = self.try_get("deleted")?;
                Ok(AuthoredToolVersion {
                    name: self.try_get("name")?,
                    version: self.try_get("version")?,
                    action: self.try_get("action")?,
                    definition_json: self.try_get("definition_json")?,
                    author: self.try_get("author")?,
                    created_at_ms: self.try_get("created_at_ms")?,
                    enabled: enabled != 0,
                    deleted: deleted != 0,
                })
            }
        }
    };
}
version_row!(sqlx::sqlite::SqliteRow);
version_row!(sqlx::postgres::PgRow);

const COLUMNS: &str =
    "name, version, action, definition_json, author, created_at_ms, enabled, deleted";

impl AuthoredTools<'_> {
    /// Appends a version. A version already there (another writer got there first) is refused
    /// with [`StoreError::AlreadyExists`]; nothing is replaced.
    pub async fn append(&self, record: &AuthoredToolVersion) -> Result<(), StoreError> {
        check(record)?;
        let sql = "INSERT INTO authored_tools (name, version, action, definition_json, author, created_at_ms, enabled, deleted) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
        let result = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(&record.name)
            .bind(record.version)
            .bind(&record.action)
            .bind(&record.definition_json)
            .bind(&record.author)
            .bind(record.created_at_ms)
            .bind(i64::from(record.enabled))
            .bind(i64::from(record.deleted))
            .execute(pool)
            .await
            .map(|_| ()));
        result.map_err(|e| match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::AlreadyExists {
                location: self.store.location.shown(),
                what: "this version of the authored tool",
                key: format!("{} v{}", record.name, record.version),
            },
            _ => self.store.failed(&e),
        })
    }

    /// The newest version of every name (deleted ones included), newest change first.
    pub async fn latest(&self) -> Result<Vec<AuthoredToolVersion>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM authored_tools t WHERE version = (SELECT MAX(version) FROM authored_tools m WHERE m.name = t.name) ORDER BY created_at_ms DESC, name"
        );
        let rows = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .fetch_all(pool)
                .await
            {
                Ok(rows) => rows
                    .iter()
                    .map(VersionRow::version)
                    .collect::<Result<Vec<_>, _>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| self.store.failed(&e))
    }

    /// The versions of `name`, newest first, at most `limit` (≤ [`MAX_AUTHORED_HISTORY`]).
    pub async fn history(
        &self,
        name: &str,
        limit: usize,
    ) -> Result<Vec<AuthoredToolVersion>, StoreError> {
        if limit > MAX_AUTHORED_HISTORY {
            return Err(StoreError::OverLimit {
                what: "authored tool versions in one history",
                count: limit as u64,
                max: MAX_AUTHORED_HISTORY as u64,
                fix: "ask for at most MAX_AUTHORED_HISTORY versions",
            });
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM authored_tools WHERE name = $1 ORDER BY version DESC LIMIT $2"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(name)
                .bind(limit)
                .fetch_all(pool)
                .await
            {
                Ok(rows) => rows
                    .iter()
                    .map(VersionRow::version)
                    .collect::<Result<Vec<_>, _>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| self.store.failed(&e))
    }
}
