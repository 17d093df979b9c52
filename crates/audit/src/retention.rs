//! Retention: rows older than `[audit] retain` are pruned from the front of the trail in the
//! background, once at start and then every [`PRUNE_INTERVAL`]. The store records each prune's
//! anchor, so `manifold audit verify` still checks what is left.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use manifold_store::Store;

/// How often old rows are pruned.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// The cut-off for `retain` at `now_ms`: rows with `at_ms` below it go.
pub fn cutoff_ms(now_ms: i64, retain: Duration) -> i64 {
    now_ms.saturating_sub(i64::try_from(retain.as_millis()).unwrap_or(i64::MAX))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Prunes once now; the count of rows removed.
pub async fn prune_once(
    store: &Store,
    retain: Duration,
) -> Result<i64, manifold_store::StoreError> {
    let pruned = store
        .audit()
        .prune_before(cutoff_ms(now_ms(), retain))
        .await?;
    Ok(pruned.map_or(0, |anchor| anchor.rows))
}

/// Prunes at start and every [`PRUNE_INTERVAL`] until the task is aborted.
pub fn spawn_pruning(store: Arc<Store>, retain: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PRUNE_INTERVAL);
        loop {
            every.tick().await;
            match prune_once(&store, retain).await {
                Ok(0) => {}
                Ok(rows) => tracing::info!(rows, "pruned audit rows older than the retention"),
                Err(e) => {
                    tracing::warn!(error = %e, "could not prune old audit rows; will try again")
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_is_retain_before_now_and_never_overflows() {
        assert_eq!(cutoff_ms(10_000, Duration::from_secs(3)), 7_000);
        assert_eq!(cutoff_ms(0, Duration::from_secs(u64::MAX)), -i64::MAX);
        assert_eq!(cutoff_ms(i64::MIN, Duration::from_secs(1)), i64::MIN);
    }
}
