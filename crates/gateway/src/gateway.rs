//! The gateway: upstreams under supervision, the catalog kept current, and events for sessions.
//!
//! One task rebuilds the catalog whenever a supervisor reports a change and tells downstream
//! sessions which lists changed. The catalog is swapped whole, so requests read a consistent
//! snapshot and a hidden tool is never served from a half-built list. The set of upstreams is
//! swapped whole too (a reload, see `reconfigure.rs`): each upstream has its own supervisor
//! with its own stop signal, so one can be started or retired while the others run on.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use manifold_wire::{Message, Revision};
use tokio::sync::{broadcast, mpsc, watch};

use crate::builtin;
use crate::catalog::build::Catalog;
use crate::catalog::naming::NamingRules;
use crate::server_requests::ToOriginatingClient;
use crate::supervisor::supervise;
use crate::upstream::{LAZY_START_WAIT, Status, Upstream, UpstreamDefinition, UpstreamEvent};

/// Events downstream sessions may need to pass on.
pub const EVENT_QUEUE: usize = 1024;

/// Whether clients see every tool or only the search tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Discovery {
    #[default]
    Full,
    /// Only the built-in tools: for clients with tool-count caps or a small context.
    Search,
}

/// Gateway-wide settings.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    pub naming: NamingRules,
    pub discovery: Discovery,
    /// What `initialize` / `server/discover` say about Manifold.
    pub instructions: Option<String>,
    /// Largest tool result forwarded whole; larger ones are truncated with a note.
    pub result_max_bytes: usize,
    /// Who may see and call what (`policy.rs`); empty: everyone everything.
    pub rules: crate::policy::Policy,
    /// How often each identity may ask (`rate_limit.rs`); empty: no limits.
    pub rate_limits: crate::rate_limit::RateLimits,
    /// Tool definition pins (`pins.rs`); `None`: definitions are not pinned.
    pub pins: Option<Arc<crate::pins::Pins>>,
    /// Metrics and call log lines (`call_record.rs`); the default is a fresh registry.
    pub telemetry: Arc<manifold_telemetry::Telemetry>,
    /// The approval stage for calls an ask rule holds (`approval/`): its ledger and windows.
    pub approvals: Arc<crate::approval::Approvals>,
    /// Tools Manifold hosts beside the servers' (`hosted.rs`): authored at run time.
    pub hosted: Option<Arc<dyn crate::hosted::HostedTools>>,
    /// Where replicas share their rate-limit buckets (`shared_limits.rs`); `None`: this
    /// process counts alone.
    pub shared_buckets: Option<Arc<dyn crate::shared_limits::SharedBuckets>>,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        GatewaySettings {
            naming: NamingRules::default(),
            discovery: Discovery::Full,
            instructions: None,
            result_max_bytes: crate::truncate::DEFAULT_MAX_RESULT_BYTES,
            rules: crate::policy::Policy::default(),
            rate_limits: crate::rate_limit::RateLimits::default(),
            pins: None,
            telemetry: Arc::default(),
            approvals: Arc::default(),
            hosted: None,
            shared_buckets: None,
        }
    }
}

/// What changed, for sessions to tell their clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    /// An upstream resource changed; `uri` is the exposed URI.
    ResourceUpdated {
        uri: String,
    },
    /// A log line from an upstream not tied to any call (raw params of `notifications/message`).
    Log {
        server: String,
        params: String,
    },
}

pub(crate) struct Inner {
    pub(crate) settings: GatewaySettings,
    /// The upstreams in force; replaced whole by a reload.
    upstreams: RwLock<Arc<Vec<Arc<Upstream>>>>,
    catalog: RwLock<Arc<Catalog>>,
    catalog_error: RwLock<Option<String>>,
    pub(crate) events: broadcast::Sender<GatewayEvent>,
    pub(crate) held: crate::mrtr::HeldCalls,
    pub(crate) sessions: crate::sessions::SessionConnections,
    pub(crate) shutdown: watch::Sender<bool>,
    /// One per running upstream (retiring ones included until they stop).
    supervisors: Mutex<Vec<Supervisor>>,
    upstream_events: mpsc::UnboundedSender<UpstreamEvent>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// One reload at a time.
    pub(crate) reconfiguring: tokio::sync::Mutex<()>,
    pub(crate) calls: crate::drain::CallTracker,
    /// Rules, rate limits and task owners in force; replaced by a reload.
    pub(crate) access: crate::policy::Access,
}

/// An upstream's supervisor task and the signal that stops it.
struct Supervisor {
    upstream: Arc<Upstream>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The upstreams in force, in configuration order. A snapshot: a reload replaces the set and
/// never changes a snapshot already taken.
#[derive(Clone)]
pub struct Upstreams(Arc<Vec<Arc<Upstream>>>);

impl std::ops::Deref for Upstreams {
    type Target = [Arc<Upstream>];
    fn deref(&self) -> &[Arc<Upstream>] {
        &self.0
    }
}

impl IntoIterator for Upstreams {
    type Item = Arc<Upstream>;
    type IntoIter = std::vec::IntoIter<Arc<Upstream>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().cloned().collect::<Vec<_>>().into_iter()
    }
}

impl<'a> IntoIterator for &'a Upstreams {
    type Item = &'a Arc<Upstream>;
    type IntoIter = std::slice::Iter<'a, Arc<Upstream>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The running gateway; cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

impl Gateway {
    /// Starts every upstream's supervisor and the catalog task. Must run inside a tokio runtime.
    pub fn start(settings: GatewaySettings, definitions: Vec<UpstreamDefinition>) -> Gateway {
        let (events, _) = broadcast::channel(EVENT_QUEUE);
        let access =
            crate::policy::Access::new(settings.rules.clone(), settings.rate_limits.clone());
        let (shutdown, _) = watch::channel(false);
        let upstreams: Vec<Arc<Upstream>> = definitions
            .into_iter()
            .map(|d| Arc::new(Upstream::new(d)))
            .collect();
        let (tx, rx) = mpsc::unbounded_channel();
        let gateway = Gateway {
            inner: Arc::new(Inner {
                settings,
                upstreams: RwLock::new(Arc::new(upstreams)),
                catalog: RwLock::new(Arc::new(Catalog::default())),
                catalog_error: RwLock::new(None),
                events,
                held: crate::mrtr::HeldCalls::new(),
                sessions: crate::sessions::SessionConnections::default(),
                shutdown,
                supervisors: Mutex::new(Vec::new()),
                upstream_events: tx,
                tasks: Mutex::new(Vec::new()),
                reconfiguring: tokio::sync::Mutex::new(()),
                calls: crate::drain::CallTracker::default(),
                access,
            }),
        };
        for u in gateway.upstreams().iter() {
            gateway.start_supervisor(u);
        }
        gateway.keep_task(tokio::spawn(keep_catalog(
            Arc::downgrade(&gateway.inner),
            rx,
            gateway.inner.shutdown.subscribe(),
        )));
        if let Some(pins) = &gateway.inner.settings.pins {
            // Writes what catalog builds decide, and takes in an approval by `manifold pins
            // approve`; rebuilding lets the approved tools back in and tells clients their lists
            // changed.
            let weak = Arc::downgrade(&gateway.inner);
            gateway.keep_task(tokio::spawn(crate::pins::keep_in_step(
                Arc::clone(pins),
                move || weak.upgrade().map(|inner| rebuild(&inner)).is_some(),
                gateway.inner.shutdown.subscribe(),
            )));
        }
        if let Some(hosted) = &gateway.inner.settings.hosted {
            gateway.keep_task(tokio::spawn(tell_hosted_changes(
                Arc::downgrade(&gateway.inner),
                hosted.changes(),
                gateway.inner.shutdown.subscribe(),
            )));
        }
        if let Some(shared) = &gateway.inner.settings.shared_buckets {
            gateway.keep_task(tokio::spawn(crate::shared_limits::keep_shared(
                Arc::downgrade(&gateway.inner),
                Arc::clone(shared),
                gateway.inner.shutdown.subscribe(),
            )));
        }
        gateway.rebuild();
        gateway
    }

    /// Starts an upstream's supervisor; refused (false) once shutdown has begun.
    pub(crate) fn start_supervisor(&self, upstream: &Arc<Upstream>) -> bool {
        let mut supervisors = self
            .inner
            .supervisors
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if *self.inner.shutdown.borrow() {
            return false;
        }
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(supervise(
            Arc::clone(upstream),
            Arc::new(ToOriginatingClient),
            self.inner.upstream_events.clone(),
            stopped,
        ));
        supervisors.push(Supervisor {
            upstream: Arc::clone(upstream),
            stop,
            task,
        });
        true
    }

    /// Stops one upstream's supervisor (which closes its connection) and waits for it.
    pub(crate) async fn stop_supervisor(&self, upstream: &Arc<Upstream>) {
        let found = {
            let mut supervisors = self
                .inner
                .supervisors
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            supervisors
                .iter()
                .position(|s| Arc::ptr_eq(&s.upstream, upstream))
                .map(|i| supervisors.swap_remove(i))
        };
        if let Some(s) = found {
            s.stop.send_replace(true);
            let _ = s.task.await;
        }
    }

    /// Keeps a background task so that shutdown waits for it.
    pub(crate) fn keep_task(&self, task: tokio::task::JoinHandle<()>) {
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        *self.inner.shutdown.borrow()
    }

    /// Replaces the set of upstreams in force (the caller has started the new ones).
    pub(crate) fn replace_upstreams(&self, next: Vec<Arc<Upstream>>) {
        let next = Arc::new(next);
        match self.inner.upstreams.write() {
            Ok(mut u) => *u = next,
            Err(p) => *p.into_inner() = next,
        }
    }

    /// Waits until every upstream has finished its first start (up or down; a lazy one not yet
    /// needed counts as settled), or `limit` passes.
    pub async fn wait_started(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if self
                .upstreams()
                .iter()
                .all(|u| u.status() != Status::Starting)
            {
                self.rebuild();
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts lazy upstreams on the first request that needs the gateway, and waits (bounded by
    /// `LAZY_START_WAIT`) for them, so that first request already sees their tools.
    pub(crate) async fn wake_lazy(&self) {
        // Every lazy upstream is woken, so no short-circuiting here.
        let mut woke = false;
        for u in self.upstreams().iter() {
            woke |= u.wake();
        }
        if woke {
            tokio::time::sleep(Duration::from_millis(1)).await;
            self.wait_started(LAZY_START_WAIT).await;
        }
    }

    /// The current catalog snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.inner
            .catalog
            .read()
            .map(|c| Arc::clone(&c))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// Why the last catalog rebuild was refused (a name collision), if it was.
    pub fn catalog_error(&self) -> Option<String> {
        self.inner
            .catalog_error
            .read()
            .map(|e| e.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The upstreams in force, in configuration order.
    pub fn upstreams(&self) -> Upstreams {
        Upstreams(current_upstreams(&self.inner))
    }

    /// The upstream in force with this name.
    pub(crate) fn upstream_named(&self, name: &str) -> Option<Arc<Upstream>> {
        self.upstreams()
            .iter()
            .find(|u| u.def.name == name)
            .cloned()
    }

    /// Subscribes to list changes, resource updates and upstream logs.
    pub fn events(&self) -> broadcast::Receiver<GatewayEvent> {
        self.inner.events.subscribe()
    }

    pub fn settings(&self) -> &GatewaySettings {
        &self.inner.settings
    }

    /// Rebuilds the catalog now and tells sessions what changed.
    pub fn rebuild(&self) {
        rebuild(&self.inner);
    }

    /// The capabilities Manifold declares to clients (raw JSON).
    pub fn capabilities(&self) -> String {
        const BASE: &str = r#""tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"logging":{},"completions":{}"#;
        if self.offers_tasks() {
            format!(
                r#"{{{BASE},"extensions":{{"{}":{{}}}}}}"#,
                crate::tasks::EXTENSION
            )
        } else {
            format!("{{{BASE}}}")
        }
    }

    /// Whether any upstream offers the tasks extension, so Manifold can carry it.
    pub fn offers_tasks(&self) -> bool {
        self.upstreams().iter().any(|u| {
            u.peer_info().is_some_and(|i| {
                manifold_wire::patch::get(&i.capabilities, &["extensions", crate::tasks::EXTENSION])
                    .ok()
                    .flatten()
                    .is_some()
            })
        })
    }

    fn server_info(&self) -> String {
        server_info_json()
    }

    fn instructions_json(&self) -> String {
        let text = self.inner.settings.instructions.clone().unwrap_or_else(|| {
            "Manifold is a gateway: tools of several servers appear as SERVER__TOOL. \
             Call manifold_health to see which servers are up, and manifold_search_tools to find a tool."
                .to_owned()
        });
        manifold_wire::id::json_string(&text)
    }

    /// The result of a legacy `initialize` at the negotiated revision.
    pub fn initialize_result(&self, revision: Revision) -> String {
        format!(
            r#"{{"protocolVersion":"{revision}","capabilities":{},"serverInfo":{},"instructions":{}}}"#,
            self.capabilities(),
            self.server_info(),
            self.instructions_json()
        )
    }

    /// The result of a modern `server/discover`.
    pub fn discover_result(&self) -> String {
        format!(
            r#"{{"resultType":"complete","supportedVersions":["{}"],"capabilities":{},"serverInfo":{},"instructions":{},"ttlMs":{},"cacheScope":"private","_meta":{{"{}":{}}}}}"#,
            Revision::LATEST,
            self.capabilities(),
            self.server_info(),
            self.instructions_json(),
            crate::router::LIST_TTL_MS,
            manifold_wire::meta::SERVER_INFO,
            self.server_info()
        )
    }

    /// A legacy session ended (DELETE, expiry, disconnect): its own upstream connections close.
    pub async fn end_session(&self, session: &str) {
        self.inner.sessions.end(session).await;
    }

    /// How a session's own upstream connections are carried ("stdio CMD (pid N)").
    pub fn describe_session(&self, session: &str) -> Vec<String> {
        self.inner.sessions.describe(session)
    }

    /// Per-session upstream connections alive now.
    pub fn session_connections(&self) -> usize {
        self.inner.sessions.count()
    }

    /// Stops every supervisor and closes every upstream connection (each child process is
    /// asked to exit, then its process group is killed, and it is reaped).
    pub async fn shutdown(&self) {
        self.inner.sessions.end_all().await;
        let supervisors = {
            let mut s = self
                .inner
                .supervisors
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            // Under the lock, so no supervisor starts after this.
            self.inner.shutdown.send_replace(true);
            std::mem::take(&mut *s)
        };
        for s in &supervisors {
            s.stop.send_replace(true);
        }
        for s in supervisors {
            let _ = s.task.await;
        }
        loop {
            let tasks = self
                .inner
                .tasks
                .lock()
                .map(|mut t| std::mem::take(&mut *t))
                .unwrap_or_default();
            if tasks.is_empty() {
                break;
            }
            for t in tasks {
                let _ = t.await;
            }
        }
    }

    /// The reserved built-in tool names.
    pub fn reserved_names() -> &'static [&'static str] {
        builtin::NAMES
    }
}

fn current_upstreams(inner: &Inner) -> Arc<Vec<Arc<Upstream>>> {
    inner
        .upstreams
        .read()
        .map(|u| Arc::clone(&u))
        .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
}

pub(crate) fn rebuild(inner: &Inner) {
    rebuild_and_tell(inner, false);
}

/// Rebuilds the catalog and tells sessions which lists changed; with `everything_changed`, every
/// list, as after new rules (what each caller sees may differ even where the catalog does not).
pub(crate) fn rebuild_and_tell(inner: &Inner, everything_changed: bool) {
    let pins = inner.settings.pins.as_deref();
    match Catalog::build_pinned(
        &inner.settings.naming,
        &current_upstreams(inner),
        builtin::NAMES,
        pins,
    ) {
        Ok(next) => {
            let prev = match inner.catalog.write() {
                Ok(mut c) => std::mem::replace(&mut *c, Arc::new(next)),
                Err(p) => std::mem::replace(&mut *p.into_inner(), Arc::new(next)),
            };
            if let Ok(mut e) = inner.catalog_error.write() {
                *e = None;
            }
            let now = inner
                .catalog
                .read()
                .map(|c| Arc::clone(&c))
                .unwrap_or_else(|p| Arc::clone(&p.into_inner()));
            let same = |a: &[crate::catalog::build::Entry], b: &[crate::catalog::build::Entry]| {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.raw == y.raw)
            };
            if everything_changed || !same(&prev.tools, &now.tools) {
                let _ = inner.events.send(GatewayEvent::ToolsChanged);
            }
            if everything_changed || !same(&prev.prompts, &now.prompts) {
                let _ = inner.events.send(GatewayEvent::PromptsChanged);
            }
            if everything_changed
                || !same(&prev.resources, &now.resources)
                || !same(&prev.templates, &now.templates)
            {
                let _ = inner.events.send(GatewayEvent::ResourcesChanged);
            }
        }
        Err(collision) => {
            tracing::error!(error = %collision, "the catalog was not rebuilt; the previous one stays in force");
            if let Ok(mut e) = inner.catalog_error.write() {
                *e = Some(collision.to_string());
            }
            if everything_changed {
                for event in [
                    GatewayEvent::ToolsChanged,
                    GatewayEvent::PromptsChanged,
                    GatewayEvent::ResourcesChanged,
                ] {
                    let _ = inner.events.send(event);
                }
            }
        }
    }
}

/// Tells every session that the tool list changed when the hosted tools did.
async fn tell_hosted_changes(
    inner: std::sync::Weak<Inner>,
    mut changes: watch::Receiver<u64>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let _ = inner.events.send(GatewayEvent::ToolsChanged);
    }
}

async fn keep_catalog(
    inner: std::sync::Weak<Inner>,
    mut rx: mpsc::UnboundedReceiver<UpstreamEvent>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let event = tokio::select! {
            e = rx.recv() => e,
            _ = shutdown.wait_for(|s| *s) => None,
        };
        let Some(event) = event else {
            return;
        };
        let Some(inner) = inner.upgrade() else {
            return;
        };
        match event {
            UpstreamEvent::CatalogChanged => rebuild(&inner),
            UpstreamEvent::Notification { server, message } => {
                let method = message.method().unwrap_or_default();
                let params = message.params().unwrap_or("{}").to_owned();
                let event = match method {
                    "notifications/resources/updated" => {
                        let uri = manifold_wire::patch::get_str(&params, &["uri"])
                            .ok()
                            .flatten();
                        let namespaced =
                            inner.settings.naming.mode != crate::catalog::naming::NamingMode::Never;
                        let catalog = inner
                            .catalog
                            .read()
                            .map(|c| Arc::clone(&c))
                            .unwrap_or_else(|p| Arc::clone(&p.into_inner()));
                        uri.map(|u| GatewayEvent::ResourceUpdated {
                            uri: catalog.expose_uri(&server, &u, namespaced),
                        })
                    }
                    "notifications/message" => Some(GatewayEvent::Log { server, params }),
                    _ => None,
                };
                if let Some(e) = event {
                    let _ = inner.events.send(e);
                }
            }
        }
    }
}

/// Manifold's name and version, as `serverInfo` (raw JSON).
pub fn server_info_json() -> String {
    format!(
        r#"{{"name":"manifold","title":"Manifold MCP gateway","version":"{}"}}"#,
        env!("CARGO_PKG_VERSION")
    )
}

/// A notification message for a gateway event, as a client receives it.
pub fn event_notification(event: &GatewayEvent) -> Message {
    match event {
        GatewayEvent::ToolsChanged => {
            Message::notification("notifications/tools/list_changed", None)
        }
        GatewayEvent::PromptsChanged => {
            Message::notification("notifications/prompts/list_changed", None)
        }
        GatewayEvent::ResourcesChanged => {
            Message::notification("notifications/resources/list_changed", None)
        }
        GatewayEvent::ResourceUpdated { uri } => Message::notification(
            "notifications/resources/updated",
            Some(&format!(
                "{{\"uri\":{}}}",
                manifold_wire::id::json_string(uri)
            )),
        ),
        GatewayEvent::Log { params, .. } => {
            Message::notification("notifications/message", Some(params))
        }
    }
}
