//! Shared rate limits in Manifold's store: the binary backs manifold-gateway's `SharedBuckets`
//! with manifold-store's `rate_limit_buckets`, so the gateway crate needs no database driver.
//! Only a PostgreSQL store is shared: SQLite serves one process, which counts alone anyway.

use std::sync::Arc;
use std::time::Duration;

use manifold_gateway::shared_limits::{SharedBuckets, SharedBucketsError, SharedFuture};
use manifold_store::{BucketSpend, Store, StoreError, StoreLocation};

// A round's chunk is one request to the store, within what the store takes in one.
const _: () =
    assert!(manifold_gateway::shared_limits::SHARE_CHUNK <= manifold_store::MAX_BUCKETS_PER_ROUND);

/// The store's `rate_limit_buckets`, as manifold-gateway sees them.
pub struct StoreBuckets {
    store: Arc<Store>,
}

impl std::fmt::Debug for StoreBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreBuckets")
            .field("store", &self.store.location().shown())
            .finish()
    }
}

/// Shared buckets when `store` is one several replicas can share; `None` otherwise.
pub fn shared_buckets(store: &Arc<Store>) -> Option<Arc<dyn SharedBuckets>> {
    match store.location() {
        StoreLocation::Postgres { .. } => Some(Arc::new(StoreBuckets {
            store: Arc::clone(store),
        })),
        StoreLocation::Sqlite { .. } => None,
    }
}

impl StoreBuckets {
    fn failed(&self, e: &StoreError) -> SharedBucketsError {
        SharedBucketsError {
            location: self.store.location().shown(),
            reason: e.to_string(),
        }
    }
}

impl SharedBuckets for StoreBuckets {
    fn share<'a>(&'a self, spends: &'a [(String, i64)]) -> SharedFuture<'a, Vec<i64>> {
        Box::pin(async move {
            let spends: Vec<BucketSpend> = spends
                .iter()
                .map(|(key, spent_us)| BucketSpend {
                    key: key.clone(),
                    spent_us: *spent_us,
                })
                .collect();
            self.store
                .rate_limit_buckets()
                .share(&spends)
                .await
                .map_err(|e| self.failed(&e))
        })
    }

    fn prune(&self, slack: Duration) -> SharedFuture<'_, u64> {
        Box::pin(async move {
            let slack_us = i64::try_from(slack.as_micros()).unwrap_or(i64::MAX);
            self.store
                .rate_limit_buckets()
                .prune(slack_us)
                .await
                .map_err(|e| self.failed(&e))
        })
    }
}
