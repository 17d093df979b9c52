//! Per-session upstream connections, for servers configured with `scope = "session"`.
//!
//! A stdio server that keeps state per client (a browser, a REPL, a database transaction) must not
//! be shared between sessions. Such a server gets one connection per legacy session, started on
//! the session's first call with that session's own capabilities, and closed when the session
//! ends (the server calls [`crate::Gateway::end_session`] on DELETE, idle expiry, eviction and an
//! HTTP+SSE stream's end), so its child process ends with it.
//!
//! The same mechanism keeps a legacy client's questions working on a dual-era server (one that
//! answers `server/discover` and `initialize` alike): such a server may ask its questions only as
//! server->client requests, which the modern era cannot carry, so a legacy session that declares
//! sampling, elicitation or roots gets its own legacy-era connection to it, exactly what the client
//! would have had talking to the server directly (see [`SessionConnections::legacy_connection`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use manifold_upstream::negotiate::EraChoice;
use manifold_upstream::{ConnectOptions, Connection, UpstreamError, connect};
use tokio::sync::OnceCell;

use manifold_wire::Era;

use crate::context::ClientView;
use crate::server_requests::ToOriginatingClient;
use crate::upstream::allowed_capabilities;
use crate::upstream::{Upstream, UpstreamDefinition};

/// Whether a client's calls to an upstream should go over a legacy connection of the client's own:
/// the client speaks the legacy era and can be asked questions, and the upstream was found
/// dual-era (the configuration left the era to negotiation and the server answered
/// `server/discover`), so it might ask them only the legacy way.
pub fn wants_own_legacy_connection(client: &ClientView, upstream: &Upstream) -> bool {
    client.revision.era() == Era::Legacy
        && upstream.def.era == EraChoice::Auto
        && upstream.peer_era() == Some(Era::Modern)
        && QUESTION_CAPABILITIES.iter().any(|c| client.declares(c))
}

/// The capabilities that let a server ask the client something mid-call.
const QUESTION_CAPABILITIES: [&str; 3] = ["sampling", "elicitation", "roots"];

/// Per-session connections alive at once, across all sessions.
pub const MAX_SESSION_CONNECTIONS: usize = 1024;

type Slot = Arc<OnceCell<Connection>>;

/// Which of a session's connections to a server: the `scope = "session"` one, or the legacy-era
/// one a dual-era server gets for a legacy client's questions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SlotKey {
    server: String,
    legacy_for_questions: bool,
}

/// Connections by session, then by server.
#[derive(Default)]
pub struct SessionConnections {
    slots: Mutex<HashMap<String, HashMap<SlotKey, Slot>>>,
    /// Dual-era servers whose legacy era cannot carry questions (it refused `initialize`, or
    /// serves it statelessly): their legacy clients stay on the shared modern connection, whose
    /// `input_required` Manifold turns into server requests. Forgotten on a reload of the server.
    no_legacy_questions: Mutex<HashSet<String>>,
}

impl SessionConnections {
    fn slot(&self, session: &str, key: SlotKey) -> Result<Slot, UpstreamError> {
        let mut all = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = all.values().map(HashMap::len).sum();
        let exists = all.get(session).is_some_and(|m| m.contains_key(&key));
        if !exists && total >= MAX_SESSION_CONNECTIONS {
            return Err(UpstreamError::Overloaded {
                server: key.server,
                limit: MAX_SESSION_CONNECTIONS,
            });
        }
        Ok(Arc::clone(
            all.entry(session.to_owned())
                .or_default()
                .entry(key)
                .or_default(),
        ))
    }

    fn forget(&self, session: &str, key: &SlotKey) {
        let mut all = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = all.get_mut(session) {
            m.remove(key);
        }
    }

    /// For a legacy session that declares a question capability, its own legacy-era connection
    /// to a dual-era server, started on first use with the session's own capabilities; `None`
    /// when that server's legacy era cannot carry questions, so the shared modern connection
    /// (and Manifold's translation of `input_required`) serves the session instead.
    pub async fn legacy_connection(
        &self,
        session: &str,
        def: &UpstreamDefinition,
        client_capabilities: &str,
    ) -> Result<Option<Connection>, UpstreamError> {
        if lock_set(&self.no_legacy_questions).contains(&def.name) {
            return Ok(None);
        }
        let key = SlotKey {
            server: def.name.clone(),
            legacy_for_questions: true,
        };
        let slot = self.slot(session, key.clone())?;
        // Boxed (here and in `connection`): connecting is a future of several KiB that most
        // calls never run, and inline it would make every forwarded call's future that much
        // larger, copied whole each time the call's future is moved or boxed.
        let started = slot
            .get_or_try_init(|| {
                Box::pin(async {
                    let mut options = ConnectOptions::new(def.name.clone());
                    options.era = EraChoice::Legacy;
                    options.handler = Arc::new(ToOriginatingClient);
                    options.client.capabilities =
                        allowed_capabilities(client_capabilities, &def.client_capabilities);
                    let (conn, _) = connect(&def.target, &options).await?;
                    if conn.carries_server_requests() {
                        return Ok(conn);
                    }
                    conn.close().await;
                    Err(UpstreamError::Negotiation {
                        server: def.name.clone(),
                        detail: "its legacy era is stateless, so it cannot ask questions in it"
                            .to_owned(),
                    })
                })
            })
            .await;
        match started {
            Ok(conn) if !conn.is_closed() => Ok(Some(conn.clone())),
            Ok(_) => {
                self.forget(session, &key);
                Err(UpstreamError::Closed {
                    server: def.name.clone(),
                    cause:
                        "this session's own legacy connection ended; the next call opens a new one"
                            .to_owned(),
                })
            }
            Err(e) => {
                self.forget(session, &key);
                // Only the server's answer is a lasting fact; a failure to reach it is not.
                if matches!(
                    e,
                    UpstreamError::Negotiation { .. } | UpstreamError::Rpc { .. }
                ) {
                    tracing::info!(server = %def.name, reason = %e, "legacy clients' questions go through the modern era of this server");
                    lock_set(&self.no_legacy_questions).insert(def.name.clone());
                }
                Ok(None)
            }
        }
    }

    /// The session's own connection to a server, started on first use.
    pub async fn connection(
        &self,
        session: &str,
        def: &UpstreamDefinition,
        client_capabilities: &str,
    ) -> Result<Connection, UpstreamError> {
        let key = SlotKey {
            server: def.name.clone(),
            legacy_for_questions: false,
        };
        let slot = self.slot(session, key.clone())?;
        let conn = slot
            .get_or_try_init(|| {
                Box::pin(async {
                    let mut options = ConnectOptions::new(def.name.clone());
                    options.era = def.era;
                    options.handler = Arc::new(ToOriginatingClient);
                    options.client.capabilities =
                        allowed_capabilities(client_capabilities, &def.client_capabilities);
                    connect(&def.target, &options).await.map(|(c, _)| c)
                })
            })
            .await?;
        if conn.is_closed() {
            // A dead child is replaced on the next call rather than failing the session forever.
            self.forget(session, &key);
            return Err(UpstreamError::Closed {
                server: def.name.clone(),
                cause: "this session's own server process ended; the next call starts a new one"
                    .to_owned(),
            });
        }
        Ok(conn.clone())
    }

    /// Closes every connection of a session (its child processes end and are reaped), all at
    /// once: a child that ignores its stdin closing costs seconds, and they add up otherwise.
    pub async fn end(&self, session: &str) {
        let slots = self
            .slots
            .lock()
            .map(|mut all| all.remove(session))
            .unwrap_or_else(|p| p.into_inner().remove(session));
        close_all(slots.into_iter().flat_map(HashMap::into_values)).await;
    }

    /// Takes every session's own connection to `server` out of use (a reload removed or
    /// changed it): the next call of a session starts a new one from the new definition. The
    /// caller lets their calls finish and closes them.
    pub fn take_server(&self, server: &str) -> Vec<Connection> {
        lock_set(&self.no_legacy_questions).remove(server);
        let mut all = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut taken = Vec::new();
        for slots in all.values_mut() {
            slots.retain(|key, slot| {
                if key.server != server {
                    return true;
                }
                taken.extend(slot.get().cloned());
                false
            });
        }
        all.retain(|_, slots| !slots.is_empty());
        taken
    }

    /// Every session's connections, closed together (shutdown).
    pub async fn end_all(&self) {
        let all = std::mem::take(&mut *self.slots.lock().unwrap_or_else(|p| p.into_inner()));
        close_all(all.into_values().flat_map(HashMap::into_values)).await;
    }

    /// How each of a session's connections is carried ("stdio CMD (pid N)"), for health and tests.
    pub fn describe(&self, session: &str) -> Vec<String> {
        self.slots
            .lock()
            .map(|all| {
                all.get(session)
                    .into_iter()
                    .flat_map(HashMap::values)
                    .filter_map(|s| s.get().map(Connection::describe))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Live per-session connections (for health and tests).
    pub fn count(&self) -> usize {
        self.slots
            .lock()
            .map(|all| all.values().map(HashMap::len).sum())
            .unwrap_or(0)
    }
}

fn lock_set(set: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    set.lock().unwrap_or_else(|p| p.into_inner())
}

/// Closes the started connections among `slots`, concurrently.
async fn close_all(slots: impl Iterator<Item = Slot>) {
    let conns: Vec<Connection> = slots.filter_map(|s| s.get().cloned()).collect();
    futures::future::join_all(conns.iter().map(Connection::close)).await;
}
