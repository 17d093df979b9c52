//! One supervised upstream: its definition, its live connection, its lists, and why it is down.
//!
//! A supervisor task per upstream (`supervisor.rs`) connects, loads the lists, watches for list
//! changes and for the connection's end, and reconnects with exponential backoff and jitter,
//! changing the state kept here through the narrow interface this file offers it. A broken
//! upstream never blocks the others: callers read its state and fail fast with the recorded
//! cause. A lazy upstream with `idle_shutdown` is stopped when no call used it for that long, and
//! started again by the next call that needs it.
//!
//! An upstream that was up and went down keeps its last lists while it is restarted: its names
//! stay in the catalog (clients see no `list_changed` for a crash and the restart that follows),
//! and a call to one of its tools is refused at once with [`Unavailable`], naming the server, its
//! state, the last error and when the next attempt is. Only a crash loop withdraws the lists.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use manifold_upstream::paginate::ListKind;
use manifold_upstream::transport::stdio::{
    SandboxEnforcement, SandboxNetwork, SandboxReport, StdioSandbox,
};
use manifold_upstream::{CallOptions, Connection, EraChoice, PeerInfo, Target};
use manifold_wire::{Era, ErrorCode, ErrorObject, Message};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::patterns::NamePatterns;
use crate::tool_filter::ToolFilter;

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
/// Longest interval between two looks at whether an upstream has been idle long enough.
pub const IDLE_CHECK_MAX: Duration = Duration::from_secs(1);
/// Extra attempts of an idempotent tool call after its upstream died, refused or timed out.
pub const MAX_CALL_RETRIES: u32 = 2;
/// How long the first request waits for lazy upstreams to start.
pub const LAZY_START_WAIT: Duration = Duration::from_secs(30);
/// How often a call waiting for an upstream that is starting looks again.
const START_POLL: Duration = Duration::from_millis(20);

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
    /// Which of its tools are offered (`tools.allow` / `tools.deny`).
    pub tools_allowed: ToolFilter,
    /// Whether legacy sessions share one connection or each get their own (stdio children).
    pub scope: Scope,
    pub restart: RestartPolicy,
    /// Tools (by the upstream's own names) whose calls may be retried whatever their
    /// `idempotentHint` says (configuration); none by default.
    pub idempotent_tools: NamePatterns,
    /// How many times an idempotent call is tried again after its upstream died, refused the
    /// connection or timed out (`[servers.NAME] retries`).
    pub max_retries: u32,
    /// Start only when a client first needs the gateway (`startup = "lazy"`).
    pub lazy: bool,
    /// For a lazy upstream: stop its connection (its child process) after this long without a
    /// call; the next call starts it again. Ignored for eager upstreams.
    pub idle_shutdown: Option<Duration>,
    /// How long answers of its read-only, idempotent tools are kept and given again to the
    /// same caller for the same arguments (`[servers.NAME] cache_ttl`, `result_cache.rs`);
    /// `None`: never.
    pub result_cache_ttl: Option<Duration>,
    /// What is shown of its tools instead of what it says (`catalog/overrides.rs`), by the
    /// upstream's tool name.
    pub tool_overrides: Arc<crate::catalog::overrides::ToolOverrides>,
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
            tools_allowed: ToolFilter::allow_all(),
            scope: Scope::Shared,
            restart: RestartPolicy::default(),
            idempotent_tools: NamePatterns::none(),
            max_retries: MAX_CALL_RETRIES,
            lazy: false,
            idle_shutdown: None,
            result_cache_ttl: None,
            tool_overrides: Arc::default(),
        }
    }

    /// Whether `other` describes the same upstream, run the same way: what decides whether a
    /// reload leaves a running upstream alone or restarts it. Tool filters compare by their
    /// patterns.
    pub fn same_as(&self, other: &UpstreamDefinition) -> bool {
        self.name == other.name
            && self.prefix == other.prefix
            && same_target(&self.target, &other.target)
            && self.era == other.era
            && self.timeout == other.timeout
            && self.max_timeout == other.max_timeout
            && self.client_capabilities == other.client_capabilities
            && self.tools_allowed == other.tools_allowed
            && self.idempotent_tools == other.idempotent_tools
            && self.scope == other.scope
            && self.restart == other.restart
            && self.lazy == other.lazy
            && self.idle_shutdown == other.idle_shutdown
            && self.result_cache_ttl == other.result_cache_ttl
            && self.max_retries == other.max_retries
            && self.tool_overrides == other.tool_overrides
    }

    /// The idle limit that applies: only lazy upstreams are stopped when idle.
    pub(crate) fn idle_limit(&self) -> Option<Duration> {
        self.idle_shutdown.filter(|_| self.lazy)
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

impl Status {
    /// The state as health, readiness and the dashboard name it, with why when it is not up.
    pub fn word_and_cause(&self) -> (&'static str, Option<&str>) {
        match self {
            Status::Up => ("up", None),
            Status::Idle => ("idle", None),
            Status::Starting => ("starting", None),
            Status::Down { cause } => ("down", Some(cause)),
            Status::CrashLoop { cause } => ("crash-loop", Some(cause)),
        }
    }
}

#[derive(Default)]
struct Live {
    conn: Option<Connection>,
    info: Option<PeerInfo>,
    up_since: Option<Instant>,
    last_error: Option<String>,
    /// When the supervisor tries again, while it waits (down, or in a crash loop).
    retry_at: Option<Instant>,
    /// The current outage began when a connection that was up ended (a crash), not with a
    /// first start that failed: the upstream is restarting, with its last lists kept.
    after_crash: bool,
}

/// Why a call to an upstream is refused without being tried: the upstream is known to be down
/// (restarting after a crash, or in a crash loop). The answer a client gets is
/// [`Unavailable::to_error_object`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub server: String,
    /// As `manifold_health` shows it: `down`, `starting` (again, after a crash), `crash-loop`.
    pub state: &'static str,
    pub last_error: String,
    /// How long until the next attempt, when one is scheduled.
    pub retry_after: Option<Duration>,
    message: String,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Unavailable {
    /// The JSON-RPC error: [`ErrorCode::UpstreamUnavailable`], with `data` holding `server`,
    /// `state`, `lastError` and, when an attempt is scheduled, `retryAfterMs`.
    pub fn to_error_object(&self) -> ErrorObject {
        let mut data = serde_json::json!({
            "server": self.server,
            "state": self.state,
            "lastError": self.last_error,
        });
        if let (Some(wait), Some(fields)) = (self.retry_after, data.as_object_mut()) {
            fields.insert("retryAfterMs".to_owned(), retry_after_ms(wait).into());
        }
        let object = ErrorObject::new(ErrorCode::UpstreamUnavailable, self.message.clone());
        match RawValue::from_string(data.to_string()) {
            Ok(raw) => object.with_data(raw),
            Err(_) => object,
        }
    }
}

/// Whole milliseconds, rounded up, at least 1: a client told 0 would retry at once.
fn retry_after_ms(wait: Duration) -> u64 {
    u64::try_from(wait.as_nanos().div_ceil(1_000_000))
        .unwrap_or(u64::MAX)
        .max(1)
}

/// An upstream's sandbox as `manifold_health`, `/readyz` and `/metrics` show it.
#[derive(Debug, Clone)]
pub enum Sandbox {
    /// `profile = "off"` written: unsandboxed by choice (warned at every start).
    Off,
    /// Sandboxed: `profile` is `default` when none was written, `network` when the server has
    /// the host's network, else `strict`;
    /// `report` is the running process's, `None` while none runs (idle, starting, refused).
    On {
        profile: &'static str,
        report: Option<Arc<SandboxReport>>,
    },
    /// The default profile left a container engine's CLI to its container (every control off
    /// in `report`, saying why); `report` is `None` while none runs.
    Container { report: Option<Arc<SandboxReport>> },
}

impl Sandbox {
    /// A control is partial or missing in the running process: it runs, weaker than configured.
    pub fn is_degraded(&self) -> bool {
        matches!(self, Sandbox::On { report: Some(r), .. } if !r.degraded().is_empty())
    }

    /// The last word on each control of the running process (empty when none runs or off).
    pub fn controls(&self) -> Vec<SandboxEnforcement> {
        match self {
            Sandbox::On {
                report: Some(r), ..
            }
            | Sandbox::Container { report: Some(r) } => r.controls().into_iter().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// One word for `/readyz` and the dashboard: `off`, `container`, `degraded`, `not running`
    /// or `enforced`.
    pub fn word(&self) -> &'static str {
        match self {
            Sandbox::Off => "off",
            Sandbox::Container { .. } => "container",
            s if s.is_degraded() => "degraded",
            Sandbox::On { report: None, .. } => "not running",
            Sandbox::On { .. } => "enforced",
        }
    }
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
    /// When a call last took (or was seen using) the connection: what idle shutdown measures.
    last_used: Mutex<Instant>,
    /// Stopped for idleness: the next call that needs it starts it again.
    idle_stopped: AtomicBool,
    /// The supervisor holds a `subscriptions/listen` call open: one pending request that is
    /// not a client's call.
    listening: AtomicBool,
    /// The last client capabilities seen and what this upstream may see of them.
    last_capabilities: Mutex<Option<(String, String)>>,
}

/// What a supervisor reports to the core.
#[derive(Debug, Clone)]
pub enum UpstreamEvent {
    /// Its lists or its availability changed: rebuild the catalog.
    CatalogChanged,
    /// A notification not tied to a call (resource updated, log line), from this upstream.
    Notification {
        server: String,
        message: Box<Message>,
    },
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

/// Same process or endpoint, started the same way.
fn same_target(a: &Target, b: &Target) -> bool {
    match (a, b) {
        (Target::Stdio(a), Target::Stdio(b)) => a == b,
        (Target::Http(a), Target::Http(b)) => a == b,
        (Target::OpenApi(a), Target::OpenApi(b)) => a == b,
        _ => false,
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
            last_used: Mutex::new(Instant::now()),
            idle_stopped: AtomicBool::new(false),
            listening: AtomicBool::new(false),
            last_capabilities: Mutex::new(None),
        }
    }

    /// What this upstream is told of a client's declared capabilities (see
    /// [`allowed_capabilities`]), remembered for the last client seen: the clients
    /// of one gateway mostly declare the same thing, and working it out anew took two JSON
    /// parses on every call to a modern upstream.
    pub fn capabilities_for(&self, declared: &str) -> String {
        let mut last = self
            .last_capabilities
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some((seen, allowed)) = last.as_ref()
            && seen == declared
        {
            return allowed.clone();
        }
        let allowed = allowed_capabilities(declared, &self.def.client_capabilities);
        *last = Some((declared.to_owned(), allowed.clone()));
        allowed
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

    /// The live connection, or why there is none. Taking it counts as use (idle shutdown).
    pub fn connection(&self) -> Result<Connection, String> {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        match &live.conn {
            Some(c) if !c.is_closed() => {
                self.touch();
                Ok(c.clone())
            }
            _ => Err(match self.status() {
                Status::Down { cause } => cause,
                Status::CrashLoop { cause } => format!(
                    "it keeps failing ({} times within {}s) and is retried every {}s; last cause: {cause}",
                    self.def.restart.crash_loop_failures,
                    self.def.restart.crash_loop_window.as_secs(),
                    self.def.restart.crash_loop_retry.as_secs()
                ),
                Status::Starting if self.restarting_after_crash() => {
                    "it is restarting after its connection closed and is still starting".to_owned()
                }
                Status::Starting => "it is still starting".to_owned(),
                Status::Idle if self.idle_stopped.load(Ordering::Acquire) => {
                    "it was stopped after being idle and starts again on its next call".to_owned()
                }
                Status::Idle => "it starts on first use and has not been needed yet".to_owned(),
                Status::Up => "its connection just closed".to_owned(),
            }),
        }
    }

    /// The live connection for a call: an upstream stopped for idleness (or a lazy one not yet
    /// started) is started and waited for, up to [`LAZY_START_WAIT`]; any other
    /// upstream without a connection (one restarting after a crash included) fails at once with
    /// the cause.
    pub async fn connection_on_demand(&self) -> Result<Connection, String> {
        if let Ok(c) = self.connection() {
            return Ok(c);
        }
        if self.restarting_after_crash() {
            return self.connection();
        }
        if self.idle_stopped.swap(false, Ordering::AcqRel) {
            tracing::info!(server = %self.def.name, "a call needs an upstream stopped for idleness; starting it again");
            self.demand.notify_one();
        }
        self.wake();
        let deadline = tokio::time::Instant::now() + LAZY_START_WAIT;
        loop {
            if let Ok(c) = self.connection() {
                return Ok(c);
            }
            match self.status() {
                Status::Idle | Status::Starting if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(START_POLL).await;
                }
                _ => return self.connection(),
            }
        }
    }

    /// Whether the current outage began with a crash of a connection that was up.
    fn restarting_after_crash(&self) -> bool {
        self.live
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .after_crash
    }

    /// Why a call must not be tried now, if the upstream is known to be down: down or starting
    /// again after a crash, down after a failed start, or in a crash loop. `None` while it is up,
    /// idle (a call starts it) or in its first start (a call waits for it). `in_session`: the call
    /// comes from a legacy session, which has its own process of a `scope = "session"` upstream
    /// whatever the shared connection's state.
    pub fn unavailable(&self, in_session: bool) -> Option<Unavailable> {
        if in_session && self.def.scope == Scope::Session {
            return None;
        }
        let status = self.status();
        let (after_crash, retry_at, last_error) = {
            let live = self.live.read().unwrap_or_else(|p| p.into_inner());
            (live.after_crash, live.retry_at, live.last_error.clone())
        };
        let name = &self.def.name;
        let restarting = match self.def.target {
            Target::Stdio(_) => "restarting",
            Target::Http(_) | Target::OpenApi(_) => "reconnecting",
        };
        let retry_after = retry_at.map(|t| t.saturating_duration_since(Instant::now()));
        let retry = match retry_after {
            // Rounded as `data.retryAfterMs` is, so the two always agree.
            Some(wait) => format!(
                "retry in {}",
                crate::rate_limit::human_wait(Duration::from_millis(retry_after_ms(wait)))
            ),
            None => "retry in a moment".to_owned(),
        };
        let (state, cause, message) = match status {
            Status::Down { cause } if after_crash => {
                let message = format!(
                    "server {name:?} is {restarting}: its connection is closed ({cause}); {retry}"
                );
                ("down", cause, message)
            }
            Status::Down { cause } => {
                let message = format!(
                    "server {name:?} is down: it could not be started ({cause}); Manifold tries again by itself, {retry}"
                );
                ("down", cause, message)
            }
            // The attempt is under way: there is no scheduled time to give.
            Status::Starting if after_crash => {
                let cause = last_error.unwrap_or_default();
                let message = format!(
                    "server {name:?} is {restarting}: its connection closed ({cause}) and it is still starting; retry in a moment"
                );
                return Some(Unavailable {
                    server: name.clone(),
                    state: "starting",
                    last_error: cause,
                    retry_after: None,
                    message,
                });
            }
            Status::CrashLoop { cause } => {
                let policy = &self.def.restart;
                let message = format!(
                    "server {name:?} keeps failing ({} times within {}s) and is tried again every {}s (last error: {cause}); {retry}",
                    policy.crash_loop_failures,
                    policy.crash_loop_window.as_secs(),
                    policy.crash_loop_retry.as_secs(),
                );
                ("crash-loop", cause, message)
            }
            Status::Starting | Status::Up | Status::Idle => return None,
        };
        Some(Unavailable {
            server: name.clone(),
            state,
            last_error: cause,
            retry_after,
            message,
        })
    }

    /// Calls in flight on the shared connection (not counting the supervisor's own listen
    /// stream): what a draining upstream waits for.
    pub fn calls_in_flight(&self) -> usize {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        live.conn.as_ref().map_or(0, |c| {
            c.in_flight()
                .saturating_sub(usize::from(self.listening.load(Ordering::Acquire)))
        })
    }

    /// How the live connection is carried ("stdio CMD (pid N)"), while there is one.
    pub fn describe(&self) -> Option<String> {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        live.conn.as_ref().map(Connection::describe)
    }

    /// Whether a call asked for this lazy upstream yet (its supervisor starts it then).
    pub(crate) fn is_demanded(&self) -> bool {
        self.demanded.load(Ordering::Acquire)
    }

    /// Resolves at the next demand (a call that needs the upstream started).
    pub(crate) async fn demand_notified(&self) {
        self.demand.notified().await;
    }

    /// Whether the upstream is stopped for idleness (a demand that cleared it is a real call).
    pub(crate) fn is_idle_stopped(&self) -> bool {
        self.idle_stopped.load(Ordering::Acquire)
    }

    /// The supervisor is connecting.
    pub(crate) fn set_starting(&self) {
        write(&self.status, Status::Starting);
    }

    /// A connection came up (its lists already loaded): calls go to it from now on.
    pub(crate) fn set_up(&self, conn: &Connection, info: &PeerInfo) {
        {
            let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
            live.conn = Some(conn.clone());
            live.info = Some(info.clone());
            live.up_since = Some(Instant::now());
            live.retry_at = None;
            live.after_crash = false;
        }
        write(&self.status, Status::Up);
    }

    /// Whether the supervisor holds a `subscriptions/listen` call open on the connection.
    pub(crate) fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::Release);
    }

    /// Counts a restart after a connection that was up went down.
    pub(crate) fn count_restart(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Stops the shared connection if no call used it for `limit`; returns it to be closed.
    /// The lists stay, so the catalog keeps offering the tools and a call can start it again.
    pub(crate) fn take_if_idle(&self, limit: Duration) -> Option<Connection> {
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        let conn = live.conn.as_ref()?;
        if conn.in_flight() > usize::from(self.listening.load(Ordering::Acquire)) {
            // A long call is use too: idleness counts from when it was last seen running.
            self.touch();
            return None;
        }
        let idle_for = self
            .last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed();
        if idle_for < limit {
            return None;
        }
        let conn = live.conn.take();
        live.up_since = None;
        self.idle_stopped.store(true, Ordering::Release);
        write(&self.status, Status::Idle);
        conn
    }

    /// Its sandbox: `None` for HTTP upstreams and stdio specs built in code with none decided.
    pub fn sandbox(&self) -> Option<Sandbox> {
        let Target::Stdio(spec) = &self.def.target else {
            return None;
        };
        match &spec.sandbox {
            StdioSandbox::Unset => None,
            StdioSandbox::Off => Some(Sandbox::Off),
            // Its report (every control off, and why) comes from the transport, as a box's does.
            StdioSandbox::ContainerEngine => Some(Sandbox::Container {
                report: (self
                    .live
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .conn
                    .as_ref())
                .and_then(Connection::sandbox),
            }),
            StdioSandbox::On(sandbox) | StdioSandbox::Default(sandbox) => {
                let live = self.live.read().unwrap_or_else(|p| p.into_inner());
                Some(Sandbox::On {
                    // The profiles differ by their network; only `network` opens the host's.
                    profile: match (&spec.sandbox, sandbox.network) {
                        (StdioSandbox::Default(_), _) => "default",
                        (_, SandboxNetwork::Host) => "network",
                        _ => "strict",
                    },
                    report: live.conn.as_ref().and_then(Connection::sandbox),
                })
            }
        }
    }

    /// The era negotiation settled on, while it is up: what a call needs to know, without the
    /// copy of everything negotiation learnt that [`Upstream::peer_info`] makes.
    pub fn peer_era(&self) -> Option<Era> {
        self.live
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .info
            .as_ref()
            .map(|i| i.era)
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

    /// The lists as last loaded: kept while the upstream restarts after a crash, empty before
    /// its first start and in a crash loop.
    pub fn lists(&self) -> Arc<Lists> {
        read(&self.lists)
    }

    /// Records a failure: `crashed` when a connection that was up ended. The next attempt is in
    /// `retry_in`. The lists stay (see the module documentation).
    pub(crate) fn set_down(&self, cause: String, crashed: bool, retry_in: Duration) {
        self.record_failure(&cause, crashed, retry_in);
        write(&self.status, Status::Down { cause });
    }

    /// Records the failure that made a crash loop, and withdraws the lists: an upstream that
    /// keeps failing stops offering names it cannot serve for minutes.
    pub(crate) fn set_crash_loop(&self, cause: String, crashed: bool, retry_in: Duration) {
        self.record_failure(&cause, crashed, retry_in);
        write(&self.lists, Arc::new(Lists::default()));
        write(&self.status, Status::CrashLoop { cause });
    }

    /// Written before the status, so whoever reads a down status finds its details.
    fn record_failure(&self, cause: &str, crashed: bool, retry_in: Duration) {
        let mut live = self.live.write().unwrap_or_else(|p| p.into_inner());
        live.conn = None;
        live.info = None;
        live.up_since = None;
        live.last_error = Some(cause.to_owned());
        // A wait too long to add (no such policy is configured) is "a moment", not a panic.
        live.retry_at = Instant::now().checked_add(retry_in);
        live.after_crash |= crashed;
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
                        .is_some_and(|n| self.def.tools_allowed.allows(&n))
                })
                .collect(),
            Ok(items) => items,
            Err(e) => {
                tracing::warn!(server = %self.def.name, list = kind.method(), error = %e, "could not load a list; offering none");
                Vec::new()
            }
        }
    }

    pub(crate) async fn reload(&self, conn: &Connection, info: &PeerInfo, kinds: &[ListKind]) {
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

/// The client's declared capabilities (raw JSON object) restricted to the top-level ones the
/// configuration lets an upstream see.
pub fn allowed_capabilities(declared: &str, allowed: &str) -> String {
    let declared: Value = serde_json::from_str(declared).unwrap_or(Value::Null);
    let allowed: Value = serde_json::from_str(allowed).unwrap_or(Value::Null);
    let kept: serde_json::Map<String, Value> = declared
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| allowed.get(k.as_str()).is_some())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(kept).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_for_follows_the_client_even_when_it_changes() {
        let mut def = UpstreamDefinition::new(
            "s",
            Target::Stdio(manifold_upstream::transport::stdio::StdioSpec::default()),
        );
        def.client_capabilities = r#"{"roots":{}}"#.to_owned();
        let u = Upstream::new(def);
        let with_roots = r#"{"roots":{"listChanged":true},"sampling":{}}"#;
        let without = r#"{"sampling":{}}"#;
        for declared in [with_roots, with_roots, without, with_roots, without] {
            assert_eq!(
                u.capabilities_for(declared),
                allowed_capabilities(declared, r#"{"roots":{}}"#)
            );
        }
        assert_eq!(u.capabilities_for(without), "{}");
    }

    #[test]
    fn upstreams_see_only_declared_and_allowed_capabilities() {
        let declared = r#"{"elicitation":{"form":{}},"sampling":{},"roots":{"listChanged":true}}"#;
        let allowed = r#"{"elicitation":{},"roots":{}}"#;
        let v: Value =
            serde_json::from_str(&allowed_capabilities(declared, allowed)).unwrap_or_default();
        assert_eq!(
            v,
            serde_json::json!({"elicitation":{"form":{}},"roots":{"listChanged":true}})
        );
        assert_eq!(allowed_capabilities("{}", allowed), "{}");
        assert_eq!(allowed_capabilities(declared, "{}"), "{}");
    }
}
