//! One supervised upstream: its definition, its live connection, its lists, and why it is down.
//!
//! A supervisor task per upstream connects, loads the lists, watches for list changes and for the
//! connection's end, and reconnects with exponential backoff and jitter. A broken upstream never
//! blocks the others: callers read its state and fail fast with the recorded cause.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use manifold_upstream::paginate::ListKind;
use manifold_upstream::{
    CallEvent, CallOptions, ConnectOptions, Connection, EraChoice, PeerInfo, ServerRequestHandler,
    Target, connect,
};
use manifold_wire::{Message, meta};
use serde_json::value::RawValue;
use tokio::sync::watch;

/// First wait before reconnecting a failed upstream.
pub const RESTART_BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest wait between reconnection attempts.
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Failures within `CRASH_LOOP_WINDOW` that put an upstream in the crash-loop state.
pub const CRASH_LOOP_FAILURES: usize = 5;
/// The window in which `CRASH_LOOP_FAILURES` failures mean a crash loop.
pub const CRASH_LOOP_WINDOW: Duration = Duration::from_secs(60);
/// The wait between attempts while in a crash loop.
pub const CRASH_LOOP_RETRY: Duration = Duration::from_secs(300);
/// How long loading an upstream's lists may take.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// Which tools of an upstream are offered.
pub type ToolFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Everything the core needs to run one upstream.
#[derive(Clone)]
pub struct UpstreamDefinition {
    /// The configured name (`[servers.NAME]`).
    pub name: String,
    /// The prefix used in exposed names.
    pub prefix: String,
    pub target: Target,
    pub era: EraChoice,
    /// Idle timeout of a call (progress restarts it).
    pub timeout: Duration,
    /// Absolute cap of a call.
    pub max_timeout: Option<Duration>,
    /// Raw JSON object of the client capabilities this upstream may see.
    pub client_capabilities: String,
    pub tools_allowed: ToolFilter,
    /// Whether legacy sessions share one connection or each get their own (stdio children).
    pub scope: Scope,
    pub restart: RestartPolicy,
    /// Tools whose calls may be retried whatever their `idempotentHint` says (configuration).
    pub idempotent_tools: ToolFilter,
    /// Start only when a client first needs the gateway (`startup = "lazy"`).
    pub lazy: bool,
}

/// How a failed upstream is brought back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub crash_loop_failures: usize,
    pub crash_loop_window: Duration,
    pub crash_loop_retry: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            backoff_base: RESTART_BACKOFF_BASE,
            backoff_max: RESTART_BACKOFF_MAX,
            crash_loop_failures: CRASH_LOOP_FAILURES,
            crash_loop_window: CRASH_LOOP_WINDOW,
            crash_loop_retry: CRASH_LOOP_RETRY,
        }
    }
}

/// Who shares an upstream connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// One connection for every client; ids are remapped by the connection.
    #[default]
    Shared,
    /// One connection (one child process) per legacy session, started on the session's first
    /// call with the session's own capabilities, ended with the session. The shared connection
    /// still runs: it supplies the catalog and serves stateless (modern) clients.
    Session,
}

impl UpstreamDefinition {
    /// A definition with defaults: every tool allowed, 60 s timeout, era auto.
    pub fn new(name: impl Into<String>, target: Target) -> UpstreamDefinition {
        let name = name.into();
        UpstreamDefinition {
            prefix: name.clone(),
            name,
            target,
            era: EraChoice::Auto,
            timeout: Duration::from_secs(60),
            max_timeout: None,
            client_capabilities: "{}".to_owned(),
            tools_allowed: Arc::new(|_| true),
            scope: Scope::Shared,
            restart: RestartPolicy::default(),
            idempotent_tools: Arc::new(|_| false),
            lazy: false,
        }
    }

    /// The call options of this upstream.
    pub fn call_options(&self) -> CallOptions {
        CallOptions {
            timeout: self.timeout,
            reset_on_progress: true,
            max_total: self.max_timeout,
        }
    }
}

/// The lists an upstream offers, raw, in its order.
#[derive(Debug, Default)]
pub struct Lists {
    pub tools: Vec<Box<RawValue>>,
    pub resources: Vec<Box<RawValue>>,
    pub templates: Vec<Box<RawValue>>,
    pub prompts: Vec<Box<RawValue>>,
}

/// Where an upstream stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// A lazy upstream no client has needed yet.
    Idle,
    Starting,
    Up,
    Down {
        cause: String,
    },
    /// Failed `CRASH_LOOP_FAILURES` times within `CRASH_LOOP_WINDOW`: retried only every
    /// `CRASH_LOOP_RETRY`, never given up on.
    CrashLoop {
        cause: String,
    },
}

#[derive(Default)]
struct Live {
    conn: Option<Connection>,
    info: Option<PeerInfo>,
    up_since: Option<Instant>,
    last_error: Option<String>,
}

/// One upstream and its live state.
pub struct Upstream {
    pub def: UpstreamDefinition,
    live: RwLock<Live>,
    status: RwLock<Status>,
    lists: RwLock<Arc<Lists>>,
    restarts: AtomicU32,
    /// Wakes a lazy upstream's supervisor on first demand.
    demand: tokio::sync::Notify,
    demanded: std::sync::atomic::AtomicBool,
}

/// What a supervisor reports to the core.
#[derive(Debug, Clone)]
pub enum UpstreamEvent {
    /// Its lists or its availability changed: rebuild the catalog.
    CatalogChanged,
    /// A notification not tied to a call (resource updated, log line), from this upstream.
    Notification { server: String, message: Message },
}

fn read<T: Clone>(lock: &RwLock<T>) -> T {
    lock.read()
        .map(|g| g.clone())
        .unwrap_or_else(|p| p.into_inner().clone())
}

fn write<T>(lock: &RwLock<T>, value: T) {
    match lock.write() {
        Ok(mut g) => *g = value,
        Err(p) => *p.into_inner() = value,
    }
}

impl Upstream {
    pub fn new(def: UpstreamDefinition) -> Upstream {
        let lazy = def.lazy;
        Upstream {
            def,
            live: RwLock::new(Live::default()),
            status: RwLock::new(if lazy { Status::Idle } else { Status::Starting }),
            lists: RwLock::new(Arc::new(Lists::default())),
            restarts: AtomicU32::new(0),
            demand: tokio::sync::Notify::new(),
            demanded: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn status(&self) -> Status {
        read(&self.status)
    }

    /// Asks a lazy upstream to start (no effect once it has been asked, or if it is eager).
    /// Returns true the first time.
    pub fn wake(&self) -> bool {
        if !self.def.lazy || self.demanded.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.demand.notify_one();
        true
    }

    /// The live connection, or why there is none.
    pub fn connection(&self) -> Result<Connection, String> {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        match &live.conn {
            Some(c) if !c.is_closed() => Ok(c.clone()),
            _ => Err(match self.status() {
                Status::Down { cause } => cause,
                Status::CrashLoop { cause } => format!(
                    "it keeps failing ({} times within {}s) and is retried every {}s; last cause: {cause}",
                    self.def.restart.crash_loop_failures,
                    self.def.restart.crash_loop_window.as_secs(),
                    self.def.restart.crash_loop_retry.as_secs()
                ),
                Status::Starting => "it is still starting".to_owned(),
                Status::Idle => "it starts on first use and has not been needed yet".to_owned(),
                Status::Up => "its connection just closed".to_owned(),
            }),
        }
    }

    /// What negotiation learnt, while it is up.
    pub fn peer_info(&self) -> Option<PeerInfo> {
        self.live
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .info
            .clone()
    }

    /// Time since the connection came up.
    pub fn uptime(&self) -> Option<Duration> {
        self.live
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .up_since
            .map(|t| t.elapsed())
    }

    pub fn last_error(&self) -> Option<String> {
        self.live
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .last_error
            .clone()
    }

    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// The lists as last loaded (empty while down).
    pub fn lists(&self) -> Arc<Lists> {
        read(&self.lists)
    }

    fn set_down(&self, cause: String) {
        {
            let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
            live.conn = None;
            live.info = None;
            live.up_since = None;
            live.last_error = Some(cause.clone());
        }
        write(&self.lists, Arc::new(Lists::default()));
        write(&self.status, Status::Down { cause });
    }

    async fn load_list(
        &self,
        conn: &Connection,
        info: &PeerInfo,
        kind: ListKind,
    ) -> Vec<Box<RawValue>> {
        let capability = match kind {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::Templates => "resources",
        };
        if manifold_wire::patch::get(&info.capabilities, &[capability])
            .ok()
            .flatten()
            .is_none()
        {
            return Vec::new();
        }
        match conn
            .list_all(kind, CallOptions::with_timeout(LIST_TIMEOUT))
            .await
        {
            Ok(items) if kind == ListKind::Tools => items
                .into_iter()
                .filter(|t| {
                    manifold_wire::patch::get_str(t.get(), &["name"])
                        .ok()
                        .flatten()
                        .is_some_and(|n| (self.def.tools_allowed)(&n))
                })
                .collect(),
            Ok(items) => items,
            Err(e) => {
                tracing::warn!(server = %self.def.name, list = kind.method(), error = %e, "could not load a list; offering none");
                Vec::new()
            }
        }
    }

    async fn reload(&self, conn: &Connection, info: &PeerInfo, kinds: &[ListKind]) {
        let old = self.lists();
        let mut next = Lists {
            tools: old.tools.iter().map(|r| r.to_owned()).collect(),
            resources: old.resources.iter().map(|r| r.to_owned()).collect(),
            templates: old.templates.iter().map(|r| r.to_owned()).collect(),
            prompts: old.prompts.iter().map(|r| r.to_owned()).collect(),
        };
        for kind in kinds {
            let items = self.load_list(conn, info, *kind).await;
            match kind {
                ListKind::Tools => next.tools = items,
                ListKind::Resources => next.resources = items,
                ListKind::Templates => next.templates = items,
                ListKind::Prompts => next.prompts = items,
            }
        }
        write(&self.lists, Arc::new(next));
    }
}

const ALL_LISTS: [ListKind; 4] = [
    ListKind::Tools,
    ListKind::Resources,
    ListKind::Templates,
    ListKind::Prompts,
];

/// The lists a `notifications/*/list_changed` asks to reload.
fn lists_changed_by(method: &str) -> Option<&'static [ListKind]> {
    match method {
        "notifications/tools/list_changed" => Some(&[ListKind::Tools]),
        "notifications/prompts/list_changed" => Some(&[ListKind::Prompts]),
        "notifications/resources/list_changed" => Some(&[ListKind::Resources, ListKind::Templates]),
        _ => None,
    }
}

/// The delay before reconnection attempt `failures` (1-based): doubling, capped, with jitter.
pub fn backoff(policy: &RestartPolicy, failures: u32) -> Duration {
    let doubled = policy
        .backoff_base
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let capped = doubled.min(policy.backoff_max);
    // Jitter of up to a fifth, from the clock: spreads restarts of many upstreams apart.
    let nanos = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0),
    );
    let fifth = capped.as_millis() as u64 / 5;
    let jitter = if fifth == 0 { 0 } else { nanos % fifth };
    capped + Duration::from_millis(jitter)
}

/// How long a `subscriptions/listen` stream may stay open (it is meant to stay open).
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// For a modern upstream that announces list changes, opens the `subscriptions/listen` stream the
/// 2026-07-28 revision uses instead of unsolicited notifications.
async fn listen_for_changes(conn: &Connection, info: &PeerInfo) -> Option<manifold_upstream::Call> {
    if info.era != manifold_wire::Era::Modern {
        return None;
    }
    let announces = |cap: &str| {
        manifold_wire::patch::get(&info.capabilities, &[cap, "listChanged"])
            .ok()
            .flatten()
            .is_some_and(|v| v.trim() == "true")
    };
    let params = format!(
        r#"{{"notifications":{{"toolsListChanged":{},"promptsListChanged":{},"resourcesListChanged":{}}}}}"#,
        announces("tools"),
        announces("prompts"),
        announces("resources")
    );
    if !(announces("tools") || announces("prompts") || announces("resources")) {
        return None;
    }
    let options = CallOptions {
        timeout: LISTEN_TIMEOUT,
        reset_on_progress: false,
        max_total: None,
    };
    match conn
        .request("subscriptions/listen", Some(&params), options)
        .await
    {
        Ok(call) => Some(call),
        Err(e) => {
            tracing::debug!(server = %conn.server(), error = %e, "could not listen for list changes");
            None
        }
    }
}

/// Resolves once shutdown is asked for (the watch guard is dropped before returning).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Keeps one upstream connected until shutdown.
pub async fn supervise(
    upstream: Arc<Upstream>,
    handler: Arc<dyn ServerRequestHandler>,
    events: tokio::sync::mpsc::UnboundedSender<UpstreamEvent>,
    mut shutdown: watch::Receiver<bool>,
) {
    let def = upstream.def.clone();
    let mut failures = 0u32;
    let mut recent_failures: std::collections::VecDeque<Instant> =
        std::collections::VecDeque::new();
    if def.lazy && !upstream.demanded.load(Ordering::Acquire) {
        tokio::select! {
            _ = upstream.demand.notified() => {}
            _ = stopped(&mut shutdown) => return,
        }
    }
    loop {
        if *shutdown.borrow() {
            return;
        }
        write(&upstream.status, Status::Starting);
        let mut options = ConnectOptions::new(def.name.clone());
        options.era = def.era;
        options.handler = Arc::clone(&handler);
        options.client.capabilities = def.client_capabilities.clone();
        let connected = tokio::select! {
            c = connect(&def.target, &options) => c,
            _ = stopped(&mut shutdown) => return,
        };
        match connected {
            Ok((conn, info)) => {
                upstream.reload(&conn, &info, &ALL_LISTS).await;
                {
                    let mut live = upstream.live.write().unwrap_or_else(|p| p.into_inner());
                    live.conn = Some(conn.clone());
                    live.info = Some(info.clone());
                    live.up_since = Some(Instant::now());
                }
                write(&upstream.status, Status::Up);
                failures = 0;
                tracing::info!(server = %def.name, era = ?info.era, revision = %info.revision, "upstream is up");
                let _ = events.send(UpstreamEvent::CatalogChanged);
                let mut notes = conn.take_notifications();
                let mut listening = listen_for_changes(&conn, &info).await;
                let cause = loop {
                    let note = async {
                        match notes.as_mut() {
                            Some(rx) => rx.recv().await,
                            None => futures::future::pending().await,
                        }
                    };
                    let heard = async {
                        match listening.as_mut() {
                            Some(call) => match call.next().await {
                                Some(Ok(CallEvent::Notification(n))) => Some(n),
                                // The stream ended or failed: stop listening, keep serving.
                                _ => None,
                            },
                            None => futures::future::pending().await,
                        }
                    };
                    tokio::select! {
                        n = heard => match n {
                            Some(n) => {
                                if let Some(kinds) = lists_changed_by(n.method().unwrap_or_default()) {
                                    upstream.reload(&conn, &info, kinds).await;
                                    let _ = events.send(UpstreamEvent::CatalogChanged);
                                }
                            }
                            None => listening = None,
                        },
                        cause = conn.closed() => break cause,
                        _ = stopped(&mut shutdown) => {
                            conn.close().await;
                            return;
                        }
                        Some(n) = note => {
                            let method = n.method().unwrap_or_default();
                            if let Some(kinds) = lists_changed_by(method) {
                                upstream.reload(&conn, &info, kinds).await;
                                let _ = events.send(UpstreamEvent::CatalogChanged);
                            } else if method != meta::method::PROGRESS {
                                let _ = events.send(UpstreamEvent::Notification { server: def.name.clone(), message: n });
                            }
                        }
                    }
                };
                upstream.restarts.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(server = %def.name, cause = %cause, "upstream went down; restarting");
                upstream.set_down(cause);
                let _ = events.send(UpstreamEvent::CatalogChanged);
            }
            Err(e) => {
                tracing::warn!(server = %def.name, error = %e, "could not start upstream");
                upstream.set_down(e.to_string());
                let _ = events.send(UpstreamEvent::CatalogChanged);
            }
        }
        failures = failures.saturating_add(1);
        recent_failures.push_back(Instant::now());
        let policy = def.restart;
        while recent_failures.len() > policy.crash_loop_failures {
            recent_failures.pop_front();
        }
        let looping = recent_failures.len() == policy.crash_loop_failures
            && recent_failures
                .front()
                .is_some_and(|t| t.elapsed() <= policy.crash_loop_window);
        let wait = if looping {
            let cause = upstream.last_error().unwrap_or_default();
            tracing::error!(server = %def.name, cause = %cause, retry_in = ?policy.crash_loop_retry, "upstream is in a crash loop");
            write(&upstream.status, Status::CrashLoop { cause });
            let _ = events.send(UpstreamEvent::CatalogChanged);
            recent_failures.clear();
            policy.crash_loop_retry
        } else {
            backoff(&policy, failures)
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stopped(&mut shutdown) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_then_caps_with_bounded_jitter() {
        let p = RestartPolicy::default();
        let first = backoff(&p, 1);
        assert!(first >= RESTART_BACKOFF_BASE && first <= RESTART_BACKOFF_BASE * 6 / 5);
        let third = backoff(&p, 3);
        assert!(third >= RESTART_BACKOFF_BASE * 4 && third <= RESTART_BACKOFF_BASE * 24 / 5);
        let late = backoff(&p, 40);
        assert!(late >= RESTART_BACKOFF_MAX && late <= RESTART_BACKOFF_MAX * 6 / 5);
    }

    #[test]
    fn list_change_notifications_name_the_lists_to_reload() {
        assert_eq!(
            lists_changed_by("notifications/tools/list_changed"),
            Some(&[ListKind::Tools][..])
        );
        assert_eq!(lists_changed_by("notifications/message"), None);
    }
}
