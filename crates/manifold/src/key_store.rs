//! API keys in Manifold's store: the binary backs manifold-auth's `KeyRepository` with
//! manifold-store, so the auth crate needs no database driver. `serve` opens the store for its
//! life (on SQLite holding the process lock that refuses a second gateway); `keys` and `check`
//! open it briefly without that lock, relying on SQLite's own locking and busy timeout, so they
//! work while a gateway runs. Each of them first imports an old `api-keys.json`, once.

use std::sync::Arc;

use manifold_auth::{
    ApiKeyFile, ApiKeys, ImportReport, KeyRecord, KeyRepository, KeyStoreError, RepositoryFuture,
};
use manifold_config::Config;
use manifold_store::{ApiKeyRecord, Store, StoreError, StoreLocation};

use crate::report::CliError;

/// Milliseconds per second, between the auth crate's seconds and the store's milliseconds.
const MS_PER_SECOND: i64 = 1000;

/// The store's API key table, as manifold-auth sees it.
pub struct StoreKeys {
    store: Arc<Store>,
}

impl StoreKeys {
    pub fn new(store: Arc<Store>) -> StoreKeys {
        StoreKeys { store }
    }
}

fn to_row(k: &KeyRecord) -> ApiKeyRecord {
    let ms = |secs: u64| i64::try_from(secs).unwrap_or(i64::MAX / MS_PER_SECOND) * MS_PER_SECOND;
    ApiKeyRecord {
        id: k.id.clone(),
        name: k.name.clone(),
        principal: k.name.clone(),
        key_sha256: k.secret_sha256.clone(),
        created_at_ms: ms(k.created),
        revoked_at_ms: k.revoked.map(ms),
        scopes: k.scopes.clone(),
        groups: k.groups.clone(),
    }
}

fn from_row(r: ApiKeyRecord) -> KeyRecord {
    let secs = |ms: i64| u64::try_from(ms / MS_PER_SECOND).unwrap_or(0);
    KeyRecord {
        id: r.id,
        name: r.name,
        secret_sha256: r.key_sha256,
        scopes: r.scopes,
        groups: r.groups,
        created: secs(r.created_at_ms),
        revoked: r.revoked_at_ms.map(secs),
    }
}

fn store_failed(e: &StoreError) -> KeyStoreError {
    KeyStoreError::Store(e.to_string())
}

impl KeyRepository for StoreKeys {
    fn all(&self) -> RepositoryFuture<'_, Vec<KeyRecord>> {
        Box::pin(async move {
            let rows = self.store.api_keys().list().await;
            rows.map(|rows| rows.into_iter().map(from_row).collect())
                .map_err(|e| store_failed(&e))
        })
    }

    fn add<'a>(&'a self, record: &'a KeyRecord) -> RepositoryFuture<'a, ()> {
        Box::pin(async move {
            match self.store.api_keys().insert(&to_row(record)).await {
                Ok(()) => Ok(()),
                // The id is fresh (checked by the caller), so a clash is the one-active-name rule.
                Err(StoreError::AlreadyExists { .. }) => {
                    Err(KeyStoreError::NameTaken(record.name.clone()))
                }
                Err(e) => Err(store_failed(&e)),
            }
        })
    }

    fn revoke<'a>(&'a self, id: &'a str, at: u64) -> RepositoryFuture<'a, bool> {
        Box::pin(async move {
            let at_ms = i64::try_from(at).unwrap_or(i64::MAX / MS_PER_SECOND) * MS_PER_SECOND;
            self.store
                .api_keys()
                .revoke(id, at_ms)
                .await
                .map_err(|e| store_failed(&e))
        })
    }

    fn describe(&self) -> String {
        format!("the store ({})", self.store.location().shown())
    }
}

/// Where the configuration keeps its store.
pub fn location(config: &Config) -> StoreLocation {
    match &config.store.url {
        Some(url) => StoreLocation::postgres(url.clone()),
        None => StoreLocation::sqlite(config.gateway.data_dir.clone()),
    }
}

fn open_failed(e: &StoreError) -> CliError {
    CliError::usage(format!("cannot open the store: {e}"))
}

/// The store for a gateway's life (on SQLite, the one process allowed).
pub async fn open_for_gateway(config: &Config) -> Result<Arc<Store>, CliError> {
    Store::open(&location(config))
        .await
        .map(Arc::new)
        .map_err(|e| open_failed(&e))
}

/// The store for one short command beside a running gateway.
pub async fn open_for_command(config: &Config) -> Result<Arc<Store>, CliError> {
    Store::open_for_command(&location(config))
        .await
        .map(Arc::new)
        .map_err(|e| open_failed(&e))
}

/// Closes a store opened here once nothing else holds it (SQLite checkpoints its WAL).
pub async fn close(store: Arc<Store>) {
    if let Ok(store) = Arc::try_unwrap(store) {
        store.close().await;
    }
}

/// Imports `data_dir/api-keys.json` into the store if it is still there, and says so on stderr.
pub async fn import_old_file(
    config: &Config,
    keys: &ApiKeys,
) -> Result<Option<ImportReport>, CliError> {
    let file = ApiKeyFile::in_dir(&config.gateway.data_dir);
    let report = keys.import(&file).await.map_err(|e| {
        CliError::with_hint(
            format!(
                "could not import the API keys of {}: {e}",
                file.path().display()
            ),
            "fix or move the file away, then start again; nothing was renamed",
        )
    })?;
    if let Some(r) = &report {
        eprintln!("{}", describe_import(&file, r));
    }
    Ok(report)
}

/// One line saying what an import did.
pub fn describe_import(file: &ApiKeyFile, r: &ImportReport) -> String {
    let names = |n: &[String]| {
        if n.is_empty() {
            "none".to_owned()
        } else {
            n.join(", ")
        }
    };
    format!(
        "Imported {} API key(s) from {} into the store ({}); {} already there ({}); the old file is now {}.",
        r.imported.len(),
        file.path().display(),
        names(&r.imported),
        r.already_present.len(),
        names(&r.already_present),
        r.renamed_to.display()
    )
}

/// The keys over `store`.
pub fn api_keys(store: &Arc<Store>) -> ApiKeys {
    ApiKeys::new(Arc::new(StoreKeys::new(Arc::clone(store))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_the_round_trip_through_store_rows() {
        let record = KeyRecord {
            id: "0123456789abcdef".to_owned(),
            name: "alice".to_owned(),
            secret_sha256: "a".repeat(64),
            scopes: vec!["mcp".to_owned()],
            groups: vec!["ops".to_owned()],
            created: 1_700_000_000,
            revoked: Some(1_700_000_005),
        };
        assert_eq!(from_row(to_row(&record)), record);
        assert_eq!(MS_PER_SECOND, 1000);
    }
}
