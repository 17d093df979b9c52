//! Upstream OAuth tokens in Manifold's store: the binary backs manifold-upstream's `TokenStore`
//! with manifold-store, so the upstream crate needs no database driver, and every token set is
//! sealed (AES-256-GCM) before it reaches the database. The key is `[store] token_key` when the
//! configuration names one (replicas sharing a PostgreSQL need the same key) and otherwise
//! `store.key` in `data_dir`, made on first need: reading tokens never makes a key, so a lost key
//! is reported rather than silently replaced.
//!
//! `serve`, `stdio`, `login` and `check` import the token files earlier versions kept in
//! `data_dir/oauth` once: each file's tokens are stored unless the store has newer ones for that
//! server, then the directory is renamed `oauth.imported`.

use manifold_store::timestamps::now_ms;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use manifold_config::Config;
use manifold_store::{Store, StoreError, TokenKey, token_key_file};
use manifold_upstream::auth::store::STORE_VERSION;
use manifold_upstream::auth::{
    AuthError, FileTokenStore, StoredCredentials, TOKEN_STORE_DIR, TokenStore, TokenStoreFuture,
};

use crate::report::CliError;

/// Added to the old token directory's name once imported.
pub const IMPORTED_SUFFIX: &str = ".imported";
/// Numbered names tried when `oauth.imported` is taken (an older Manifold ran again since).
pub const MAX_IMPORTED_NAMES: u32 = 100;

/// Where the key comes from.
enum KeySource {
    /// `[store] token_key`.
    Configured(Arc<TokenKey>),
    /// `data_dir/store.key`, read (or made) on first need.
    DataDir {
        dir: PathBuf,
        key: OnceLock<Arc<TokenKey>>,
    },
}

/// The store's `oauth_tokens` table, as manifold-upstream sees it.
pub struct StoreTokens {
    store: Arc<Store>,
    key: KeySource,
}

fn store_failed(e: &StoreError) -> AuthError {
    AuthError::TokenStore {
        detail: e.to_string(),
    }
}

impl StoreTokens {
    /// Tokens in `store`, sealed with the configuration's key (or `store.key` in `data_dir`).
    pub fn new(store: Arc<Store>, config: &Config) -> Result<StoreTokens, CliError> {
        let key = match &config.store.token_key {
            Some(k) => {
                let key = TokenKey::from_bytes(k.key.expose(), k.source.clone())
                    .map_err(|e| CliError::usage(e.to_string()))?;
                KeySource::Configured(Arc::new(key))
            }
            None => KeySource::DataDir {
                dir: config.gateway.data_dir.clone(),
                key: OnceLock::new(),
            },
        };
        Ok(StoreTokens { store, key })
    }

    /// Where the key is, as messages name it.
    pub fn key_source(&self) -> String {
        match &self.key {
            KeySource::Configured(k) => k.source().to_owned(),
            KeySource::DataDir { dir, .. } => token_key_file(dir).display().to_string(),
        }
    }

    /// The key for opening rows: never made here, so rows sealed with a lost key are reported.
    fn key_for_reading(&self, server: &str) -> Result<Arc<TokenKey>, StoreError> {
        match &self.key {
            KeySource::Configured(k) => Ok(Arc::clone(k)),
            KeySource::DataDir { dir, key } => {
                if let Some(k) = key.get() {
                    return Ok(Arc::clone(k));
                }
                match TokenKey::load_existing(dir)? {
                    Some(found) => Ok(Arc::clone(key.get_or_init(|| Arc::new(found)))),
                    None => Err(StoreError::Undecryptable {
                        server: server.to_owned(),
                        key_source: format!(
                            "{}, which does not exist",
                            token_key_file(dir).display()
                        ),
                    }),
                }
            }
        }
    }

    /// The key for sealing rows, made in `data_dir` when there is none yet.
    fn key_for_writing(&self) -> Result<Arc<TokenKey>, StoreError> {
        match &self.key {
            KeySource::Configured(k) => Ok(Arc::clone(k)),
            KeySource::DataDir { dir, key } => {
                if let Some(k) = key.get() {
                    return Ok(Arc::clone(k));
                }
                let made = TokenKey::load_or_create(dir)?;
                Ok(Arc::clone(key.get_or_init(|| Arc::new(made))))
            }
        }
    }

    /// Seals and stores `credentials` for `server` unless the store has tokens for it already;
    /// true when stored.
    async fn import_one(
        &self,
        server: &str,
        credentials: &StoredCredentials,
    ) -> Result<bool, StoreError> {
        let sealed = self.seal(server, credentials)?;
        self.store.oauth_tokens().insert_new(&sealed).await
    }

    fn seal(
        &self,
        server: &str,
        credentials: &StoredCredentials,
    ) -> Result<manifold_store::SealedTokens, StoreError> {
        let plaintext = serde_json::to_vec(credentials).map_err(|e| StoreError::Seal {
            server: server.to_owned(),
            reason: e.to_string(),
        })?;
        self.key_for_writing()?.seal(server, &plaintext, now_ms())
    }

    /// The credentials of `server`, with the store's own error.
    pub async fn read(&self, server: &str) -> Result<Option<StoredCredentials>, StoreError> {
        let Some(sealed) = self.store.oauth_tokens().get(server).await? else {
            return Ok(None);
        };
        let plaintext = self.key_for_reading(server)?.open(&sealed)?;
        match serde_json::from_slice::<StoredCredentials>(&plaintext) {
            Ok(c) if c.version == STORE_VERSION => Ok(Some(c)),
            Ok(c) => {
                tracing::warn!(
                    server,
                    version = c.version,
                    "stored credentials of another format version are ignored; run manifold login again"
                );
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(server, error = %e, "stored credentials are unreadable and ignored; run manifold login again");
                Ok(None)
            }
        }
    }
}

impl TokenStore for StoreTokens {
    fn load<'a>(&'a self, server: &'a str) -> TokenStoreFuture<'a, Option<StoredCredentials>> {
        Box::pin(async move { self.read(server).await.map_err(|e| store_failed(&e)) })
    }

    fn save<'a>(
        &'a self,
        server: &'a str,
        credentials: &'a StoredCredentials,
    ) -> TokenStoreFuture<'a, ()> {
        Box::pin(async move {
            let sealed = self
                .seal(server, credentials)
                .map_err(|e| store_failed(&e))?;
            self.store
                .oauth_tokens()
                .put(&sealed)
                .await
                .map_err(|e| store_failed(&e))
        })
    }

    fn describe(&self, _server: &str) -> String {
        format!(
            "the store ({}), sealed with the key from {}",
            self.store.location().shown(),
            self.key_source()
        )
    }
}

/// What importing the old token directory did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenImport {
    /// The directory imported.
    pub dir: PathBuf,
    /// Servers whose tokens were stored.
    pub imported: Vec<String>,
    /// Servers the store had tokens for already (kept: they may be newer).
    pub already_present: Vec<String>,
    /// Servers whose files were unreadable or of another format (left in the renamed directory).
    pub unreadable: Vec<String>,
    /// Where the directory was moved.
    pub renamed_to: PathBuf,
}

/// The old token directory of a data directory.
pub fn old_token_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_STORE_DIR)
}

/// Imports `data_dir/oauth` into the store if it is still there, then renames it. Idempotent: a
/// second run finds no directory; a run cut short before the rename stores nothing twice.
pub async fn import_token_files(
    data_dir: &Path,
    tokens: &StoreTokens,
) -> Result<Option<TokenImport>, CliError> {
    let dir = old_token_dir(data_dir);
    if !dir.is_dir() {
        return Ok(None);
    }
    let failed = |what: String| {
        CliError::with_hint(
            format!(
                "could not import the OAuth tokens of {}: {what}",
                dir.display()
            ),
            "fix the cause (or move the directory away), then start again; nothing was renamed",
        )
    };
    let entries = FileTokenStore::new(&dir)
        .entries()
        .map_err(|e| failed(e.to_string()))?;
    let mut report = TokenImport {
        dir: dir.clone(),
        imported: Vec::new(),
        already_present: Vec::new(),
        unreadable: Vec::new(),
        renamed_to: PathBuf::new(),
    };
    for entry in entries {
        let Some(credentials) = &entry.credentials else {
            report.unreadable.push(entry.server);
            continue;
        };
        let stored = tokens
            .import_one(&entry.server, credentials)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if stored {
            report.imported.push(entry.server);
        } else {
            report.already_present.push(entry.server);
        }
    }
    report.renamed_to = retire(&dir).map_err(failed)?;
    Ok(Some(report))
}

/// Renames the imported directory to `<dir>.imported` (or `.imported.2`, ... when taken).
fn retire(dir: &Path) -> Result<PathBuf, String> {
    let base = format!("{}{IMPORTED_SUFFIX}", dir.display());
    for n in 1..=MAX_IMPORTED_NAMES {
        let to = if n == 1 {
            PathBuf::from(&base)
        } else {
            PathBuf::from(format!("{base}.{n}"))
        };
        if to.exists() {
            continue;
        }
        return std::fs::rename(dir, &to)
            .map(|()| to.clone())
            .map_err(|e| format!("could not rename it to {}: {e}", to.display()));
    }
    Err(format!(
        "{base} and {MAX_IMPORTED_NAMES} numbered names after it are all taken; remove the old ones"
    ))
}

/// One line saying what an import did.
pub fn describe_import(r: &TokenImport) -> String {
    let names = |n: &[String]| {
        if n.is_empty() {
            "none".to_owned()
        } else {
            n.join(", ")
        }
    };
    let mut line = format!(
        "Imported the OAuth tokens of {} server(s) from {} into the store ({}); {} already there ({})",
        r.imported.len(),
        r.dir.display(),
        names(&r.imported),
        r.already_present.len(),
        names(&r.already_present),
    );
    if !r.unreadable.is_empty() {
        line.push_str(&format!(
            "; {} unreadable and not imported ({}: run manifold login for each)",
            r.unreadable.len(),
            names(&r.unreadable)
        ));
    }
    line.push_str(&format!(
        "; the old directory is now {}.",
        r.renamed_to.display()
    ));
    line
}

/// The tokens over `store` for `config`, with the old token directory imported first (said on
/// stderr, as the key import is).
pub async fn open(config: &Config, store: &Arc<Store>) -> Result<Arc<StoreTokens>, CliError> {
    let tokens = StoreTokens::new(Arc::clone(store), config)?;
    if let Some(report) = import_token_files(&config.gateway.data_dir, &tokens).await? {
        eprintln!("{}", describe_import(&report));
    }
    Ok(Arc::new(tokens))
}

#[cfg(test)]
mod tests;
