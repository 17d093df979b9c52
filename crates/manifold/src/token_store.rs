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
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use manifold_store::StoreLocation;
    use manifold_upstream::auth::registration::{
        ClientAuthMethod, ClientOrigin, ClientRegistration,
    };
    use manifold_upstream::auth::token::TokenSet;

    fn credentials(token: &str) -> StoredCredentials {
        StoredCredentials {
            version: STORE_VERSION,
            resource: "https://mcp.example/mcp".to_owned(),
            issuer: "https://as.example".to_owned(),
            token_endpoint: "https://as.example/token".to_owned(),
            client: ClientRegistration {
                issuer: "https://as.example".to_owned(),
                client_id: "c".to_owned(),
                client_secret: None,
                auth_method: ClientAuthMethod::None,
                origin: ClientOrigin::Registered,
                redirect_uris: vec!["http://127.0.0.1:1/callback".to_owned()],
            },
            tokens: TokenSet {
                access_token: token.to_owned(),
                refresh_token: Some("rt".to_owned()),
                expires_at: Some(42),
                scope: None,
                requested_scope: None,
            },
        }
    }

    fn config(data_dir: &Path, extra: &str) -> Config {
        let text = format!(
            "[gateway]\ndata_dir = {}\n{extra}",
            serde_json::to_string(&data_dir.display().to_string()).unwrap()
        );
        Config::from_str(&text, "test.toml").unwrap()
    }

    async fn store_in(data_dir: &Path) -> Arc<Store> {
        Arc::new(Store::open(&StoreLocation::sqlite(data_dir)).await.unwrap())
    }

    #[tokio::test]
    async fn tokens_round_trip_and_the_key_file_is_made_only_to_write() {
        let dir = tempfile_dir("round-trip");
        let store = store_in(&dir).await;
        let tokens = StoreTokens::new(Arc::clone(&store), &config(&dir, "")).unwrap();
        assert_eq!(tokens.load("srv").await.unwrap(), None);
        assert!(!token_key_file(&dir).exists(), "reading made a key");
        tokens.save("srv", &credentials("at-1")).await.unwrap();
        assert!(token_key_file(&dir).exists());
        assert_eq!(tokens.load("srv").await.unwrap(), Some(credentials("at-1")));
        assert!(tokens.describe("srv").contains("store.key"));

        // The key file lost: the rows are reported, not replaced by a new key's garbage.
        std::fs::remove_file(token_key_file(&dir)).unwrap();
        let fresh = StoreTokens::new(Arc::clone(&store), &config(&dir, "")).unwrap();
        let lost = fresh.load("srv").await.unwrap_err().to_string();
        assert!(
            lost.contains("cannot be decrypted with the key from")
                && lost.contains("store.key, which does not exist")
                && lost.contains("run `manifold login srv` again"),
            "{lost}"
        );
        assert!(!token_key_file(&dir).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_configured_key_is_used_and_another_key_is_refused_by_name() {
        let dir = tempfile_dir("configured");
        let store = store_in(&dir).await;
        let key_file = dir.join("token.key");
        std::fs::write(&key_file, format!("{}\n", "cd".repeat(32))).unwrap();
        let with_file = format!(
            "[store]\ntoken_key = {}\n",
            serde_json::to_string(&format!("file:{}", key_file.display())).unwrap()
        );
        let tokens = StoreTokens::new(Arc::clone(&store), &config(&dir, &with_file)).unwrap();
        tokens.save("srv", &credentials("at-2")).await.unwrap();
        assert!(
            !token_key_file(&dir).exists(),
            "a configured key makes no key file"
        );
        assert_eq!(tokens.load("srv").await.unwrap(), Some(credentials("at-2")));
        // Without the configured key, the data dir's (new) key cannot open the row.
        let other = StoreTokens::new(Arc::clone(&store), &config(&dir, "")).unwrap();
        other.save("other", &credentials("at-3")).await.unwrap();
        let wrong = other.load("srv").await.unwrap_err().to_string();
        assert!(
            wrong.contains(&format!(
                "cannot be decrypted with the key from {}",
                token_key_file(&dir).display()
            )),
            "{wrong}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn old_token_files_are_imported_once_and_the_directory_renamed() {
        let dir = tempfile_dir("import");
        let store = store_in(&dir).await;
        let tokens = StoreTokens::new(Arc::clone(&store), &config(&dir, "")).unwrap();
        let files = FileTokenStore::new(old_token_dir(&dir));
        files
            .save("fresh", &credentials("from-file"))
            .await
            .unwrap();
        files.save("kept", &credentials("older")).await.unwrap();
        std::fs::write(files.path("junk"), "not json").unwrap();
        tokens.save("kept", &credentials("newer")).await.unwrap();

        let report = import_token_files(&dir, &tokens).await.unwrap().unwrap();
        assert_eq!(report.imported, ["fresh"]);
        assert_eq!(report.already_present, ["kept"]);
        assert_eq!(report.unreadable, ["junk"]);
        assert_eq!(report.renamed_to, dir.join("oauth.imported"));
        assert!(!old_token_dir(&dir).exists());
        assert!(dir.join("oauth.imported/fresh.json").exists());
        assert_eq!(
            tokens.load("fresh").await.unwrap(),
            Some(credentials("from-file"))
        );
        assert_eq!(
            tokens.load("kept").await.unwrap(),
            Some(credentials("newer")),
            "an import never replaces what the store has"
        );
        let line = describe_import(&report);
        assert!(
            line.contains("Imported the OAuth tokens of 1 server(s)")
                && line.contains("1 already there (kept)")
                && line.contains("1 unreadable and not imported (junk")
                && line.contains("oauth.imported."),
            "{line}"
        );

        // A second run imports nothing; a directory an older Manifold made again gets a new name.
        assert_eq!(import_token_files(&dir, &tokens).await.unwrap(), None);
        files.save("again", &credentials("x")).await.unwrap();
        let second = import_token_files(&dir, &tokens).await.unwrap().unwrap();
        assert_eq!(second.imported, ["again"]);
        assert_eq!(second.renamed_to, dir.join("oauth.imported.2"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "manifold-token-store-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn renaming_gives_up_after_the_numbered_names_and_says_so() {
        let dir = tempfile_dir("names");
        let old = old_token_dir(&dir);
        std::fs::create_dir_all(&old).unwrap();
        std::fs::create_dir_all(dir.join("oauth.imported")).unwrap();
        for n in 2..MAX_IMPORTED_NAMES {
            std::fs::create_dir_all(dir.join(format!("oauth.imported.{n}"))).unwrap();
        }
        let last = retire(&old).unwrap();
        assert_eq!(
            last,
            dir.join(format!("oauth.imported.{MAX_IMPORTED_NAMES}"))
        );
        std::fs::create_dir_all(&old).unwrap();
        let refused = retire(&old).unwrap_err();
        assert!(
            refused.contains("100 numbered names after it are all taken"),
            "{refused}"
        );
        assert!(old.exists(), "nothing was renamed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
