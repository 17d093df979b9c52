//! Where credentials outlive the process, so that `manifold login` in one process and the gateway
//! in another share tokens, and refreshed tokens survive restarts. [`TokenStore`] is the seam: the
//! `manifold` binary backs it with its store (tokens sealed at rest), keeping this crate free of
//! a database; [`FileTokenStore`] is the older layout (one JSON file per server under the data
//! directory, owner-only, replaced atomically), kept for tests and for importing those files.
//!
//! The trait is asynchronous because it is called from the OAuth flow's async code and a store
//! answers over the network; the file store does its small reads and writes inline.
//!
//! A stored record names the resource and the authorization server it belongs to; a record for
//! another resource or issuer is never used (the configuration may have changed since).

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use super::error::AuthError;
use super::registration::ClientRegistration;
use super::token::TokenSet;

/// The format version written; others are ignored (and replaced at the next login).
pub const STORE_VERSION: u32 = 1;

/// What is kept for one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCredentials {
    pub version: u32,
    /// The `resource` the tokens were issued for.
    pub resource: String,
    /// The issuer that issued them.
    pub issuer: String,
    pub token_endpoint: String,
    pub client: ClientRegistration,
    pub tokens: TokenSet,
}

/// What a [`TokenStore`] call returns.
pub type TokenStoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, AuthError>> + Send + 'a>>;

/// Persistence for credentials, by server name.
pub trait TokenStore: Send + Sync + 'static {
    /// The server's credentials; `None` when there are none, or none of this format version.
    fn load<'a>(&'a self, server: &'a str) -> TokenStoreFuture<'a, Option<StoredCredentials>>;
    /// Replaces the server's credentials.
    fn save<'a>(
        &'a self,
        server: &'a str,
        credentials: &'a StoredCredentials,
    ) -> TokenStoreFuture<'a, ()>;
    /// Where the credentials are kept, for messages.
    fn describe(&self, server: &str) -> String;
}

/// One file found by [`FileTokenStore::entries`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFile {
    /// The server it belongs to (decoded from the file name).
    pub server: String,
    pub path: PathBuf,
    /// Its credentials; `None` when unreadable or of another format version.
    pub credentials: Option<StoredCredentials>,
}

/// One file per server in a directory created with mode 0700; files with mode 0600.
#[derive(Debug, Clone)]
pub struct FileTokenStore {
    dir: PathBuf,
}

impl FileTokenStore {
    pub fn new(dir: impl Into<PathBuf>) -> FileTokenStore {
        FileTokenStore { dir: dir.into() }
    }

    /// The file for a server; names outside `[A-Za-z0-9_-]` are hex-encoded so that no name
    /// can reach outside the directory.
    pub fn path(&self, server: &str) -> PathBuf {
        let plain = !server.is_empty()
            && server
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let stem = if plain {
            server.to_owned()
        } else {
            let hex: String = server.bytes().map(|b| format!("{b:02x}")).collect();
            format!("x-{hex}")
        };
        self.dir.join(format!("{stem}.json"))
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server a file name stands for (the inverse of [`FileTokenStore::path`]); `None` for
    /// files this store did not name.
    pub fn server_of(file_name: &str) -> Option<String> {
        let stem = file_name.strip_suffix(".json")?;
        match stem.strip_prefix("x-") {
            Some(hex) if hex.len() % 2 == 0 && !hex.is_empty() => {
                let bytes: Option<Vec<u8>> = (0..hex.len() / 2)
                    .map(|i| {
                        hex.get(i * 2..i * 2 + 2)
                            .and_then(|p| u8::from_str_radix(p, 16).ok())
                    })
                    .collect();
                String::from_utf8(bytes?).ok()
            }
            _ => (!stem.is_empty()
                && stem
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .then(|| stem.to_owned()),
        }
    }

    /// Every server's file in the directory, by server name (none when the directory is absent).
    pub fn entries(&self) -> Result<Vec<TokenFile>, AuthError> {
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(store_error(&self.dir, "listed", e)),
        };
        let mut found = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|e| store_error(&self.dir, "listed", e))?;
            let name = entry.file_name();
            let Some(server) = name.to_str().and_then(FileTokenStore::server_of) else {
                continue;
            };
            let credentials = self.load_now(&server)?;
            found.push(TokenFile {
                path: self.path(&server),
                server,
                credentials,
            });
        }
        found.sort_by(|a, b| a.server.cmp(&b.server));
        Ok(found)
    }

    fn load_now(&self, server: &str) -> Result<Option<StoredCredentials>, AuthError> {
        let path = self.path(server);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(store_error(&path, "read", e)),
        };
        match serde_json::from_str::<StoredCredentials>(&text) {
            Ok(c) if c.version == STORE_VERSION => Ok(Some(c)),
            Ok(c) => {
                tracing::warn!(path = %path.display(), version = c.version, "stored credentials of another format version are ignored");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "stored credentials are unreadable and ignored; run manifold login again");
                Ok(None)
            }
        }
    }

    fn save_now(&self, server: &str, credentials: &StoredCredentials) -> Result<(), AuthError> {
        let path = self.path(server);
        create_private_dir(&self.dir).map_err(|e| store_error(&self.dir, "stored", e))?;
        let text = serde_json::to_string_pretty(credentials)
            .map_err(|e| store_error(&path, "stored", e))?;
        let tmp = path.with_extension(format!("json.tmp-{}", std::process::id()));
        let written =
            write_private(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(store_error(&path, "stored", e));
        }
        Ok(())
    }
}

fn store_error(path: &Path, action: &str, e: impl std::fmt::Display) -> AuthError {
    AuthError::Store {
        path: path.display().to_string(),
        action: action.to_owned(),
        detail: e.to_string(),
    }
}

impl TokenStore for FileTokenStore {
    fn load<'a>(&'a self, server: &'a str) -> TokenStoreFuture<'a, Option<StoredCredentials>> {
        Box::pin(async move { self.load_now(server) })
    }

    fn save<'a>(
        &'a self,
        server: &'a str,
        credentials: &'a StoredCredentials,
    ) -> TokenStoreFuture<'a, ()> {
        Box::pin(async move { self.save_now(server, credentials) })
    }

    fn describe(&self, server: &str) -> String {
        self.path(server).display().to_string()
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir)
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::auth::registration::{ClientAuthMethod, ClientOrigin};

    fn sample() -> StoredCredentials {
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
                access_token: "at".to_owned(),
                refresh_token: Some("rt".to_owned()),
                expires_at: Some(42),
                scope: Some("a".to_owned()),
                requested_scope: Some("a".to_owned()),
            },
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "manifold-token-store-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[tokio::test]
    async fn credentials_round_trip_through_a_private_file() {
        let dir = temp_dir("round-trip");
        let store = FileTokenStore::new(dir.join("oauth"));
        assert_eq!(store.load("srv").await.unwrap(), None);
        store.save("srv", &sample()).await.unwrap();
        assert_eq!(store.load("srv").await.unwrap(), Some(sample()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let file = std::fs::metadata(store.path("srv")).unwrap();
            assert_eq!(file.permissions().mode() & 0o777, 0o600);
            let d = std::fs::metadata(dir.join("oauth")).unwrap();
            assert_eq!(d.permissions().mode() & 0o777, 0o700);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn names_cannot_escape_the_directory_and_junk_is_ignored() {
        let dir = temp_dir("names");
        let store = FileTokenStore::new(&dir);
        assert_eq!(store.path("ok_name-1"), dir.join("ok_name-1.json"));
        assert_eq!(store.path("../x"), dir.join("x-2e2e2f78.json"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(store.path("junk"), "not json").unwrap();
        assert_eq!(store.load("junk").await.unwrap(), None);
        let mut old = sample();
        old.version = 99;
        std::fs::write(store.path("old"), serde_json::to_string(&old).unwrap()).unwrap();
        assert_eq!(store.load("old").await.unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn entries_name_each_server_including_encoded_ones() {
        let dir = temp_dir("entries");
        let store = FileTokenStore::new(&dir);
        assert!(
            store.entries().unwrap().is_empty(),
            "an absent directory has none"
        );
        store.save("plain", &sample()).await.unwrap();
        store.save("odd name/..", &sample()).await.unwrap();
        std::fs::write(store.path("junk"), "not json").unwrap();
        std::fs::write(dir.join("notes.txt"), "not a token file").unwrap();
        let entries = store.entries().unwrap();
        let servers: Vec<&str> = entries.iter().map(|e| e.server.as_str()).collect();
        assert_eq!(servers, ["junk", "odd name/..", "plain"]);
        assert_eq!(entries[0].credentials, None);
        assert_eq!(entries[1].credentials, Some(sample()));
        assert_eq!(entries[1].path, store.path("odd name/.."));
        assert_eq!(FileTokenStore::server_of("x-zz.json"), None);
        assert_eq!(FileTokenStore::server_of("a.b.json"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
