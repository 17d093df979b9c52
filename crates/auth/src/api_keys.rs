//! Manifold's own API keys: made by `manifold keys create`, shown once, kept only as a digest.
//!
//! A key is `mfk_<id>_<secret>`: a 64-bit id (hex) that finds the record without comparing
//! secrets, and a 256-bit random secret (hex). Only SHA-256 of the secret is kept: a plain
//! digest is enough because the secret is uniformly random and far too long to guess, so no
//! slow password hash is needed. Comparison is constant-time. Keys live in Manifold's store
//! (see [`crate::key_repository`]); this module also reads the `api-keys.json` file earlier
//! versions kept in the data directory, once, to import it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::bearer::API_KEY_PREFIX;
use crate::error::{KeyStoreError, TokenProblem};
use crate::identity::{Credential, Identity};

/// The file, inside the data directory.
pub const API_KEYS_FILE: &str = "api-keys.json";
/// Added to the file's name once it is imported into the store.
pub const IMPORTED_SUFFIX: &str = ".imported";
/// Format version of the file.
const FILE_VERSION: u32 = 1;
const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;
/// Largest key file read (a hundred thousand keys fit).
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// One key as stored: everything but the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// Hex, unique; the part of the key that finds this record.
    pub id: String,
    pub name: String,
    /// Hex SHA-256 of the secret part.
    pub secret_sha256: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    /// Seconds since the Unix epoch.
    pub created: u64,
    /// When it was revoked; `None` while active.
    #[serde(default)]
    pub revoked: Option<u64>,
}

impl KeyRecord {
    pub fn is_active(&self) -> bool {
        self.revoked.is_none()
    }

    pub(crate) fn identity(&self) -> Identity {
        Identity {
            name: self.name.clone(),
            groups: self.groups.clone(),
            scopes: self.scopes.clone(),
            credential: Credential::ApiKey {
                id: self.id.clone(),
            },
        }
    }
}

/// A key just made: its record, and the key itself (shown once, never stored).
#[derive(Debug)]
pub struct NewKey {
    pub record: KeyRecord,
    pub key: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct KeyFile {
    version: u32,
    keys: Vec<KeyRecord>,
}

/// The key file of earlier versions, read once to import it into the store.
#[derive(Debug)]
pub struct ApiKeyFile {
    path: PathBuf,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_hex<const N: usize>() -> Result<String, KeyStoreError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| KeyStoreError::Random(e.to_string()))?;
    Ok(hex(&bytes))
}

pub(crate) fn secret_digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether a key name is acceptable: short, and safe to show in logs and tables.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@'))
}

/// A scope token as RFC 6749 section 3.3 defines it.
pub fn valid_scope(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

fn valid_group(group: &str) -> bool {
    !group.is_empty()
        && group.chars().count() <= 128
        && !group.chars().any(|c| c.is_control() || c == ',')
}

/// The id and secret of a presented key, if it has the exact shape Manifold mints.
pub(crate) fn split_key(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix(API_KEY_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    (is_lower_hex(id, ID_BYTES * 2) && is_lower_hex(secret, SECRET_BYTES * 2))
        .then_some((id, secret))
}

/// Makes a key's record and the key itself, refusing bad names, scopes and groups;
/// `id_taken` says whether an id is in use already.
pub(crate) fn mint_key(
    name: &str,
    scopes: &[String],
    groups: &[String],
    id_taken: impl Fn(&str) -> bool,
) -> Result<NewKey, KeyStoreError> {
    if !valid_name(name) {
        return Err(KeyStoreError::InvalidName(name.chars().take(80).collect()));
    }
    if let Some(bad) = scopes.iter().find(|s| !valid_scope(s)) {
        return Err(KeyStoreError::InvalidScope(bad.chars().take(80).collect()));
    }
    if let Some(bad) = groups.iter().find(|g| !valid_group(g)) {
        return Err(KeyStoreError::InvalidGroup(bad.chars().take(80).collect()));
    }
    let id = loop {
        let id = random_hex::<ID_BYTES>()?;
        if !id_taken(&id) {
            break id;
        }
    };
    let secret = random_hex::<SECRET_BYTES>()?;
    let unique = |items: &[String]| {
        let mut out: Vec<String> = Vec::new();
        for i in items {
            if !out.contains(i) {
                out.push(i.clone());
            }
        }
        out
    };
    let record = KeyRecord {
        id: id.clone(),
        name: name.to_owned(),
        secret_sha256: secret_digest(&secret),
        scopes: unique(scopes),
        groups: unique(groups),
        created: now_secs(),
        revoked: None,
    };
    Ok(NewKey {
        record,
        key: format!("{API_KEY_PREFIX}{id}_{secret}"),
    })
}

impl ApiKeyFile {
    /// The file in a data directory.
    pub fn in_dir(data_dir: &Path) -> ApiKeyFile {
        ApiKeyFile {
            path: data_dir.join(API_KEYS_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is there (it is renamed once imported).
    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    /// Where the file is moved once imported.
    pub fn retired_path(&self) -> PathBuf {
        self.path
            .with_file_name(format!("{API_KEYS_FILE}{IMPORTED_SUFFIX}"))
    }

    fn io(&self, action: &'static str) -> impl FnOnce(std::io::Error) -> KeyStoreError + '_ {
        move |source| KeyStoreError::Io {
            action,
            path: self.path.clone(),
            source,
        }
    }

    /// Every record in the file, oldest first (none when there is no file).
    pub fn list(&self) -> Result<Vec<KeyRecord>, KeyStoreError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io("read")(e)),
        };
        let meta = file.metadata().map_err(self.io("read"))?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(KeyStoreError::Corrupt {
                path: self.path.clone(),
                reason: format!("larger than {} MiB", MAX_FILE_BYTES / 1024 / 1024),
            });
        }
        let parsed: KeyFile =
            serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
                KeyStoreError::Corrupt {
                    path: self.path.clone(),
                    reason: e.to_string(),
                }
            })?;
        if parsed.version != FILE_VERSION {
            return Err(KeyStoreError::Corrupt {
                path: self.path.clone(),
                reason: format!(
                    "version {} (this Manifold reads {FILE_VERSION})",
                    parsed.version
                ),
            });
        }
        let mut keys = parsed.keys;
        // Stable: keys made in the same second keep the order they were made in.
        keys.sort_by_key(|k| k.created);
        Ok(keys)
    }

    /// Renames the imported file (kept, not deleted, for the operator to remove).
    pub(crate) fn retire(&self) -> Result<PathBuf, KeyStoreError> {
        let to = self.retired_path();
        std::fs::rename(&self.path, &to).map_err(self.io("rename the imported key file"))?;
        Ok(to)
    }
}

/// Why a presented key did not verify.
#[derive(Debug)]
pub enum VerifyError {
    /// The key proves nothing (401).
    Refused(TokenProblem),
    /// The key file could not be read (the gateway cannot check keys now).
    Store(KeyStoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("manifold-auth-keys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_an_empty_list() {
        let dir = dir("corrupt");
        std::fs::write(dir.join(API_KEYS_FILE), "{not json").unwrap();
        assert!(matches!(
            ApiKeyFile::in_dir(&dir).list(),
            Err(KeyStoreError::Corrupt { .. })
        ));
    }

    #[test]
    fn an_old_file_is_read_oldest_first_and_retired_beside_itself() {
        let dir = dir("old");
        let minted = mint_key("alice", &[], &[], |_| false).unwrap();
        let older = KeyRecord {
            created: 1,
            ..mint_key("bob", &[], &[], |_| false).unwrap().record
        };
        let text = serde_json::to_string(&KeyFile {
            version: FILE_VERSION,
            keys: vec![minted.record.clone(), older.clone()],
        })
        .unwrap();
        std::fs::write(dir.join(API_KEYS_FILE), text).unwrap();
        let file = ApiKeyFile::in_dir(&dir);
        assert_eq!(file.list().unwrap(), [older, minted.record]);
        let to = file.retire().unwrap();
        assert_eq!(to, dir.join("api-keys.json.imported"));
        assert!(!file.exists() && to.exists());
        assert!(file.list().unwrap().is_empty());
    }
}
