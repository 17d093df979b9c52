//! Rate-limit buckets shared by replicas: each replica adds what its in-memory buckets spent and
//! reads back each bucket's state, in one statement per round, so several replicas count against
//! one limit while no call waits for the database. A bucket is its theoretical arrival time in
//! microseconds of the database's clock, returned as "how far ahead of now", so replicas whose
//! clocks disagree still agree on every bucket.

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::Row;

use crate::error::StoreError;
use crate::store::{Pools, Store};

/// Longest bucket key accepted (an identity and a tool name, with a tag).
pub const MAX_BUCKET_KEY_LEN: usize = 2048;
/// Most buckets one [`RateLimitBuckets::share`] round carries.
pub const MAX_BUCKETS_PER_ROUND: usize = 10_000;

/// One bucket's part of a round: what this replica spent since its last round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSpend {
    pub key: String,
    /// Microseconds of refill this replica's admissions cost (tokens × interval).
    pub spent_us: i64,
}

/// The `rate_limit_buckets` repository.
#[derive(Debug, Clone, Copy)]
pub struct RateLimitBuckets<'s> {
    store: &'s Store,
}

impl Store {
    /// Rate-limit buckets shared by the replicas of one gateway.
    pub fn rate_limit_buckets(&self) -> RateLimitBuckets<'_> {
        RateLimitBuckets { store: self }
    }
}

const POSTGRES_SHARE: &str = "WITH now_us AS (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT AS us) \
     INSERT INTO rate_limit_buckets (key, tat_us, spent_us) \
     SELECT t.k, now_us.us + t.s, t.s FROM UNNEST($1::TEXT[], $2::BIGINT[]) AS t(k, s), now_us \
     ON CONFLICT (key) DO UPDATE SET \
     tat_us = GREATEST(rate_limit_buckets.tat_us + EXCLUDED.spent_us, EXCLUDED.tat_us), \
     spent_us = EXCLUDED.spent_us \
     RETURNING key, tat_us - (SELECT us FROM now_us) AS ahead_us";

const SQLITE_SHARE: &str = "INSERT INTO rate_limit_buckets (key, tat_us, spent_us) VALUES ($1, $2 + $3, $3) \
     ON CONFLICT (key) DO UPDATE SET \
     tat_us = MAX(rate_limit_buckets.tat_us + excluded.spent_us, excluded.tat_us), \
     spent_us = excluded.spent_us \
     RETURNING tat_us - $2 AS ahead_us";

fn system_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl RateLimitBuckets<'_> {
    /// Adds each spend to its bucket (a bucket that had refilled starts from now) and returns, in
    /// the order given, how many microseconds each bucket's next arrival lies ahead of now; zero
    /// or less is a full bucket. Keys must be distinct.
    pub async fn share(&self, spends: &[BucketSpend]) -> Result<Vec<i64>, StoreError> {
        let invalid = |field: &'static str, reason: String| StoreError::Invalid {
            what: "rate-limit bucket",
            field,
            reason,
        };
        if spends.len() > MAX_BUCKETS_PER_ROUND {
            return Err(invalid(
                "keys",
                format!("at most {MAX_BUCKETS_PER_ROUND} per round"),
            ));
        }
        if let Some(bad) = spends
            .iter()
            .find(|s| s.key.is_empty() || s.key.len() > MAX_BUCKET_KEY_LEN || s.key.contains('\0'))
        {
            return Err(invalid(
                "key",
                format!(
                    "must be 1 to {MAX_BUCKET_KEY_LEN} bytes without NUL (got {} bytes)",
                    bad.key.len()
                ),
            ));
        }
        if spends.iter().any(|s| s.spent_us < 0) {
            return Err(invalid("spent_us", "must not be negative".to_owned()));
        }
        if spends.is_empty() {
            return Ok(Vec::new());
        }
        // One lock order for every replica: rows are upserted sorted by key, so two rounds
        // touching the same buckets cannot deadlock.
        let mut order: Vec<usize> = (0..spends.len()).collect();
        order.sort_by(|a, b| spends[*a].key.cmp(&spends[*b].key));
        let mut ahead = vec![0_i64; spends.len()];
        let result: Result<(), sqlx::Error> = match &self.store.pools {
            Pools::Postgres(pool) => {
                let keys: Vec<&str> = order.iter().map(|i| spends[*i].key.as_str()).collect();
                let spent: Vec<i64> = order.iter().map(|i| spends[*i].spent_us).collect();
                match sqlx::query(POSTGRES_SHARE)
                    .bind(&keys)
                    .bind(&spent)
                    .fetch_all(pool)
                    .await
                {
                    Ok(rows) => {
                        let index: std::collections::HashMap<&str, usize> = spends
                            .iter()
                            .enumerate()
                            .map(|(i, s)| (s.key.as_str(), i))
                            .collect();
                        rows.iter().try_for_each(|row| {
                            let key: String = row.try_get("key")?;
                            let value: i64 = row.try_get("ahead_us")?;
                            if let Some(i) = index.get(key.as_str()) {
                                ahead[*i] = value;
                            }
                            Ok(())
                        })
                    }
                    Err(e) => Err(e),
                }
            }
            Pools::Sqlite { writer, .. } => {
                let now = system_now_us();
                async {
                    let mut tx = writer.begin().await?;
                    for i in &order {
                        let value: i64 = sqlx::query_scalar(SQLITE_SHARE)
                            .bind(&spends[*i].key)
                            .bind(now)
                            .bind(spends[*i].spent_us)
                            .fetch_one(&mut *tx)
                            .await?;
                        ahead[*i] = value;
                    }
                    tx.commit().await
                }
                .await
            }
        };
        result.map_err(|e| self.store.failed(&e))?;
        Ok(ahead)
    }

    /// Forgets buckets that refilled more than `slack_us` ago (a full bucket is the same as no
    /// row); returns how many went.
    pub async fn prune(&self, slack_us: i64) -> Result<u64, StoreError> {
        let result = match &self.store.pools {
            Pools::Postgres(pool) => sqlx::query(
                "DELETE FROM rate_limit_buckets WHERE tat_us < (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT - $1",
            )
            .bind(slack_us)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()),
            Pools::Sqlite { writer, .. } => {
                sqlx::query("DELETE FROM rate_limit_buckets WHERE tat_us < $1 - $2")
                    .bind(system_now_us())
                    .bind(slack_us)
                    .execute(writer)
                    .await
                    .map(|r| r.rows_affected())
            }
        };
        result.map_err(|e| self.store.failed(&e))
    }
}
