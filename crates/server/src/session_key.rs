//! The key that seals legacy session state into session ids.
//!
//! A raw 256-bit key used directly by the AEAD (no per-request derivation), named by a short key
//! id that prefixes every session id, so a replica can tell at a glance which key minted an id.
//! It comes from configuration bytes, from a file, or is generated once and kept in the data
//! directory so a restarted gateway still honours the sessions it minted.

use std::fmt;
use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;

use crate::error::ServerError;

/// The key id used when none is configured.
pub const DEFAULT_KEY_ID: &str = "k1";
/// Longest key id.
pub const MAX_KEY_ID_LEN: usize = 16;
/// Bytes in a key.
pub const KEY_BYTES: usize = 32;

/// A session-sealing key and its id. `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKey {
    id: String,
    key: [u8; KEY_BYTES],
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionKey")
            .field("id", &self.id)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// Whether `id` may name a key: 1 to [`MAX_KEY_ID_LEN`] of `A-Z a-z 0-9 _ -`. Never a `.`: it
/// ends the key id in a session id. The one rule: configuration checks it with this too.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_KEY_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N], ServerError> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out).map_err(|e| ServerError::Random(e.to_string()))?;
    Ok(out)
}

impl SessionKey {
    /// A key from 32 raw bytes (e.g. decoded from configuration), with the default id.
    pub fn from_bytes(bytes: &[u8]) -> Result<SessionKey, ServerError> {
        let key: [u8; KEY_BYTES] = bytes
            .try_into()
            .map_err(|_| ServerError::KeyLength { found: bytes.len() })?;
        Ok(SessionKey {
            id: DEFAULT_KEY_ID.to_owned(),
            key,
        })
    }

    /// A fresh random key with the default id.
    pub fn generate() -> Result<SessionKey, ServerError> {
        Ok(SessionKey {
            id: DEFAULT_KEY_ID.to_owned(),
            key: random_bytes()?,
        })
    }

    /// The same key under another id (for rotation: ids tell keys apart).
    pub fn with_id(mut self, id: &str) -> Result<SessionKey, ServerError> {
        if !valid_id(id) {
            return Err(ServerError::KeyId(id.chars().take(32).collect()));
        }
        self.id = id.to_owned();
        Ok(self)
    }

    /// Reads the key stored at `path` (base64 of 32 bytes), or generates one and stores it there
    /// (readable by the owner only). Two processes racing to create it end up with the same key.
    pub fn load_or_create(path: &Path) -> Result<SessionKey, ServerError> {
        match std::fs::read_to_string(path) {
            Ok(text) => return Self::from_file_text(path, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(ServerError::KeyIo {
                    action: "read",
                    path: path.to_owned(),
                    source,
                });
            }
        }
        let io = |action: &'static str| {
            move |source| ServerError::KeyIo {
                action,
                path: path.to_owned(),
                source,
            }
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io("create the directory of"))?;
        }
        let key = SessionKey::generate()?;
        let text = format!(
            "{}\n",
            base64::engine::general_purpose::STANDARD.encode(key.key)
        );
        let suffix = hex(&random_bytes::<6>()?);
        let temp = path.with_extension(format!("tmp-{suffix}"));
        {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            let mut file = options.open(&temp).map_err(io("create"))?;
            file.write_all(text.as_bytes()).map_err(io("write"))?;
            file.sync_all().map_err(io("write"))?;
        }
        // A hard link never replaces an existing file: whoever links first wins, the other reads it.
        let linked = std::fs::hard_link(&temp, path);
        let _ = std::fs::remove_file(&temp);
        match linked {
            Ok(()) => Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let text = std::fs::read_to_string(path).map_err(io("read"))?;
                Self::from_file_text(path, &text)
            }
            Err(source) => Err(ServerError::KeyIo {
                action: "store",
                path: path.to_owned(),
                source,
            }),
        }
    }

    fn from_file_text(path: &Path, text: &str) -> Result<SessionKey, ServerError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| ServerError::KeyFile {
                path: path.to_owned(),
                why: e.to_string(),
            })?;
        SessionKey::from_bytes(&bytes).map_err(|_| ServerError::KeyFile {
            path: path.to_owned(),
            why: format!("it holds {} bytes", bytes.len()),
        })
    }

    /// The key id that prefixes session ids.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn bytes(&self) -> &[u8; KEY_BYTES] {
        &self.key
    }

    /// A key of its own for `purpose`, derived from this one (SHA-256 of `purpose` then the
    /// key), so one configured secret serves other sealers without a token of one ever opening
    /// as a token of another.
    pub fn derive(&self, purpose: &[u8]) -> [u8; KEY_BYTES] {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        hasher.update(purpose);
        hasher.update(self.key);
        hasher.finalize().into()
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_differ_by_purpose_and_from_the_key() {
        let key = SessionKey::from_bytes(&[7; KEY_BYTES]).unwrap();
        let approvals = key.derive(b"manifold approval requestState\0");
        assert_eq!(approvals, key.derive(b"manifold approval requestState\0"));
        assert_ne!(approvals, key.derive(b"another purpose"));
        assert_ne!(&approvals, key.bytes());
        let other = SessionKey::from_bytes(&[8; KEY_BYTES]).unwrap();
        assert_ne!(approvals, other.derive(b"manifold approval requestState\0"));
    }

    #[test]
    fn key_ids_are_short_and_never_hold_the_separator() {
        assert!(valid_id("k1") && valid_id("prod_2026-a"));
        assert!(!valid_id("") && !valid_id("prod.2026") && !valid_id("key one"));
        assert!(
            valid_id(&"a".repeat(MAX_KEY_ID_LEN)) && !valid_id(&"a".repeat(MAX_KEY_ID_LEN + 1))
        );
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "manifold-server-key-{name}-{}-{}",
            std::process::id(),
            hex(&random_bytes::<4>().unwrap())
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn from_bytes_needs_exactly_32_bytes() {
        assert!(SessionKey::from_bytes(&[7u8; 32]).is_ok());
        assert!(matches!(
            SessionKey::from_bytes(&[7u8; 31]),
            Err(ServerError::KeyLength { found: 31 })
        ));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let k = SessionKey::from_bytes(&[0xAB; 32]).unwrap();
        let shown = format!("{k:?}");
        assert!(shown.contains("redacted") && !shown.contains("171") && !shown.contains("ab"));
    }

    #[test]
    fn key_ids_are_checked() {
        let k = SessionKey::generate().unwrap();
        assert_eq!(k.clone().with_id("k2").unwrap().id(), "k2");
        assert!(k.clone().with_id("a.b").is_err());
        assert!(k.with_id("").is_err());
    }

    #[test]
    fn load_or_create_stores_once_and_reads_back_the_same_key() {
        let dir = temp_dir("store");
        let path = dir.join("nested").join("session.key");
        let first = SessionKey::load_or_create(&path).unwrap();
        let second = SessionKey::load_or_create(&path).unwrap();
        assert_eq!(first, second);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not base64!").unwrap();
        assert!(matches!(
            SessionKey::load_or_create(&path),
            Err(ServerError::KeyFile { .. })
        ));
        let _ = std::fs::remove_dir_all(dir);
    }
}
