//! Replicas handing legacy session messages to each other through Manifold's store: the binary
//! backs manifold-server's `SessionRelay` with manifold-store's `session_relay`. A message is
//! written for its replica and wakes it through PostgreSQL's LISTEN/NOTIFY; each replica reads
//! what is new for it after its last row, and polls every [`RELAY_POLL`] besides, so a lost
//! notification (a reconnect) delays a message rather than losing it. Only a PostgreSQL store
//! relays: one SQLite process has nobody to relay to. The same store keeps what legacy sessions
//! asked for (subscriptions, log level, their end: manifold-server's `SharedSessions`), for every
//! replica to read.

use manifold_store::timestamps::now_ms;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_server::relay::{RelayError, RelayFuture, RelaySend, Relayed, SessionRelay};
use manifold_server::shared_sessions::{
    SessionChange, SharedSession, SharedSessionError, SharedSessions,
};
use manifold_store::{MAX_RELAY_PAGE, Store, StoreLocation};
use manifold_wire::log_level::LogLevel;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};

/// How often a replica reads the relay without being woken.
pub const RELAY_POLL: Duration = Duration::from_secs(1);
/// How long a relayed message is kept: a question waits far less.
pub const RELAY_KEEP: Duration = Duration::from_secs(60);
/// Messages waiting for delivery to sessions here; beyond it the reader waits.
pub const RELAY_INBOX: usize = 1024;

/// The writing side, as manifold-server sees it.
struct StoreRelay {
    store: Arc<Store>,
}

impl std::fmt::Debug for StoreRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreRelay")
            .field("store", &self.store.location().shown())
            .finish()
    }
}

impl RelaySend for StoreRelay {
    fn send<'a>(&'a self, to: &'a str, session: &'a str, message: &'a str) -> RelayFuture<'a> {
        Box::pin(async move {
            self.store
                .session_relay()
                .send(to, session, message, now_ms())
                .await
                .map(|_| ())
                .map_err(|e| RelayError {
                    to: to.to_owned(),
                    reason: e.to_string(),
                })
        })
    }
}

/// What legacy sessions asked for, as manifold-server sees it: manifold-store's
/// `legacy_sessions`, each session named by the SHA-256 of its id.
struct StoreSessions {
    store: Arc<Store>,
}

impl std::fmt::Debug for StoreSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSessions")
            .field("store", &self.store.location().shown())
            .finish()
    }
}

fn session_digest(session: &str) -> String {
    manifold_telemetry::trace_context::hex(&Sha256::digest(session.as_bytes()))
}

impl SharedSessions for StoreSessions {
    fn load<'a>(
        &'a self,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Option<SharedSession>, SharedSessionError>> {
        Box::pin(async move {
            let record = self
                .store
                .legacy_sessions()
                .get(&session_digest(session))
                .await
                .map_err(|e| SharedSessionError {
                    doing: "read",
                    reason: e.to_string(),
                })?;
            Ok(record.map(|r| SharedSession {
                subscriptions: r.subscriptions,
                log_level: r.log_level.as_deref().and_then(LogLevel::parse),
                ended: r.ended,
            }))
        })
    }

    fn record<'a>(
        &'a self,
        session: &'a str,
        change: &'a SessionChange,
    ) -> BoxFuture<'a, Result<(), SharedSessionError>> {
        Box::pin(async move {
            let sessions = self.store.legacy_sessions();
            let id = session_digest(session);
            let at = now_ms();
            let written = match change {
                SessionChange::Subscribed(uri) => sessions.subscribe(&id, uri, at).await,
                SessionChange::Unsubscribed(uri) => sessions.unsubscribe(&id, uri, at).await,
                SessionChange::LogLevel(level) => {
                    sessions.set_log_level(&id, level.as_str(), at).await
                }
                SessionChange::Ended => sessions.end(&id, at).await,
            };
            written.map_err(|e| SharedSessionError {
                doing: "record",
                reason: e.to_string(),
            })
        })
    }
}

/// The reading task; stop it before the store closes (its listener holds a connection).
pub struct RelayPump {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RelayPump {
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// A random id for this replica's process: what its server requests are named by.
fn replica_id() -> String {
    let mut bytes = [0u8; 6];
    if getrandom::fill(&mut bytes).is_err() {
        // Unique enough among a few replicas on different hosts or pids.
        let pid = std::process::id().to_be_bytes();
        bytes[..4].copy_from_slice(&pid);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The relay for `store`, and its reading task, when the store is shared (PostgreSQL); legacy
/// sessions' shared state is kept for `session_lifetime` after its last change.
pub async fn start(
    store: &Arc<Store>,
    session_lifetime: Duration,
) -> Option<(SessionRelay, RelayPump)> {
    if !matches!(store.location(), StoreLocation::Postgres { .. }) {
        return None;
    }
    let replica = replica_id();
    let (inbox_tx, inbox) = mpsc::channel(RELAY_INBOX);
    let (stop, stopping) = watch::channel(false);
    let task = tokio::spawn(pump(
        Arc::clone(store),
        replica.clone(),
        session_lifetime,
        inbox_tx,
        stopping,
    ));
    let sender = Arc::new(StoreRelay {
        store: Arc::clone(store),
    });
    let sessions = Arc::new(StoreSessions {
        store: Arc::clone(store),
    });
    tracing::info!(replica = %replica, "legacy session answers are relayed between replicas through the store");
    Some((
        SessionRelay::new(replica, sender, sessions, inbox),
        RelayPump { stop, task },
    ))
}

/// Reads what is new for this replica whenever woken (or every [`RELAY_POLL`]), hands it to
/// the server, and prunes old rows now and then (relayed messages after [`RELAY_KEEP`], legacy
/// sessions unchanged for `session_lifetime`).
async fn pump(
    store: Arc<Store>,
    replica: String,
    session_lifetime: Duration,
    inbox: mpsc::Sender<Relayed>,
    mut stopping: watch::Receiver<bool>,
) {
    let relay = store.session_relay();
    // Messages written before this process started are for a process that held those calls.
    let mut cursor = relay.latest_seq().await.unwrap_or(0);
    let mut listener = None;
    let mut failing = false;
    let mut last_prune = std::time::Instant::now();
    loop {
        if listener.is_none() {
            listener = relay.listen().await.ok().flatten();
        }
        let woken = async {
            match listener.as_mut() {
                // A broken connection (not a quiet poll interval) drops the listener.
                Some(l) => !matches!(
                    tokio::time::timeout(RELAY_POLL, l.woken()).await,
                    Ok(Err(_))
                ),
                None => {
                    tokio::time::sleep(RELAY_POLL).await;
                    true
                }
            }
        };
        let keep_listener = tokio::select! {
            kept = woken => kept,
            _ = stopping.wait_for(|s| *s) => return,
        };
        if !keep_listener {
            listener = None;
        }
        loop {
            match relay.since(cursor, &replica, MAX_RELAY_PAGE).await {
                Ok(rows) => {
                    if failing {
                        failing = false;
                        tracing::info!("the session relay reads the store again");
                    }
                    let full = rows.len() == MAX_RELAY_PAGE;
                    for row in rows {
                        cursor = row.seq;
                        let relayed = Relayed {
                            session: row.session_id,
                            message: row.message,
                        };
                        if inbox.send(relayed).await.is_err() {
                            return;
                        }
                    }
                    if !full {
                        break;
                    }
                }
                Err(e) => {
                    if !failing {
                        failing = true;
                        tracing::warn!(
                            "the session relay cannot read the store ({e}); answers relayed from other replicas wait until it can"
                        );
                    }
                    break;
                }
            }
        }
        if last_prune.elapsed() >= RELAY_KEEP {
            last_prune = std::time::Instant::now();
            let keep_ms = i64::try_from(RELAY_KEEP.as_millis()).unwrap_or(i64::MAX);
            if let Err(e) = relay.prune(now_ms().saturating_sub(keep_ms)).await {
                tracing::debug!("{e} (pruning relayed messages)");
            }
            let lifetime_ms = i64::try_from(session_lifetime.as_millis()).unwrap_or(i64::MAX);
            let sessions = store.legacy_sessions();
            if let Err(e) = sessions.prune(now_ms().saturating_sub(lifetime_ms)).await {
                tracing::debug!("{e} (pruning legacy sessions' shared state)");
            }
        }
    }
}
