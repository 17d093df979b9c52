//! The pins a running gateway enforces (`Pins`): its copy of the repository, each server's
//! policy, the digests of what servers offer, the writes not yet taken; and the task that keeps
//! that copy and the repository in step (`keep_in_step`).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use super::review::{OfferedTool, ServerDigests, review_offered};
use super::*;
use crate::upstream::Lists;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What health shows of one server's pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPins {
    pub on_change: OnChange,
    pub pinned: usize,
    /// Recorded changes waiting for approval, by tool name.
    pub changed: Vec<(String, Change)>,
}

/// The pins a running gateway enforces: the repository, each server's policy, what it last read,
/// and the writes not yet taken by the repository.
pub struct Pins {
    repository: Arc<dyn PinRepository>,
    state: Mutex<PinState>,
    /// One [`Pins::sync`] at a time.
    syncing: tokio::sync::Mutex<()>,
    /// Woken when a review queued writes, so they go out at once.
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct PinState {
    policies: HashMap<String, OnChange>,
    file: PinFile,
    /// The repository's revision `file` reflects; `None` until it was read once.
    revision: Option<u64>,
    /// Why the repository could not be read or written, for health; `None` while all is well.
    error: Option<String>,
    /// Decisions not yet written, oldest first.
    pending: VecDeque<PinWrite>,
    /// Writes were dropped (the queue was full): read the repository again once it answers.
    resync: bool,
    /// Digests per server, valid while the server's lists are the same `Arc`.
    digests: HashMap<String, (Arc<Lists>, ServerDigests)>,
    /// (server, tool, seen digest) already logged, so a change is logged once per process.
    logged: HashSet<(String, String, String)>,
}

impl std::fmt::Debug for Pins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pins")
            .field("repository", &self.repository.describe())
            .finish_non_exhaustive()
    }
}

impl Pins {
    /// Pins kept in `repository`, with `policies` by server name (absent: warn). Reads the
    /// repository now; when it cannot be read that is reported (log and health) and retried every
    /// [`PIN_FILE_POLL`] by [`keep_in_step`], and nothing it holds is ever replaced meanwhile.
    pub async fn open(
        repository: Arc<dyn PinRepository>,
        policies: HashMap<String, OnChange>,
    ) -> Pins {
        let mut state = PinState {
            policies,
            ..PinState::default()
        };
        match repository.snapshot().await {
            Ok((file, revision)) => {
                state.file = file;
                state.revision = Some(revision);
            }
            Err(e) => {
                tracing::error!(error = %e, "tool definition pins could not be read; every tool counts as first seen until they can, and reading is retried every second");
                state.error = Some(e.to_string());
            }
        }
        Pins {
            repository,
            state: Mutex::new(state),
            syncing: tokio::sync::Mutex::new(()),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// Replaces the per-server policies (after a configuration reload); the next catalog build
    /// applies them.
    pub fn set_policies(&self, policies: HashMap<String, OnChange>) {
        self.state().policies = policies;
    }

    pub fn repository(&self) -> &Arc<dyn PinRepository> {
        &self.repository
    }

    /// A server's policy.
    pub fn policy(&self, server: &str) -> OnChange {
        self.state()
            .policies
            .get(server)
            .copied()
            .unwrap_or_default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PinState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn failed(&self, what: &str, e: &PinError) {
        let text = format!("{what}: {e}");
        let mut state = self.state();
        if state.error.as_deref() != Some(&text) {
            tracing::error!(error = %e, "{what}; the pins read before stay in force and it is retried every second");
        }
        state.error = Some(text);
    }

    /// Writes the queued decisions, then takes in what another writer changed. Returns true when
    /// the pins in force changed (the catalog should be built again).
    pub async fn sync(&self) -> bool {
        let _one = self.syncing.lock().await;
        loop {
            let batch: Vec<PinWrite> = self
                .state()
                .pending
                .iter()
                .take(PIN_WRITE_BATCH)
                .cloned()
                .collect();
            if batch.is_empty() {
                break;
            }
            match self.repository.apply(&batch).await {
                Ok(revision) => {
                    let mut state = self.state();
                    // Reviews only append, so the batch is still at the front.
                    state.pending.drain(..batch.len());
                    if state.revision.is_some_and(|r| r + 1 == revision) {
                        // Nobody else wrote in between: the copy in memory is what is stored.
                        state.revision = Some(revision);
                    }
                    state.error = None;
                }
                Err(e) => {
                    self.failed("tool definition pins could not be saved", &e);
                    return false;
                }
            }
        }
        let (seen, resync) = {
            let state = self.state();
            (state.revision, state.resync)
        };
        let current = match self.repository.revision().await {
            Ok(r) => r,
            Err(e) => {
                self.failed("tool definition pins could not be read", &e);
                return false;
            }
        };
        if seen == Some(current) && !resync {
            return false;
        }
        let (file, revision) = match self.repository.snapshot().await {
            Ok(s) => s,
            Err(e) => {
                self.failed("tool definition pins could not be read", &e);
                return false;
            }
        };
        let mut state = self.state();
        let mut merged = file;
        // Decisions made meanwhile are not lost: they go out at the next sync.
        for w in &state.pending {
            w.apply_to(&mut merged);
        }
        let changed = merged != state.file;
        state.file = merged;
        state.revision = Some(revision);
        state.resync = false;
        state.error = None;
        changed
    }

    /// Compares every offered tool with its pin: pins new ones, records and logs changes, and
    /// queues the writes for [`keep_in_step`].
    pub fn review(&self, offered: &[(&str, Arc<Lists>)]) -> Review {
        let mut state = self.state();
        let mut digested = Vec::with_capacity(offered.len());
        for (server, lists) in offered {
            let cached = state
                .digests
                .get(*server)
                .filter(|(seen, _)| Arc::ptr_eq(seen, lists))
                .map(|(_, d)| Arc::clone(d));
            let digests = match cached {
                Some(d) => d,
                None => {
                    let d: ServerDigests = Arc::new(
                        lists
                            .tools
                            .iter()
                            .filter_map(|t| {
                                let raw = t.get();
                                let name = manifold_wire::patch::get_str(raw, &["name"])
                                    .ok()
                                    .flatten()?;
                                Some(OfferedTool {
                                    name,
                                    digest: digest_tool(raw),
                                    definition: (raw.len() <= MAX_PINNED_DEFINITION_BYTES)
                                        .then(|| raw.to_owned()),
                                })
                            })
                            .collect(),
                    );
                    state
                        .digests
                        .insert((*server).to_owned(), (Arc::clone(lists), Arc::clone(&d)));
                    d
                }
            };
            digested.push(((*server).to_owned(), digests));
        }
        let now = unix_now();
        let policies = state.policies.clone();
        let mut outcome = review_offered(&mut state.file, &digested, &policies, now);
        let writes = std::mem::take(&mut outcome.writes);
        if !writes.is_empty() {
            if state.pending.len() + writes.len() > MAX_PENDING_PIN_WRITES {
                if !state.resync {
                    tracing::error!(
                        queued = state.pending.len(),
                        "tool definition pins cannot be saved and {MAX_PENDING_PIN_WRITES} writes are waiting; newer ones are dropped and the pins are read again once they can be"
                    );
                }
                state.resync = true;
            } else {
                state.pending.extend(writes);
            }
            self.wake.notify_one();
        }
        self.log(&mut state, &outcome);
        outcome
    }

    fn log(&self, state: &mut PinState, outcome: &Review) {
        let mut first: BTreeMap<&str, usize> = BTreeMap::new();
        for (server, _) in &outcome.first_sights {
            *first.entry(server.as_str()).or_default() += 1;
        }
        for (server, count) in first {
            tracing::info!(server, tools = count, store = %self.repository.describe(), "pinned tool definitions on first sight");
        }
        for (server, tool) in &outcome.back_to_pinned {
            tracing::info!(server = %server, tool = %tool, "a changed tool definition is back to its pinned form");
        }
        let mut changed: Vec<&ChangedTool> = outcome.changed.values().collect();
        changed.sort_by(|a, b| (&a.server, &a.tool).cmp(&(&b.server, &b.tool)));
        for c in changed {
            let key = (c.server.clone(), c.tool.clone(), c.seen.clone());
            if state.logged.contains(&key) {
                continue;
            }
            if state.logged.len() >= MAX_LOGGED_CHANGES {
                // A server rotating its definitions must not grow this without bound; the worst
                // case is a change logged twice.
                state.logged.clear();
            }
            state.logged.insert(key);
            let members = if c.fields.is_empty() {
                "definition".to_owned()
            } else {
                c.fields.join(", ")
            };
            let consequence = if c.withheld {
                "withheld from clients (on_change = \"block\")"
            } else {
                "still served (on_change = \"warn\")"
            };
            tracing::warn!(
                server = %c.server,
                tool = %c.tool,
                changed = %members,
                pinned_sha256 = %c.pinned,
                seen_sha256 = %c.seen,
                "tool definition changed since it was pinned: {consequence}; if the change is expected, run `manifold pins approve {}`",
                c.server
            );
        }
    }

    /// What health shows for one server.
    pub fn server_report(&self, server: &str) -> ServerPins {
        let state = self.state();
        ServerPins {
            on_change: state.policies.get(server).copied().unwrap_or_default(),
            pinned: state.file.pins.get(server).map_or(0, BTreeMap::len),
            changed: state
                .file
                .changed
                .get(server)
                .map(|c| c.iter().map(|(t, c)| (t.clone(), c.clone())).collect())
                .unwrap_or_default(),
        }
    }

    /// Why the pins could not be read or written, if they could not.
    pub fn error(&self) -> Option<String> {
        self.state().error.clone()
    }

    /// Writes decided but not yet taken by the repository.
    pub fn pending_writes(&self) -> usize {
        self.state().pending.len()
    }
}

/// Keeps a gateway's pins and the repository in step until shutdown: writes what reviews decided
/// as soon as they queue it, and every [`PIN_FILE_POLL`] reads the revision, calling `changed`
/// when another writer (an approval) changed the pins in force; ends when `changed` returns false,
/// or at shutdown, after a last write of what is queued.
pub async fn keep_in_step(
    pins: Arc<Pins>,
    changed: impl Fn() -> bool + Send + 'static,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let stopping = tokio::select! {
            () = tokio::time::sleep(PIN_FILE_POLL) => false,
            () = pins.wake.notified() => false,
            _ = shutdown.wait_for(|s| *s) => true,
        };
        let taken_in = pins.sync().await;
        if stopping || (taken_in && !changed()) {
            return;
        }
    }
}
