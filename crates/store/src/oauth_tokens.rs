//! Upstream servers' OAuth tokens in the store, sealed at rest: a copy of the database (a backup,
//! a replica, a stolen disk) yields no usable token without the key, which the store never holds.
//! Each write is AES-256-GCM with a fresh random 96-bit nonce and the server's name as associated
//! data, so a row copied or moved to another server's name does not decrypt, and a wrong key is
//! refused by the tag rather than giving garbage.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use crate::api_keys::with_pool;
use crate::error::StoreError;
use crate::store::{Pools, Store};

/// The key file's name inside `data_dir`, used when `[store] token_key` is not set.
pub const TOKEN_KEY_FILE: &str = "store.key";
/// Bytes in a token key (AES-256).
pub const TOKEN_KEY_LEN: usize = 32;
/// Largest key file read: 64 hex digits and a line break, with room for stray whitespace.
pub const MAX_TOKEN_KEY_FILE_BYTES: u64 = 1024;
/// Largest plaintext one server's tokens may take (a token set is a few KiB at most).
pub const MAX_SEALED_TOKENS_BYTES: usize = 64 * 1024;
/// Longest server name a row is kept under.
pub const MAX_TOKEN_SERVER_LEN: usize = 256;

/// The key that seals and opens OAuth tokens, with where it came from (for messages). `Debug`
/// shows only the source.
pub struct TokenKey {
    key: LessSafeKey,
    source: String,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKey")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// One server's tokens as stored: only ever made by [`TokenKey::seal`] or read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedTokens {
    server: String,
    nonce: Vec<u8>,
    ciphertext: Vec<u8>,
    updated_at_ms: i64,
}

impl SealedTokens {
    /// The server the row is kept under.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// When the row was written (milliseconds since the Unix epoch).
    pub fn updated_at_ms(&self) -> i64 {
        self.updated_at_ms
    }
}

/// Where the key lives when the configuration names none.
pub fn token_key_file(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_KEY_FILE)
}

fn key_error(source: &str, reason: impl std::fmt::Display) -> StoreError {
    StoreError::TokenKey {
        key_source: source.to_owned(),
        reason: reason.to_string(),
    }
}

impl TokenKey {
    /// A key given as bytes (from `[store] token_key`); `source` names where it came from.
    pub fn from_bytes(
        bytes: &[u8; TOKEN_KEY_LEN],
        source: impl Into<String>,
    ) -> Result<TokenKey, StoreError> {
        let source = source.into();
        let unbound = UnboundKey::new(&AES_256_GCM, bytes)
            .map_err(|_| key_error(&source, "it is not a 32-byte AES-256 key"))?;
        Ok(TokenKey {
            key: LessSafeKey::new(unbound),
            source,
        })
    }

    /// The key in `data_dir/store.key`, if the file is there.
    pub fn load_existing(data_dir: &Path) -> Result<Option<TokenKey>, StoreError> {
        let path = token_key_file(data_dir);
        let shown = path.display().to_string();
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(key_error(&shown, e)),
        };
        let mut text = String::new();
        file.take(MAX_TOKEN_KEY_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| key_error(&shown, e))?;
        if text.len() as u64 > MAX_TOKEN_KEY_FILE_BYTES {
            return Err(key_error(
                &shown,
                format!("it is larger than {MAX_TOKEN_KEY_FILE_BYTES} bytes"),
            ));
        }
        let bytes = decode_hex_key(text.trim()).map_err(|reason| key_error(&shown, reason))?;
        TokenKey::from_bytes(&bytes, shown).map(Some)
    }

    /// The key in `data_dir/store.key`, made (32 random bytes, mode 0600) when there is none.
    /// Two processes making it at once agree on one: the file appears whole or not at all.
    pub fn load_or_create(data_dir: &Path) -> Result<TokenKey, StoreError> {
        if let Some(key) = TokenKey::load_existing(data_dir)? {
            return Ok(key);
        }
        let path = token_key_file(data_dir);
        let shown = path.display().to_string();
        std::fs::create_dir_all(data_dir).map_err(|e| key_error(&shown, e))?;
        let mut bytes = [0u8; TOKEN_KEY_LEN];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| key_error(&shown, "the system's random number generator failed"))?;
        let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let temporary = data_dir.join(format!(".{TOKEN_KEY_FILE}.tmp-{}", std::process::id()));
        let written = write_private(&temporary, format!("{text}\n").as_bytes());
        let linked = written.and_then(|()| std::fs::hard_link(&temporary, &path));
        let _ = std::fs::remove_file(&temporary);
        match linked {
            Ok(()) => TokenKey::from_bytes(&bytes, shown),
            // Another process made it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                TokenKey::load_existing(data_dir)?
                    .ok_or_else(|| key_error(&shown, "it vanished right after it was made"))
            }
            Err(e) => Err(key_error(&shown, e)),
        }
    }

    /// Where the key came from, as messages name it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Seals `plaintext` for `server` under a fresh random nonce.
    pub fn seal(
        &self,
        server: &str,
        plaintext: &[u8],
        at_ms: i64,
    ) -> Result<SealedTokens, StoreError> {
        check_server(server)?;
        if plaintext.len() > MAX_SEALED_TOKENS_BYTES {
            return Err(StoreError::Invalid {
                what: "OAuth tokens",
                field: "size",
                reason: format!(
                    "is {} bytes, more than {MAX_SEALED_TOKENS_BYTES}",
                    plaintext.len()
                ),
            });
        }
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| StoreError::Seal {
                server: server.to_owned(),
                reason: "the system's random number generator failed".to_owned(),
            })?;
        let mut ciphertext = plaintext.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(server.as_bytes()),
                &mut ciphertext,
            )
            .map_err(|_| StoreError::Seal {
                server: server.to_owned(),
                reason: "the cipher refused the input".to_owned(),
            })?;
        Ok(SealedTokens {
            server: server.to_owned(),
            nonce: nonce.to_vec(),
            ciphertext,
            updated_at_ms: at_ms,
        })
    }

    /// The plaintext of `sealed`; refused when this is not the key it was sealed with, the row
    /// was sealed for another server, or it was altered.
    pub fn open(&self, sealed: &SealedTokens) -> Result<Vec<u8>, StoreError> {
        let undecryptable = || StoreError::Undecryptable {
            server: sealed.server.clone(),
            key_source: self.source.clone(),
        };
        let nonce =
            <[u8; NONCE_LEN]>::try_from(sealed.nonce.as_slice()).map_err(|_| undecryptable())?;
        let mut buffer = sealed.ciphertext.clone();
        let plaintext = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(sealed.server.as_bytes()),
                &mut buffer,
            )
            .map_err(|_| undecryptable())?;
        Ok(plaintext.to_vec())
    }
}

fn decode_hex_key(text: &str) -> Result<[u8; TOKEN_KEY_LEN], String> {
    if text.len() != TOKEN_KEY_LEN * 2 || !text.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("it does not hold {} hex digits", TOKEN_KEY_LEN * 2));
    }
    let mut bytes = [0u8; TOKEN_KEY_LEN];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let pair = text
            .get(i * 2..i * 2 + 2)
            .ok_or_else(|| "it is cut short".to_owned())?;
        *byte = u8::from_str_radix(pair, 16).map_err(|e| e.to_string())?;
    }
    Ok(bytes)
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

fn check_server(server: &str) -> Result<(), StoreError> {
    if server.is_empty() || server.len() > MAX_TOKEN_SERVER_LEN {
        return Err(StoreError::Invalid {
            what: "OAuth tokens",
            field: "server",
            reason: format!("must be 1 to {MAX_TOKEN_SERVER_LEN} bytes"),
        });
    }
    Ok(())
}

/// A row of either backend as [`SealedTokens`].
trait SealedRow {
    fn sealed(&self) -> Result<SealedTokens, sqlx::Error>;
}

macro_rules! sealed_row {
    ($row:ty) => {
        impl SealedRow for $row {
            fn sealed(&self) -> Result<SealedTokens, sqlx::Error> {
                use sqlx::Row as _;
                Ok(SealedTokens {
                    server: self.try_get("server")?,
                    nonce: self.try_get("nonce")?,
                    ciphertext: self.try_get("ciphertext")?,
                    updated_at_ms: self.try_get("updated_at_ms")?,
                })
            }
        }
    };
}
sealed_row!(sqlx::sqlite::SqliteRow);
sealed_row!(sqlx::postgres::PgRow);

/// The `oauth_tokens` repository.
#[derive(Debug, Clone, Copy)]
pub struct OAuthTokens<'s> {
    store: &'s Store,
}

impl Store {
    /// The OAuth tokens repository.
    pub fn oauth_tokens(&self) -> OAuthTokens<'_> {
        OAuthTokens { store: self }
    }
}

impl OAuthTokens<'_> {
    /// Stores `sealed`, replacing what its server had.
    pub async fn put(&self, sealed: &SealedTokens) -> Result<(), StoreError> {
        let sql = "INSERT INTO oauth_tokens (server, nonce, ciphertext, updated_at_ms) VALUES ($1, $2, $3, $4) \
            ON CONFLICT (server) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, updated_at_ms = excluded.updated_at_ms";
        self.write(sql, sealed).await.map(|_| ())
    }

    /// Stores `sealed` only if its server has nothing yet (an import never replaces newer
    /// tokens); true when it was stored.
    pub async fn insert_new(&self, sealed: &SealedTokens) -> Result<bool, StoreError> {
        let sql = "INSERT INTO oauth_tokens (server, nonce, ciphertext, updated_at_ms) VALUES ($1, $2, $3, $4) \
            ON CONFLICT (server) DO NOTHING";
        self.write(sql, sealed).await.map(|n| n > 0)
    }

    async fn write(&self, sql: &'static str, sealed: &SealedTokens) -> Result<u64, StoreError> {
        check_server(&sealed.server)?;
        let written = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(&sealed.server)
            .bind(&sealed.nonce)
            .bind(&sealed.ciphertext)
            .bind(sealed.updated_at_ms)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()));
        written.map_err(|e| self.store.failed(&e))
    }

    /// The sealed tokens of `server`, if any.
    pub async fn get(&self, server: &str) -> Result<Option<SealedTokens>, StoreError> {
        let sql =
            "SELECT server, nonce, ciphertext, updated_at_ms FROM oauth_tokens WHERE server = $1";
        let found = with_pool!(self.store, readers, |pool| {
            match sqlx::query(sql).bind(server).fetch_optional(pool).await {
                Ok(Some(row)) => row.sealed().map(Some),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            }
        });
        found.map_err(|e| self.store.failed(&e))
    }

    /// Every server with stored tokens, by name.
    pub async fn servers(&self) -> Result<Vec<String>, StoreError> {
        let sql = "SELECT server FROM oauth_tokens ORDER BY server";
        let names = with_pool!(self.store, readers, |pool| sqlx::query_scalar::<_, String>(
            sql
        )
        .fetch_all(pool)
        .await);
        names.map_err(|e| self.store.failed(&e))
    }

    /// Forgets `server`'s tokens; false when there were none.
    pub async fn delete(&self, server: &str) -> Result<bool, StoreError> {
        let sql = "DELETE FROM oauth_tokens WHERE server = $1";
        let deleted = with_pool!(self.store, writer, |pool| sqlx::query(sql)
            .bind(server)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()));
        deleted.map(|n| n > 0).map_err(|e| self.store.failed(&e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "manifold-store-token-key-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_key_file_is_made_once_private_and_reused() {
        let dir = scratch("made");
        assert!(TokenKey::load_existing(&dir).unwrap().is_none());
        let first = TokenKey::load_or_create(&dir).unwrap();
        let path = token_key_file(&dir);
        assert_eq!(first.source(), path.display().to_string());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim().len(), TOKEN_KEY_LEN * 2);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = TokenKey::load_or_create(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let sealed = first.seal("srv", b"tokens", 1).unwrap();
        assert_eq!(again.open(&sealed).unwrap(), b"tokens");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_key_file_is_refused_naming_it() {
        let dir = scratch("damaged");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(token_key_file(&dir), "not a key\n").unwrap();
        let err = TokenKey::load_or_create(&dir).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, StoreError::TokenKey { .. }), "{text}");
        assert!(
            text.contains(&token_key_file(&dir).display().to_string()),
            "{text}"
        );
        assert!(text.contains("64 hex digits"), "{text}");
        std::fs::write(
            token_key_file(&dir),
            "a".repeat(MAX_TOKEN_KEY_FILE_BYTES as usize + 1),
        )
        .unwrap();
        let big = TokenKey::load_existing(&dir).unwrap_err().to_string();
        assert!(big.contains("larger than 1024 bytes"), "{big}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sealing_uses_a_fresh_nonce_and_binds_the_server() {
        let key = TokenKey::from_bytes(&[3u8; TOKEN_KEY_LEN], "test").unwrap();
        let a = key.seal("srv", b"same", 1).unwrap();
        let b = key.seal("srv", b"same", 1).unwrap();
        assert_eq!(a.nonce.len(), NONCE_LEN);
        assert_ne!(a.nonce, b.nonce);
        assert_ne!(a.ciphertext, b.ciphertext);
        let moved = SealedTokens {
            server: "other".to_owned(),
            ..a.clone()
        };
        let err = key.open(&moved).unwrap_err();
        assert!(
            matches!(&err, StoreError::Undecryptable { server, .. } if server == "other"),
            "{err}"
        );
        assert_eq!(key.open(&a).unwrap(), b"same");
    }

    #[test]
    fn bounds_are_enforced() {
        let key = TokenKey::from_bytes(&[3u8; TOKEN_KEY_LEN], "test").unwrap();
        assert!(key.seal("s", &vec![0; MAX_SEALED_TOKENS_BYTES], 1).is_ok());
        let big = key
            .seal("s", &vec![0; MAX_SEALED_TOKENS_BYTES + 1], 1)
            .unwrap_err();
        assert!(
            matches!(big, StoreError::Invalid { field: "size", .. }),
            "{big}"
        );
        let long = key
            .seal(&"n".repeat(MAX_TOKEN_SERVER_LEN + 1), b"x", 1)
            .unwrap_err();
        assert!(
            matches!(
                long,
                StoreError::Invalid {
                    field: "server",
                    ..
                }
            ),
            "{long}"
        );
        assert!(key.seal(&"n".repeat(MAX_TOKEN_SERVER_LEN), b"x", 1).is_ok());
        assert!(format!("{key:?}").contains("test"));
    }
}
