//! A reload: a new list of upstream definitions applied to the running gateway.
//!
//! Definitions are matched by name and compared with [`UpstreamDefinition::same_as`]. An
//! unchanged upstream is left exactly as it is (same process, same connection, same state). An
//! added or changed one is started beside the running set and given the same bounded wait for
//! its first start as at startup; only then is the set swapped, so a changed server answers from
//! its old process until its new one is ready. The catalog is rebuilt once, which tells every
//! session what changed (`notifications/*/list_changed`). Removed and replaced upstreams are
//! retired in the background: no new call reaches them, calls already running get up to the
//! drain time to finish, then their processes are stopped. Downstream sessions are not touched.
//!
//! A reload may also bring new rules, rate limits and pin policies ([`AccessChange`]). They go
//! in force together with the new set, after the collision check and before the swap, so no
//! request is ever judged by the old rules against the new catalog, and a refused reload changes
//! none of them. New rules tell every session that every list changed, once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use manifold_upstream::Connection;

use crate::builtin;
use crate::catalog::build::Catalog;
use crate::pins::OnChange;
use crate::policy::Policy;
use crate::rate_limit::RateLimits;
use crate::state::Core;
use crate::upstream::LAZY_START_WAIT;
use crate::upstream::{Status, Upstream, UpstreamDefinition};

/// How often a retiring upstream looks whether its calls have finished.
const RETIRE_POLL: Duration = Duration::from_millis(50);

/// What a reload did, by server name (each list in configuration order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconfigured {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    pub unchanged: Vec<String>,
}

impl std::fmt::Display for Reconfigured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |names: &[String]| {
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        write!(
            f,
            "added: {}; removed: {}; changed (restarted): {}; unchanged: {}",
            list(&self.added),
            list(&self.removed),
            list(&self.changed),
            list(&self.unchanged)
        )
    }
}

/// What a reload puts in force besides the servers: with them, and only if they are applied.
#[derive(Debug, Default)]
pub struct AccessChange {
    /// New rules and rate limits (every bucket starts full); `None`: those in force stay, and
    /// so does every bucket's state.
    pub rules: Option<(Policy, RateLimits)>,
    /// Each server's `on_change` pin policy, by name (absent: warn); `None`: those in force
    /// stay. Ignored when definitions are not pinned.
    pub pin_policies: Option<HashMap<String, OnChange>>,
}

/// Why a new set of definitions was not applied; the running set stays in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconfigureError {
    #[error(
        "refusing the new configuration, the running one stays in force: {0}; rename a tool with prefix or naming, or hide one with tools.deny"
    )]
    Collision(String),
    #[error("the new configuration was not applied: Manifold is shutting down")]
    ShuttingDown,
}

impl Core {
    /// Applies a new list of upstream definitions (see the module documentation). `drain` bounds
    /// how long a removed or changed upstream waits for its calls before it is stopped.
    pub async fn reconfigure(
        self: &Arc<Self>,
        definitions: Vec<UpstreamDefinition>,
        drain: Duration,
    ) -> Result<Reconfigured, ReconfigureError> {
        self.reconfigure_with(definitions, AccessChange::default(), drain)
            .await
    }

    /// [`Gateway::reconfigure`], putting `access` in force with the new set of upstreams (see
    /// the module documentation).
    pub async fn reconfigure_with(
        self: &Arc<Self>,
        definitions: Vec<UpstreamDefinition>,
        access: AccessChange,
        drain: Duration,
    ) -> Result<Reconfigured, ReconfigureError> {
        let _one_at_a_time = self.reconfiguring.lock().await;
        if self.is_shutting_down() {
            return Err(ReconfigureError::ShuttingDown);
        }
        let current = self.upstreams();
        let mut summary = Reconfigured::default();
        let mut next: Vec<Arc<Upstream>> = Vec::with_capacity(definitions.len());
        let mut started: Vec<Arc<Upstream>> = Vec::new();
        for def in definitions {
            match current.iter().find(|u| u.def.name == def.name) {
                Some(running) if running.def.same_as(&def) => {
                    summary.unchanged.push(def.name.clone());
                    next.push(Arc::clone(running));
                }
                found => {
                    if found.is_some() {
                        summary.changed.push(def.name.clone());
                    } else {
                        summary.added.push(def.name.clone());
                    }
                    let fresh = Arc::new(Upstream::new(def));
                    started.push(Arc::clone(&fresh));
                    next.push(fresh);
                }
            }
        }
        let retired: Vec<Arc<Upstream>> = current
            .iter()
            .filter(|u| !next.iter().any(|n| Arc::ptr_eq(n, u)))
            .cloned()
            .collect();
        summary.removed = retired
            .iter()
            .filter(|u| !next.iter().any(|n| n.def.name == u.def.name))
            .map(|u| u.def.name.clone())
            .collect();

        for u in &started {
            if !self.start_supervisor(u) {
                return Err(ReconfigureError::ShuttingDown);
            }
        }
        settle(&started, LAZY_START_WAIT).await;
        if let Err(collision) = Catalog::build(&self.settings().naming, &next, builtin::NAMES) {
            for u in &started {
                self.stop_supervisor(u).await;
            }
            return Err(ReconfigureError::Collision(collision.to_string()));
        }

        // The rules and pin policies first: the catalog built below, and every request from the
        // swap on, see the new ones.
        if let (Some(policies), Some(pins)) = (access.pin_policies, &self.settings().pins) {
            pins.set_policies(policies);
        }
        let rules_changed = access.rules.is_some();
        if let Some((rules, limits)) = access.rules {
            self.install_access(rules, limits);
        }
        // From here on no new call reaches a retired upstream, nor a session's own process of it.
        self.replace_upstreams(next);
        let session_connections: Vec<(Arc<Upstream>, Vec<Connection>)> = retired
            .into_iter()
            .map(|u| {
                let conns = self.sessions.take_server(&u.def.name);
                (u, conns)
            })
            .collect();
        crate::state::rebuild_and_tell(self, rules_changed);
        for (upstream, conns) in session_connections {
            let core = Arc::clone(self);
            self.keep_task(tokio::spawn(async move {
                core.retire(upstream, conns, drain).await;
            }));
        }
        Ok(summary)
    }

    /// Lets a removed or replaced upstream finish its calls (up to `drain`), then stops it and
    /// the sessions' own processes of it.
    async fn retire(&self, upstream: Arc<Upstream>, sessions: Vec<Connection>, drain: Duration) {
        let name = upstream.def.name.clone();
        let deadline = tokio::time::Instant::now() + drain;
        let mut shutdown = self.shutdown.subscribe();
        loop {
            let busy = upstream.calls_in_flight()
                + sessions.iter().map(Connection::in_flight).sum::<usize>();
            if busy == 0 {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(server = %name, calls = busy, "a server removed or changed by a reload still had calls running when its drain time passed; stopping it anyway");
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(RETIRE_POLL) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
        futures::future::join_all(sessions.iter().map(Connection::close)).await;
        self.stop_supervisor(&upstream).await;
        tracing::info!(server = %name, "stopped the previous process of a server removed or changed by a reload");
    }
}

/// Waits until none of `upstreams` is still in its first start, or `limit` passes.
async fn settle(upstreams: &[Arc<Upstream>], limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline
        && upstreams.iter().any(|u| u.status() == Status::Starting)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_kind_of_change() {
        let r = Reconfigured {
            added: vec!["a".to_owned()],
            removed: vec![],
            changed: vec!["c".to_owned(), "d".to_owned()],
            unchanged: vec!["u".to_owned()],
        };
        assert_eq!(
            r.to_string(),
            "added: a; removed: none; changed (restarted): c, d; unchanged: u"
        );
    }
}
