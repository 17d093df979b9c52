//! Manifold's own API keys: made by `manifold keys create`, shown once, kept only as a digest.
//!
//! A key is `mfk_<id>_<secret>`: a 64-bit id (hex) that finds the record without comparing
//! secrets, and a 256-bit random secret (hex). The file keeps SHA-256 of the secret: a plain
//! digest is enough because the secret is uniformly random and far too long to guess, so no
//! slow password hash is needed. Comparison is constant-time. The file is JSON under the data
//! directory, written atomically (temporary file, fsync, rename) under an exclusive lock, and
//! re-read by a running gateway as soon as it changes, so a revocation takes effect at once.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::bearer::API_KEY_PREFIX;
use crate::error::{KeyStoreError, TokenProblem};
use crate::identity::{Credential, Identity};

/// The file, inside the data directory.
pub const API_KEYS_FILE: &str = "api-keys.json";
/// Format version written in the file.
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

    fn identity(&self) -> Identity {
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

/// What identifies one version of the file on disk, to notice changes cheaply.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        #[cfg(unix)]
        inode: std::os::unix::fs::MetadataExt::ino(meta),
    }
}

#[derive(Default)]
struct Loaded {
    stamp: Option<Stamp>,
    keys: Arc<Vec<KeyRecord>>,
}

/// The API key file.
pub struct ApiKeyStore {
    path: PathBuf,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for ApiKeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeyStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_hex<const N: usize>() -> Result<String, KeyStoreError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| KeyStoreError::Random(e.to_string()))?;
    Ok(hex(&bytes))
}

fn secret_digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn now_secs() -> u64 {
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
fn split_key(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix(API_KEY_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    (is_lower_hex(id, ID_BYTES * 2) && is_lower_hex(secret, SECRET_BYTES * 2))
        .then_some((id, secret))
}

impl ApiKeyStore {
    /// The store at `path` (read when first needed; a missing file holds no keys).
    pub fn open(path: impl Into<PathBuf>) -> ApiKeyStore {
        ApiKeyStore {
            path: path.into(),
            loaded: Mutex::new(Loaded::default()),
        }
    }

    /// The store in a data directory.
    pub fn in_dir(data_dir: &Path) -> ApiKeyStore {
        ApiKeyStore::open(data_dir.join(API_KEYS_FILE))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, action: &'static str) -> impl FnOnce(std::io::Error) -> KeyStoreError + '_ {
        move |source| KeyStoreError::Io {
            action,
            path: self.path.clone(),
            source,
        }
    }

    /// Every record, straight from the file.
    fn read_file(&self) -> Result<(Option<Stamp>, Vec<KeyRecord>), KeyStoreError> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Vec::new())),
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
        Ok((Some(stamp_of(&meta)), parsed.keys))
    }

    /// The records as of now: re-read when the file changed since the last look.
    fn current(&self) -> Result<Arc<Vec<KeyRecord>>, KeyStoreError> {
        let stamp = match std::fs::metadata(&self.path) {
            Ok(meta) => Some(stamp_of(&meta)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(self.io("read")(e)),
        };
        let mut loaded = lock(&self.loaded);
        if stamp.is_some() && loaded.stamp == stamp {
            return Ok(Arc::clone(&loaded.keys));
        }
        let (stamp, keys) = self.read_file()?;
        loaded.stamp = stamp;
        loaded.keys = Arc::new(keys);
        Ok(Arc::clone(&loaded.keys))
    }

    /// Every key, active or revoked, oldest first.
    pub fn list(&self) -> Result<Vec<KeyRecord>, KeyStoreError> {
        let mut keys = self.read_file()?.1;
        // Stable: keys made in the same second keep the order they were made in.
        keys.sort_by_key(|k| k.created);
        Ok(keys)
    }

    /// Checks a presented key: the identity it proves, or why it proves nothing.
    pub fn verify(&self, presented: &str) -> Result<Identity, VerifyError> {
        let (id, secret) =
            split_key(presented).ok_or(VerifyError::Refused(TokenProblem::MalformedKey))?;
        let keys = self.current().map_err(VerifyError::Store)?;
        let record = keys
            .iter()
            .find(|k| k.id == id)
            .ok_or(VerifyError::Refused(TokenProblem::UnknownKey))?;
        let digest = secret_digest(secret);
        let matches: bool = digest
            .as_bytes()
            .ct_eq(record.secret_sha256.as_bytes())
            .into();
        if !matches {
            return Err(VerifyError::Refused(TokenProblem::UnknownKey));
        }
        if !record.is_active() {
            return Err(VerifyError::Refused(TokenProblem::RevokedKey));
        }
        Ok(record.identity())
    }

    /// Makes a key. The returned [`NewKey::key`] is the only copy of the secret.
    pub fn create(
        &self,
        name: &str,
        scopes: &[String],
        groups: &[String],
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
        self.update(|keys| {
            if keys.iter().any(|k| k.name == name && k.is_active()) {
                return Err(KeyStoreError::NameTaken(name.to_owned()));
            }
            let id = loop {
                let id = random_hex::<ID_BYTES>()?;
                if !keys.iter().any(|k| k.id == id) {
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
            keys.push(record.clone());
            Ok(NewKey {
                record,
                key: format!("{API_KEY_PREFIX}{id}_{secret}"),
            })
        })
    }

    /// Revokes every active key with this name; the records stay, marked revoked.
    pub fn revoke(&self, name: &str) -> Result<Vec<KeyRecord>, KeyStoreError> {
        self.update(|keys| {
            let now = now_secs();
            let mut revoked = Vec::new();
            for k in keys.iter_mut().filter(|k| k.name == name && k.is_active()) {
                k.revoked = Some(now);
                revoked.push(k.clone());
            }
            if revoked.is_empty() {
                return Err(KeyStoreError::NoSuchKey(name.to_owned()));
            }
            Ok(revoked)
        })
    }

    /// Read, change and write the file under an exclusive lock, so two `manifold keys`
    /// commands at once cannot lose each other's change.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut Vec<KeyRecord>) -> Result<T, KeyStoreError>,
    ) -> Result<T, KeyStoreError> {
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        create_private_dir(&dir).map_err(self.io("create the directory of"))?;
        let lock_path = self.path.with_extension("json.lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(self.io("lock"))?;
        lock_file.lock().map_err(self.io("lock"))?;
        let (_, mut keys) = self.read_file()?;
        let out = change(&mut keys)?;
        let text = serde_json::to_string_pretty(&KeyFile {
            version: FILE_VERSION,
            keys,
        })
        .map_err(|e| KeyStoreError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        self.write_atomically(&dir, text.as_bytes())?;
        // The lock is released when `lock_file` is dropped.
        drop(lock_file);
        Ok(out)
    }

    fn write_atomically(&self, dir: &Path, bytes: &[u8]) -> Result<(), KeyStoreError> {
        let file_name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| API_KEYS_FILE.to_owned());
        let temp = dir.join(format!(
            ".{file_name}.{}.{}.tmp",
            std::process::id(),
            random_hex::<4>()?
        ));
        let written = (|| {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&temp)?;
            f.write_all(bytes)?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&temp, &self.path)?;
            // The rename itself must reach the disk too.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            self.io("write")(e)
        })
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
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

    fn store(name: &str) -> (ApiKeyStore, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("manifold-auth-keys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        (ApiKeyStore::in_dir(&dir), dir)
    }

    #[test]
    fn a_created_key_verifies_and_only_its_digest_is_stored() {
        let (s, dir) = store("create");
        let new = s
            .create("alice", &["mcp".into(), "mcp".into()], &["ops".into()])
            .unwrap();
        assert!(new.key.starts_with("mfk_"));
        assert_eq!(new.key.len(), 4 + 16 + 1 + 64);
        let id = s.verify(&new.key).unwrap();
        assert_eq!(id.name, "alice");
        assert_eq!(id.scopes, ["mcp"]);
        assert_eq!(id.groups, ["ops"]);
        let text = std::fs::read_to_string(dir.join(API_KEYS_FILE)).unwrap();
        let secret = new.key.rsplit('_').next().unwrap();
        assert!(!text.contains(secret), "the secret is never written");
        assert!(text.contains(&secret_digest(secret)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(API_KEYS_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn wrong_secrets_unknown_ids_and_odd_shapes_are_refused() {
        let (s, _) = store("refuse");
        let new = s.create("bob", &[], &[]).unwrap();
        let mut wrong = new.key.clone();
        let last = wrong.pop().unwrap();
        wrong.push(if last == '0' { '1' } else { '0' });
        assert!(matches!(
            s.verify(&wrong),
            Err(VerifyError::Refused(TokenProblem::UnknownKey))
        ));
        let other_id = format!("mfk_{}_{}", "0".repeat(16), "0".repeat(64));
        assert!(matches!(
            s.verify(&other_id),
            Err(VerifyError::Refused(TokenProblem::UnknownKey))
        ));
        for bad in [
            "mfk_",
            "mfk_abc_def",
            &new.key.to_uppercase(),
            &format!("{}0", new.key),
        ] {
            assert!(
                matches!(
                    s.verify(bad),
                    Err(VerifyError::Refused(TokenProblem::MalformedKey))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn revocation_is_seen_by_a_store_that_already_loaded_the_file() {
        let (s, dir) = store("revoke");
        let new = s.create("carol", &[], &[]).unwrap();
        assert!(s.verify(&new.key).is_ok());
        let other_process = ApiKeyStore::in_dir(&dir);
        let revoked = other_process.revoke("carol").unwrap();
        assert_eq!(revoked.len(), 1);
        assert!(matches!(
            s.verify(&new.key),
            Err(VerifyError::Refused(TokenProblem::RevokedKey))
        ));
        assert!(matches!(
            other_process.revoke("carol"),
            Err(KeyStoreError::NoSuchKey(_))
        ));
        let again = s.create("carol", &[], &[]).unwrap();
        assert_ne!(again.record.id, new.record.id);
        let all = s.list().unwrap();
        assert_eq!(all.len(), 2);
        assert!(all.first().unwrap().revoked.is_some());
        assert!(all.get(1).unwrap().revoked.is_none());
    }

    #[test]
    fn names_are_unique_among_active_keys_and_checked() {
        let (s, _) = store("names");
        s.create("dave", &[], &[]).unwrap();
        assert!(matches!(
            s.create("dave", &[], &[]),
            Err(KeyStoreError::NameTaken(_))
        ));
        assert!(matches!(
            s.create("da ve", &[], &[]),
            Err(KeyStoreError::InvalidName(_))
        ));
        assert!(matches!(
            s.create("eve", &["a b".into()], &[]),
            Err(KeyStoreError::InvalidScope(_))
        ));
        assert!(matches!(
            s.create("eve", &[], &["a,b".into()]),
            Err(KeyStoreError::InvalidGroup(_))
        ));
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_an_empty_store() {
        let (s, dir) = store("corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(API_KEYS_FILE), "{not json").unwrap();
        let key = format!("mfk_{}_{}", "a".repeat(16), "b".repeat(64));
        assert!(matches!(
            s.verify(&key),
            Err(VerifyError::Store(KeyStoreError::Corrupt { .. }))
        ));
        assert!(matches!(
            s.create("x", &[], &[]),
            Err(KeyStoreError::Corrupt { .. })
        ));
    }
}
