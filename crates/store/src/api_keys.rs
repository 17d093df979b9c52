//! API keys in the store: only a digest of a key's secret is kept, so a copy of the database does
//! not grant access. `manifold keys` writes here and the inbound authenticator reads here.

use sqlx::Row;

use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Longest name, principal, id, scope or group accepted.
pub const MAX_API_KEY_FIELD_LEN: usize = 256;
/// Most scopes, and most groups, one key may carry.
pub const MAX_API_KEY_GRANTS: usize = 64;

/// One key as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    pub id: String,
    pub name: String,
    /// Who calls with this key (what `[[rules]]` match).
    pub principal: String,
    /// Lowercase hex SHA-256 of the key's secret.
    pub key_sha256: String,
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
    /// Scopes the key grants (stored as a JSON array).
    pub scopes: Vec<String>,
    /// Groups the key's caller belongs to (stored as a JSON array).
    pub groups: Vec<String>,
}

/// Reads a JSON array of strings column.
fn string_list(row: &impl RowLike, column: &str) -> Result<Vec<String>, sqlx::Error> {
    let text = row.text(column)?;
    serde_json::from_str(&text).map_err(|e| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(e),
    })
}

fn check_grants(field: &'static str, items: &[String]) -> Result<(), StoreError> {
    let invalid = |reason: String| StoreError::Invalid {
        what: "API key",
        field,
        reason,
    };
    if items.len() > MAX_API_KEY_GRANTS {
        return Err(invalid(format!(
            "has more than {MAX_API_KEY_GRANTS} entries"
        )));
    }
    if items
        .iter()
        .any(|i| i.is_empty() || i.len() > MAX_API_KEY_FIELD_LEN)
    {
        return Err(invalid(format!(
            "entries must be 1 to {MAX_API_KEY_FIELD_LEN} bytes"
        )));
    }
    Ok(())
}

/// The `api_keys` repository.
#[derive(Debug, Clone, Copy)]
pub struct ApiKeys<'s> {
    store: &'s Store,
}

impl Store {
    /// The API keys repository.
    pub fn api_keys(&self) -> ApiKeys<'_> {
        ApiKeys { store: self }
    }
}

fn record(row: &impl RowLike) -> Result<ApiKeyRecord, sqlx::Error> {
    Ok(ApiKeyRecord {
        id: row.text("id")?,
        name: row.text("name")?,
        principal: row.text("principal")?,
        key_sha256: row.text("key_sha256")?,
        created_at_ms: row.int("created_at_ms")?,
        revoked_at_ms: row.opt_int("revoked_at_ms")?,
        scopes: string_list(row, "scopes_json")?,
        groups: string_list(row, "groups_json")?,
    })
}

/// The columns both backends' rows give the same way.
pub(crate) trait RowLike {
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
    fn opt_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error>;
}

macro_rules! row_like {
    ($row:ty) => {
        impl RowLike for $row {
            fn text(&self, column: &str) -> Result<String, sqlx::Error> {
                self.try_get(column)
            }
            fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
                self.try_get(column)
            }
            fn opt_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error> {
                self.try_get(column)
            }
        }
    };
}
row_like!(sqlx::sqlite::SqliteRow);
row_like!(sqlx::postgres::PgRow);

/// Runs `$body` with `$pool` bound to the backend's pool for writes (`writer`) or reads (`readers`).
macro_rules! with_pool {
    ($store:expr, $kind:ident, |$pool:ident| $body:expr) => {
        match &$store.pools {
            Pools::Sqlite { $kind: $pool, .. } => $body,
            Pools::Postgres($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

impl ApiKeys<'_> {
    /// Adds a key; an id or hash already present, or a name an active key has, is refused.
    pub async fn insert(&self, key: &ApiKeyRecord) -> Result<(), StoreError> {
        for (field, value) in [
            ("id", &key.id),
            ("name", &key.name),
            ("principal", &key.principal),
        ] {
            if value.is_empty() || value.len() > MAX_API_KEY_FIELD_LEN {
                return Err(StoreError::Invalid {
                    what: "API key",
                    field,
                    reason: format!("must be 1 to {MAX_API_KEY_FIELD_LEN} bytes"),
                });
            }
        }
        check_grants("scopes", &key.scopes)?;
        check_grants("groups", &key.groups)?;
        let json = |items: &[String]| serde_json::Value::from(items.to_vec()).to_string();
        let (scopes, groups) = (json(&key.scopes), json(&key.groups));
        let sql = "INSERT INTO api_keys (id, name, principal, key_sha256, created_at_ms, revoked_at_ms, scopes_json, groups_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
        let result = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(&key.id)
            .bind(&key.name)
            .bind(&key.principal)
            .bind(&key.key_sha256)
            .bind(key.created_at_ms)
            .bind(key.revoked_at_ms)
            .bind(&scopes)
            .bind(&groups)
            .execute(pool)
            .await
            .map(|_| ()));
        result.map_err(|e| match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::AlreadyExists {
                location: self.store.location.shown(),
                what: "an API key with this id, hash or active name",
                key: key.id.clone(),
            },
            _ => self.store.failed(&e),
        })
    }

    /// The key whose SHA-256 is `key_sha256`, revoked or not.
    pub async fn find_by_hash(&self, key_sha256: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        let sql = "SELECT id, name, principal, key_sha256, created_at_ms, revoked_at_ms, scopes_json, groups_json FROM api_keys WHERE key_sha256 = $1";
        let found = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sql).bind(key_sha256).fetch_optional(pool).await {
                Ok(Some(row)) => record(&row).map(Some),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        });
        found.map_err(|e| self.store.failed(&e))
    }

    /// Every key, oldest first.
    pub async fn list(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let sql = "SELECT id, name, principal, key_sha256, created_at_ms, revoked_at_ms, scopes_json, groups_json FROM api_keys ORDER BY created_at_ms, id";
        let rows = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sql).fetch_all(pool).await {
                Ok(rows) => rows.iter().map(record).collect::<Result<Vec<_>, _>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| self.store.failed(&e))
    }

    /// Marks a key revoked at `at_ms`; false when no unrevoked key has this id.
    pub async fn revoke(&self, id: &str, at_ms: i64) -> Result<bool, StoreError> {
        let sql = "UPDATE api_keys SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms IS NULL";
        let changed = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(at_ms)
            .bind(id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()));
        changed.map(|n| n > 0).map_err(|e| self.store.failed(&e))
    }
}
