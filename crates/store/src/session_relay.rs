//! Messages one replica hands to another: a legacy client's answer to a server's question, or its
//! cancellation, that reached a replica other than the one holding the call. Rows are written for
//! one replica (or '*', every replica) and read by each replica after the last row it saw; on
//! PostgreSQL the write also wakes the readers (NOTIFY), so a relayed answer arrives in
//! milliseconds rather than at the next poll.

use sqlx::Row;

use crate::error::StoreError;
use crate::store::{Pools, Store};

/// The channel replicas LISTEN on.
pub const RELAY_CHANNEL: &str = "manifold_session_relay";
/// Addressed to every replica.
pub const EVERY_REPLICA: &str = "*";
/// Largest message relayed (a sampling answer may carry an image).
pub const MAX_RELAYED_MESSAGE_BYTES: usize = 8 * 1024 * 1024;
/// Longest replica or session id accepted.
pub const MAX_RELAY_ID_LEN: usize = 1024;
/// Most rows one [`SessionRelay::since`] returns.
pub const MAX_RELAY_PAGE: usize = 256;

/// One relayed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayedMessage {
    pub seq: i64,
    pub to_replica: String,
    pub session_id: String,
    /// The JSON-RPC message as the client sent it.
    pub message: String,
}

/// The `session_relay` repository.
#[derive(Debug, Clone, Copy)]
pub struct SessionRelay<'s> {
    store: &'s Store,
}

impl Store {
    /// Messages replicas hand each other for legacy sessions.
    pub fn session_relay(&self) -> SessionRelay<'_> {
        SessionRelay { store: self }
    }
}

/// Wakes a reader when a row is written for it (PostgreSQL's LISTEN). It holds one of the
/// store's connections: drop it before [`Store::close`], which waits for every connection.
pub struct RelayListener {
    listener: sqlx::postgres::PgListener,
}

impl RelayListener {
    /// Waits for the next wake-up. An error means the connection broke: listen again.
    pub async fn woken(&mut self) -> Result<(), String> {
        self.listener
            .recv()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

impl SessionRelay<'_> {
    /// Writes `message` for `to_replica` (or [`EVERY_REPLICA`]) and wakes the readers; returns
    /// its seq.
    pub async fn send(
        &self,
        to_replica: &str,
        session_id: &str,
        message: &str,
        at_ms: i64,
    ) -> Result<i64, StoreError> {
        let invalid = |field: &'static str, reason: String| StoreError::Invalid {
            what: "relayed message",
            field,
            reason,
        };
        for (field, value) in [("to_replica", to_replica), ("session_id", session_id)] {
            if value.is_empty() || value.len() > MAX_RELAY_ID_LEN {
                return Err(invalid(
                    field,
                    format!("must be 1 to {MAX_RELAY_ID_LEN} bytes"),
                ));
            }
        }
        if message.len() > MAX_RELAYED_MESSAGE_BYTES {
            return Err(invalid(
                "message",
                format!(
                    "is {} bytes, over MAX_RELAYED_MESSAGE_BYTES ({MAX_RELAYED_MESSAGE_BYTES})",
                    message.len()
                ),
            ));
        }
        let seq = match &self.store.pools {
            Pools::Postgres(pool) => {
                sqlx::query_scalar(
                    "WITH written AS (INSERT INTO session_relay (to_replica, session_id, message, at_ms) VALUES ($1, $2, $3, $4) RETURNING seq) \
                     SELECT written.seq FROM written, LATERAL (SELECT pg_notify($5, $1)) AS woken",
                )
                .bind(to_replica)
                .bind(session_id)
                .bind(message)
                .bind(at_ms)
                .bind(RELAY_CHANNEL)
                .fetch_one(pool)
                .await
            }
            Pools::Sqlite { writer, .. } => {
                sqlx::query_scalar(
                    "INSERT INTO session_relay (to_replica, session_id, message, at_ms) VALUES ($1, $2, $3, $4) RETURNING seq",
                )
                .bind(to_replica)
                .bind(session_id)
                .bind(message)
                .bind(at_ms)
                .fetch_one(writer)
                .await
            }
        };
        seq.map_err(|e| self.store.failed(&e))
    }

    /// The newest seq written (0 when none): where a replica starting now begins reading.
    pub async fn latest_seq(&self) -> Result<i64, StoreError> {
        let sql = "SELECT COALESCE(MAX(seq), 0) FROM session_relay";
        let seq = match &self.store.pools {
            Pools::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
            Pools::Sqlite { readers, .. } => sqlx::query_scalar(sql).fetch_one(readers).await,
        };
        seq.map_err(|e| self.store.failed(&e))
    }

    /// Rows after `seq` for `replica` or for every replica, oldest first, at most `limit`
    /// (capped at [`MAX_RELAY_PAGE`]).
    pub async fn since(
        &self,
        seq: i64,
        replica: &str,
        limit: usize,
    ) -> Result<Vec<RelayedMessage>, StoreError> {
        let limit = i64::try_from(limit.min(MAX_RELAY_PAGE)).unwrap_or(1);
        let sql = "SELECT seq, to_replica, session_id, message FROM session_relay WHERE seq > $1 AND (to_replica = $2 OR to_replica = $3) ORDER BY seq LIMIT $4";
        macro_rules! read {
            ($pool:expr) => {
                sqlx::query(sql)
                    .bind(seq)
                    .bind(replica)
                    .bind(EVERY_REPLICA)
                    .bind(limit)
                    .fetch_all($pool)
                    .await
                    .and_then(|rows| {
                        rows.iter()
                            .map(|row| {
                                Ok(RelayedMessage {
                                    seq: row.try_get("seq")?,
                                    to_replica: row.try_get("to_replica")?,
                                    session_id: row.try_get("session_id")?,
                                    message: row.try_get("message")?,
                                })
                            })
                            .collect::<Result<Vec<_>, sqlx::Error>>()
                    })
            };
        }
        let rows = match &self.store.pools {
            Pools::Postgres(pool) => read!(pool),
            Pools::Sqlite { readers, .. } => read!(readers),
        };
        rows.map_err(|e| self.store.failed(&e))
    }

    /// Forgets rows written before `before_ms`; returns how many went.
    pub async fn prune(&self, before_ms: i64) -> Result<u64, StoreError> {
        let sql = "DELETE FROM session_relay WHERE at_ms < $1";
        let gone = match &self.store.pools {
            Pools::Postgres(pool) => sqlx::query(sql)
                .bind(before_ms)
                .execute(pool)
                .await
                .map(|r| r.rows_affected()),
            Pools::Sqlite { writer, .. } => sqlx::query(sql)
                .bind(before_ms)
                .execute(writer)
                .await
                .map(|r| r.rows_affected()),
        };
        gone.map_err(|e| self.store.failed(&e))
    }

    /// A listener woken by every [`SessionRelay::send`]; `None` on SQLite, which has one process
    /// and no notifications (readers poll).
    pub async fn listen(&self) -> Result<Option<RelayListener>, StoreError> {
        let Pools::Postgres(pool) = &self.store.pools else {
            return Ok(None);
        };
        let listening = async {
            let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
            listener.listen(RELAY_CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        listening
            .await
            .map(|listener| Some(RelayListener { listener }))
            .map_err(|e| self.store.failed(&e))
    }
}
