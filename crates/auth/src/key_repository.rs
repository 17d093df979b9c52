//! API keys behind a repository the binary provides (Manifold's store), so this crate stays free
//! of database drivers: [`ApiKeys`] mints and revokes keys through a [`KeyRepository`] and checks
//! presented keys against a snapshot of it that is re-read at least every
//! [`KEY_REFRESH_INTERVAL`] (so a revocation made by another process takes effect without a
//! restart) and early when an unknown key id arrives (so a new key works at once), at most every
//! [`UNKNOWN_KEY_REFRESH_INTERVAL`] (so a flood of made-up ids cannot hammer the store; an
//! unknown id waits for the next re-read rather than being refused from an older snapshot).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use crate::api_keys::{
    ApiKeyFile, KeyRecord, NewKey, VerifyError, mint_key, now_secs, secret_digest, split_key,
};
use crate::error::{KeyStoreError, TokenProblem};
use crate::identity::Identity;

/// Longest a gateway goes without re-reading the keys (a revocation's worst-case delay).
pub const KEY_REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// Shortest gap between re-reads caused by unknown key ids.
pub const UNKNOWN_KEY_REFRESH_INTERVAL: Duration = Duration::from_millis(100);

/// What a [`KeyRepository`] call returns.
pub type RepositoryFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, KeyStoreError>> + Send + 'a>>;

/// Where API key records live (digests only, never secrets).
pub trait KeyRepository: Send + Sync {
    /// Every key, active or revoked, oldest first.
    fn all(&self) -> RepositoryFuture<'_, Vec<KeyRecord>>;
    /// Adds a key; [`KeyStoreError::NameTaken`] when an active key has its name.
    fn add<'a>(&'a self, record: &'a KeyRecord) -> RepositoryFuture<'a, ()>;
    /// Marks the key with this id revoked at `at` (seconds); false when it was not active.
    fn revoke<'a>(&'a self, id: &'a str, at: u64) -> RepositoryFuture<'a, bool>;
    /// Where the keys live, for messages and the startup log.
    fn describe(&self) -> String;
}

#[derive(Default)]
struct Snapshot {
    keys: Arc<Vec<KeyRecord>>,
    read_at: Option<Instant>,
}

/// What importing an old key file did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// Names of the keys added to the store.
    pub imported: Vec<String>,
    /// Names of the keys the store had already (same id).
    pub already_present: Vec<String>,
    /// Where the old file was moved.
    pub renamed_to: std::path::PathBuf,
}

/// Manifold's API keys, over a repository.
pub struct ApiKeys {
    repository: Arc<dyn KeyRepository>,
    snapshot: tokio::sync::Mutex<Snapshot>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys")
            .field("repository", &self.repository.describe())
            .finish_non_exhaustive()
    }
}

impl ApiKeys {
    pub fn new(repository: Arc<dyn KeyRepository>) -> ApiKeys {
        ApiKeys {
            repository,
            snapshot: tokio::sync::Mutex::new(Snapshot::default()),
        }
    }

    /// Where the keys live.
    pub fn describe(&self) -> String {
        self.repository.describe()
    }

    /// The keys, re-read when the snapshot is older than `max_age`. One re-read at a time:
    /// requests arriving meanwhile wait for it rather than each asking the store.
    async fn keys(&self, max_age: Duration) -> Result<Arc<Vec<KeyRecord>>, KeyStoreError> {
        let mut snapshot = self.snapshot.lock().await;
        if snapshot.read_at.is_some_and(|t| t.elapsed() < max_age) {
            return Ok(Arc::clone(&snapshot.keys));
        }
        Self::reread(&mut snapshot, self.repository.as_ref()).await
    }

    /// Re-reads the keys; the snapshot counts as of when the read began.
    async fn reread(
        snapshot: &mut Snapshot,
        repository: &dyn KeyRepository,
    ) -> Result<Arc<Vec<KeyRecord>>, KeyStoreError> {
        let began = Instant::now();
        let keys = Arc::new(repository.all().await?);
        snapshot.keys = Arc::clone(&keys);
        snapshot.read_at = Some(began);
        Ok(keys)
    }

    /// The keys as read after `asked`, so a key made before a request arrived is known to it,
    /// even one made a moment after the last read. Reads come at most every
    /// [`UNKNOWN_KEY_REFRESH_INTERVAL`]: a request arriving sooner waits for the next one.
    async fn keys_read_after(&self, asked: Instant) -> Result<Arc<Vec<KeyRecord>>, KeyStoreError> {
        loop {
            let wait = {
                let mut snapshot = self.snapshot.lock().await;
                match snapshot.read_at {
                    Some(t) if t >= asked => return Ok(Arc::clone(&snapshot.keys)),
                    Some(t) if t.elapsed() < UNKNOWN_KEY_REFRESH_INTERVAL => {
                        UNKNOWN_KEY_REFRESH_INTERVAL.saturating_sub(t.elapsed())
                    }
                    _ => return Self::reread(&mut snapshot, self.repository.as_ref()).await,
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    async fn forget_snapshot(&self) {
        self.snapshot.lock().await.read_at = None;
    }

    /// Checks a presented key: the identity it proves, or why it proves nothing.
    pub async fn verify(&self, presented: &str) -> Result<Identity, VerifyError> {
        let asked = Instant::now();
        let (id, secret) =
            split_key(presented).ok_or(VerifyError::Refused(TokenProblem::MalformedKey))?;
        let mut keys = self
            .keys(KEY_REFRESH_INTERVAL)
            .await
            .map_err(VerifyError::Store)?;
        if !keys.iter().any(|k| k.id == id) {
            keys = self
                .keys_read_after(asked)
                .await
                .map_err(VerifyError::Store)?;
        }
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

    /// Every key, active or revoked, oldest first.
    pub async fn list(&self) -> Result<Vec<KeyRecord>, KeyStoreError> {
        self.repository.all().await
    }

    /// Makes a key. The returned [`NewKey::key`] is the only copy of the secret.
    pub async fn create(
        &self,
        name: &str,
        scopes: &[String],
        groups: &[String],
    ) -> Result<NewKey, KeyStoreError> {
        let existing = self.repository.all().await?;
        if existing.iter().any(|k| k.name == name && k.is_active()) {
            return Err(KeyStoreError::NameTaken(name.to_owned()));
        }
        let new = mint_key(name, scopes, groups, |id| {
            existing.iter().any(|k| k.id == id)
        })?;
        self.repository.add(&new.record).await?;
        self.forget_snapshot().await;
        Ok(new)
    }

    /// Revokes every active key with this name; the records stay, marked revoked.
    pub async fn revoke(&self, name: &str) -> Result<Vec<KeyRecord>, KeyStoreError> {
        let now = now_secs();
        let mut revoked = Vec::new();
        for mut k in self.repository.all().await? {
            if k.name == name && k.is_active() && self.repository.revoke(&k.id, now).await? {
                k.revoked = Some(now);
                revoked.push(k);
            }
        }
        self.forget_snapshot().await;
        if revoked.is_empty() {
            return Err(KeyStoreError::NoSuchKey(name.to_owned()));
        }
        Ok(revoked)
    }

    /// Moves the keys of an old `api-keys.json` into the repository, once: keys already there
    /// (same id) are not added again, and the file is then renamed so the next start skips it.
    /// `None` when there is no such file.
    pub async fn import(&self, file: &ApiKeyFile) -> Result<Option<ImportReport>, KeyStoreError> {
        if !file.exists() {
            return Ok(None);
        }
        let present = self.repository.all().await?;
        let mut report = ImportReport::default();
        for record in file.list()? {
            if present.iter().any(|k| k.id == record.id) {
                report.already_present.push(record.name);
                continue;
            }
            self.repository.add(&record).await?;
            report.imported.push(record.name);
        }
        report.renamed_to = file.retire()?;
        self.forget_snapshot().await;
        Ok(Some(report))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Mutex;

    use super::*;

    /// Records in memory, standing in for the store (the store itself is tested in
    /// manifold-store, and end to end through `manifold serve`).
    #[derive(Default)]
    pub(crate) struct InMemory {
        keys: Mutex<Vec<KeyRecord>>,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl KeyRepository for InMemory {
        fn all(&self) -> RepositoryFuture<'_, Vec<KeyRecord>> {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let keys = self.keys.lock().unwrap().clone();
            Box::pin(async move { Ok(keys) })
        }
        fn add<'a>(&'a self, record: &'a KeyRecord) -> RepositoryFuture<'a, ()> {
            self.keys.lock().unwrap().push(record.clone());
            Box::pin(async { Ok(()) })
        }
        fn revoke<'a>(&'a self, id: &'a str, at: u64) -> RepositoryFuture<'a, bool> {
            let mut keys = self.keys.lock().unwrap();
            let found = keys
                .iter_mut()
                .find(|k| k.id == id && k.is_active())
                .map(|k| k.revoked = Some(at))
                .is_some();
            Box::pin(async move { Ok(found) })
        }
        fn describe(&self) -> String {
            "memory".to_owned()
        }
    }

    fn keys() -> (ApiKeys, Arc<InMemory>) {
        let repo = Arc::new(InMemory::default());
        (ApiKeys::new(repo.clone()), repo)
    }

    #[tokio::test]
    async fn a_created_key_verifies_and_only_its_digest_is_stored() {
        let (k, repo) = keys();
        let new = k
            .create("alice", &["mcp".into(), "mcp".into()], &["ops".into()])
            .await
            .unwrap();
        assert!(new.key.starts_with("mfk_"));
        assert_eq!(new.key.len(), 4 + 16 + 1 + 64);
        let id = k.verify(&new.key).await.unwrap();
        assert_eq!(id.name, "alice");
        assert_eq!(id.scopes, ["mcp"]);
        assert_eq!(id.groups, ["ops"]);
        let secret = new.key.rsplit('_').next().unwrap();
        let stored = format!("{:?}", repo.keys.lock().unwrap());
        assert!(!stored.contains(secret), "the secret is never stored");
        assert!(stored.contains(&secret_digest(secret)));
    }

    #[tokio::test]
    async fn wrong_secrets_unknown_ids_and_odd_shapes_are_refused() {
        let (k, _) = keys();
        let new = k.create("bob", &[], &[]).await.unwrap();
        let mut wrong = new.key.clone();
        let last = wrong.pop().unwrap();
        wrong.push(if last == '0' { '1' } else { '0' });
        assert!(matches!(
            k.verify(&wrong).await,
            Err(VerifyError::Refused(TokenProblem::UnknownKey))
        ));
        let other_id = format!("mfk_{}_{}", "0".repeat(16), "0".repeat(64));
        assert!(matches!(
            k.verify(&other_id).await,
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
                    k.verify(bad).await,
                    Err(VerifyError::Refused(TokenProblem::MalformedKey))
                ),
                "{bad}"
            );
        }
    }

    /// Another process (`manifold keys revoke`) changes the store; this gateway sees it within
    /// the refresh interval, without a restart.
    #[tokio::test]
    async fn revocation_by_another_process_is_seen_within_the_refresh_interval() {
        let (k, repo) = keys();
        let new = k.create("carol", &[], &[]).await.unwrap();
        assert!(k.verify(&new.key).await.is_ok());
        let other_process = ApiKeys::new(repo.clone());
        assert_eq!(other_process.revoke("carol").await.unwrap().len(), 1);
        tokio::time::sleep(KEY_REFRESH_INTERVAL).await;
        assert!(matches!(
            k.verify(&new.key).await,
            Err(VerifyError::Refused(TokenProblem::RevokedKey))
        ));
        assert!(matches!(
            other_process.revoke("carol").await,
            Err(KeyStoreError::NoSuchKey(_))
        ));
        let again = k.create("carol", &[], &[]).await.unwrap();
        assert_ne!(again.record.id, new.record.id);
        let all = k.list().await.unwrap();
        assert_eq!(all.len(), 2);
    }

    /// A key made by another process works at once, but made-up ids do not re-read the store
    /// more often than the bound allows.
    #[tokio::test]
    async fn unknown_ids_re_read_the_store_at_most_once_per_interval() {
        let (k, repo) = keys();
        k.create("dave", &[], &[]).await.unwrap();
        let first = k
            .verify(&format!("mfk_{}_{}", "1".repeat(16), "1".repeat(64)))
            .await;
        assert!(matches!(
            first,
            Err(VerifyError::Refused(TokenProblem::UnknownKey))
        ));
        let other_process = ApiKeys::new(repo.clone());
        // Made just after this gateway's last read, and presented at once: it is known.
        let fresh = other_process.create("erin", &[], &[]).await.unwrap();
        assert_eq!(k.verify(&fresh.key).await.unwrap().name, "erin");
        let before = repo.reads.load(std::sync::atomic::Ordering::SeqCst);
        let started = Instant::now();
        for i in 0..20 {
            let made_up = format!("mfk_{i:016x}_{}", "2".repeat(64));
            let _ = k.verify(&made_up).await;
        }
        let intervals = started.elapsed().as_millis() / UNKNOWN_KEY_REFRESH_INTERVAL.as_millis();
        let reads = repo.reads.load(std::sync::atomic::Ordering::SeqCst) - before;
        let allowed = usize::try_from(intervals).unwrap() + 2;
        assert!(
            reads <= allowed,
            "{reads} re-reads for 20 made-up ids (allowed {allowed})"
        );
    }

    #[tokio::test]
    async fn names_are_unique_among_active_keys_and_checked() {
        let (k, _) = keys();
        k.create("dave", &[], &[]).await.unwrap();
        assert!(matches!(
            k.create("dave", &[], &[]).await,
            Err(KeyStoreError::NameTaken(_))
        ));
        assert!(matches!(
            k.create("da ve", &[], &[]).await,
            Err(KeyStoreError::InvalidName(_))
        ));
        assert!(matches!(
            k.create("eve", &["a b".into()], &[]).await,
            Err(KeyStoreError::InvalidScope(_))
        ));
        assert!(matches!(
            k.create("eve", &[], &["a,b".into()]).await,
            Err(KeyStoreError::InvalidGroup(_))
        ));
    }
}
