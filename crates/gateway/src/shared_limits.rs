//! Rate limits shared by replicas. Behind a load balancer, N replicas that each count on their
//! own admit N times the limit. So, when the gateway is given a shared store, every
//! [`SHARE_INTERVAL`] one round sends each bucket's spend since the last round to the store,
//! which adds every replica's spends in one shared bucket, and each local bucket adopts the
//! shared state. Calls are still judged from memory alone: the store is never on a call's path.
//!
//! The error is bounded and stated: between two rounds each replica judges by what it knew at
//! the last one, so across N replicas a limit can admit at most (N - 1) times (its burst plus
//! what refills in one interval) more than configured, and the excess is paid back afterwards
//! (the shared bucket runs ahead by it), so over a longer window the count is exact. While the
//! store does not answer, each replica counts on its own and keeps its spends for the next round.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::rate_limit::RateLimiter;

/// How often a replica shares its buckets.
pub const SHARE_INTERVAL: Duration = Duration::from_millis(250);
/// Most buckets sent in one request to the store; a round sends as many requests as it needs.
pub const SHARE_CHUNK: usize = 1000;
/// How often the shared buckets that have refilled are pruned, and how long after refilling.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(60);
pub const PRUNE_SLACK: Duration = Duration::from_secs(60);

/// A shared store that cannot take a round.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shared rate-limit buckets in {location} could not be updated: {reason}")]
pub struct SharedBucketsError {
    pub location: String,
    pub reason: String,
}

pub type SharedFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, SharedBucketsError>> + Send + 'a>>;

/// Where replicas keep their shared buckets (the binary backs it with the store).
pub trait SharedBuckets: std::fmt::Debug + Send + Sync {
    /// Adds each `(key, spent microseconds)` to its shared bucket and returns, in order, how
    /// many microseconds each bucket's next arrival lies ahead of now (zero or less: full).
    fn share<'a>(&'a self, spends: &'a [(String, i64)]) -> SharedFuture<'a, Vec<i64>>;
    /// Forgets shared buckets that refilled more than `slack` ago.
    fn prune(&self, slack: Duration) -> SharedFuture<'_, u64>;
}

/// The store's key for a local bucket: its tag, then the SHA-256 of the whole local key, so
/// every key has one short, printable form (identity and tool names may hold any character) and
/// the store does not list who calls what.
fn shared_key(local: &str) -> String {
    use sha2::{Digest, Sha256};
    let tag = local.split_inclusive('/').next().unwrap_or_default();
    format!(
        "{tag}{}",
        manifold_telemetry::trace_context::hex(&Sha256::digest(local.as_bytes()))
    )
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// One round for `limiter`: returns how many buckets were shared. On failure every spend not
/// yet shared is given back to its bucket, so nothing admitted goes uncounted.
pub async fn share_round(
    limiter: &RateLimiter,
    shared: &dyn SharedBuckets,
) -> Result<usize, SharedBucketsError> {
    let spends = limiter.take_spends(Instant::now());
    let mut done = 0;
    for chunk in spends.chunks(SHARE_CHUNK) {
        let sent: Vec<(String, i64)> = chunk
            .iter()
            .map(|(k, d)| (shared_key(k), micros(*d)))
            .collect();
        match shared.share(&sent).await {
            Ok(ahead) => {
                let now = Instant::now();
                for ((key, _), ahead) in chunk.iter().zip(ahead) {
                    let ahead = Duration::from_micros(u64::try_from(ahead).unwrap_or(0));
                    limiter.adopt(key, ahead, now);
                }
                done += chunk.len();
            }
            Err(e) => {
                for (key, spent) in &spends[done..] {
                    limiter.restore(key, *spent);
                }
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// The gateway's round loop: shares the buckets in force (a reload's new ones adopt the shared
/// state at their first round), says once when the store stops and starts answering, and prunes.
pub(crate) async fn keep_shared(
    limiter_in_force: impl Fn() -> Option<Arc<RateLimiter>> + Send + 'static,
    shared: Arc<dyn SharedBuckets>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut failing = false;
    let mut last_prune = Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep(SHARE_INTERVAL) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let Some(limiter) = limiter_in_force() else {
            return;
        };
        if limiter.is_off() {
            continue;
        }
        match share_round(&limiter, shared.as_ref()).await {
            Ok(_) if failing => {
                failing = false;
                tracing::info!("shared rate limits: the store answers again; limits are shared");
            }
            Ok(_) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(
                    "{e}; each replica counts its rate limits on its own until the store answers"
                );
            }
            Err(_) => {}
        }
        if last_prune.elapsed() >= PRUNE_INTERVAL {
            last_prune = Instant::now();
            if let Err(e) = shared.prune(PRUNE_SLACK).await {
                tracing::debug!("{e} (pruning refilled buckets)");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::rate_limit::{Limit, RateLimitSpec, RateLimits, Who};

    /// The shared store's arithmetic, in memory: a bucket is its arrival time in microseconds
    /// of one clock, as the store's table keeps it.
    #[derive(Debug, Default)]
    struct MemoryShared {
        buckets: Mutex<HashMap<String, i64>>,
        down: AtomicBool,
        epoch: Option<Instant>,
    }

    impl MemoryShared {
        fn new() -> MemoryShared {
            MemoryShared {
                epoch: Some(Instant::now()),
                ..MemoryShared::default()
            }
        }
        fn now_us(&self) -> i64 {
            micros(self.epoch.unwrap().elapsed())
        }
    }

    impl SharedBuckets for MemoryShared {
        fn share<'a>(&'a self, spends: &'a [(String, i64)]) -> SharedFuture<'a, Vec<i64>> {
            Box::pin(async move {
                if self.down.load(Ordering::SeqCst) {
                    return Err(SharedBucketsError {
                        location: "memory".into(),
                        reason: "down".into(),
                    });
                }
                let now = self.now_us();
                let mut buckets = self.buckets.lock().unwrap();
                Ok(spends
                    .iter()
                    .map(|(key, spent)| {
                        let tat = buckets.entry(key.clone()).or_insert(now);
                        *tat = (*tat).max(now) + spent;
                        *tat - now
                    })
                    .collect())
            })
        }
        fn prune(&self, _: Duration) -> SharedFuture<'_, u64> {
            Box::pin(async { Ok(0) })
        }
    }

    fn limiter(per_minute: u32) -> RateLimiter {
        RateLimiter::new(
            RateLimits::compile(RateLimitSpec {
                per_identity: Some(Limit::per(per_minute, Duration::from_secs(60))),
                per_tool: Some(Limit::per(per_minute, Duration::from_secs(60))),
                ..RateLimitSpec::default()
            })
            .unwrap(),
        )
    }

    fn admitted(l: &RateLimiter, who: Who<'_>, tries: usize) -> usize {
        (0..tries)
            .filter(|_| l.check_identity(who, Instant::now()).is_ok())
            .count()
    }

    #[tokio::test]
    async fn a_replica_that_shared_its_spend_exhausts_the_others_bucket() {
        let shared = MemoryShared::new();
        let (a, b) = (limiter(6), limiter(6));
        let alice = Who::Identity("alice");
        assert_eq!(admitted(&a, alice, 10), 6);
        // b has its own bucket for alice already (one call), as a replica in service would.
        assert_eq!(admitted(&b, alice, 1), 1);
        assert!(share_round(&a, &shared).await.unwrap() >= 1);
        assert!(share_round(&b, &shared).await.unwrap() >= 1);
        // Together they spent 7 of 6: b owes, and so does a once it hears of b's call.
        assert_eq!(admitted(&b, alice, 5), 0);
        share_round(&a, &shared).await.unwrap();
        assert_eq!(admitted(&a, alice, 5), 0);
        // Bob is someone else, on either replica.
        assert_eq!(admitted(&b, Who::Identity("bob"), 2), 2);
    }

    #[tokio::test]
    async fn tool_buckets_are_shared_apart_from_identity_buckets() {
        let shared = MemoryShared::new();
        let (a, b) = (limiter(2), limiter(2));
        let alice = Who::Identity("alice");
        let now = Instant::now();
        assert!(a.check_tool(alice, "git__push", now).is_ok());
        assert!(a.check_tool(alice, "git__push", now).is_ok());
        assert!(b.check_tool(alice, "git__push", now).is_ok());
        share_round(&a, &shared).await.unwrap();
        share_round(&b, &shared).await.unwrap();
        assert!(b.check_tool(alice, "git__push", Instant::now()).is_err());
        // The identity bucket of alice was never touched: still full on both.
        assert_eq!(admitted(&b, alice, 2), 2);
        // The store holds one tool bucket so far; after a round, alice's identity bucket too.
        let keys = || -> Vec<String> { shared.buckets.lock().unwrap().keys().cloned().collect() };
        assert_eq!(keys().len(), 1, "{:?}", keys());
        share_round(&b, &shared).await.unwrap();
        let mut stored = keys();
        stored.sort();
        assert_eq!(stored.len(), 2, "{stored:?}");
        assert!(
            stored[0].starts_with("id/") && stored[1].starts_with("tool/"),
            "{stored:?}"
        );
        assert!(
            stored.iter().all(|k| k.len() <= 69 && !k.contains("alice")),
            "{stored:?}"
        );
    }

    #[tokio::test]
    async fn a_round_that_fails_keeps_its_spends_for_the_next() {
        let shared = MemoryShared::new();
        let (a, b) = (limiter(4), limiter(4));
        let alice = Who::Identity("alice");
        assert_eq!(admitted(&a, alice, 4), 4);
        assert_eq!(admitted(&b, alice, 1), 1);
        shared.down.store(true, Ordering::SeqCst);
        assert!(share_round(&a, &shared).await.is_err());
        shared.down.store(false, Ordering::SeqCst);
        share_round(&a, &shared).await.unwrap();
        share_round(&b, &shared).await.unwrap();
        // a's four calls reached the store after all: b is refused.
        assert_eq!(admitted(&b, alice, 3), 0);
    }

    #[tokio::test]
    async fn full_untouched_buckets_are_not_sent() {
        let shared = MemoryShared::new();
        let a = limiter(600);
        let alice = Who::Identity("alice");
        assert_eq!(admitted(&a, alice, 1), 1);
        assert_eq!(share_round(&a, &shared).await.unwrap(), 1);
        // 600 a minute refills in 100 ms: then the bucket is full and has nothing to say.
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(share_round(&a, &shared).await.unwrap(), 0);
    }
}
