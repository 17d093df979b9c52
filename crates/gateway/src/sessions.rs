//! Per-session upstream connections, for servers configured with `scope = "session"`.
//!
//! A stdio server that keeps state per client (a browser, a REPL, a database transaction) must not
//! be shared between sessions. Such a server gets one connection per legacy session, started on
//! the session's first call with that session's own capabilities, and closed when the session
//! ends (the server calls [`crate::Gateway::end_session`] on DELETE, idle expiry, eviction and an
//! HTTP+SSE stream's end), so its child process ends with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use manifold_upstream::{ConnectOptions, Connection, UpstreamError, connect};
use tokio::sync::OnceCell;

use crate::router::allowed_capabilities;
use crate::server_requests::ToOriginatingClient;
use crate::upstream::UpstreamDefinition;

/// Per-session connections alive at once, across all sessions.
pub const MAX_SESSION_CONNECTIONS: usize = 1024;

type Slot = Arc<OnceCell<Connection>>;

/// Connections by session, then by server name.
#[derive(Default)]
pub struct SessionConnections {
    slots: Mutex<HashMap<String, HashMap<String, Slot>>>,
}

impl SessionConnections {
    fn slot(&self, session: &str, server: &str) -> Result<Slot, UpstreamError> {
        let mut all = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = all.values().map(HashMap::len).sum();
        let exists = all.get(session).is_some_and(|m| m.contains_key(server));
        if !exists && total >= MAX_SESSION_CONNECTIONS {
            return Err(UpstreamError::Overloaded {
                server: server.to_owned(),
                limit: MAX_SESSION_CONNECTIONS,
            });
        }
        Ok(Arc::clone(
            all.entry(session.to_owned())
                .or_default()
                .entry(server.to_owned())
                .or_default(),
        ))
    }

    /// The session's own connection to a server, started on first use.
    pub async fn connection(
        &self,
        session: &str,
        def: &UpstreamDefinition,
        client_capabilities: &str,
    ) -> Result<Connection, UpstreamError> {
        let slot = self.slot(session, &def.name)?;
        let conn = slot
            .get_or_try_init(|| async {
                let mut options = ConnectOptions::new(def.name.clone());
                options.era = def.era;
                options.handler = Arc::new(ToOriginatingClient);
                options.client.capabilities =
                    allowed_capabilities(client_capabilities, &def.client_capabilities);
                connect(&def.target, &options).await.map(|(c, _)| c)
            })
            .await?;
        if conn.is_closed() {
            // A dead child is replaced on the next call rather than failing the session forever.
            if let Ok(mut all) = self.slots.lock()
                && let Some(m) = all.get_mut(session)
            {
                m.remove(&def.name);
            }
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
        let mut all = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut taken = Vec::new();
        for slots in all.values_mut() {
            if let Some(slot) = slots.remove(server)
                && let Some(conn) = slot.get()
            {
                taken.push(conn.clone());
            }
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

/// Closes the started connections among `slots`, concurrently.
async fn close_all(slots: impl Iterator<Item = Slot>) {
    let conns: Vec<Connection> = slots.filter_map(|s| s.get().cloned()).collect();
    futures::future::join_all(conns.iter().map(Connection::close)).await;
}
