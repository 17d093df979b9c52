//! The gateway's owned state and the operations on it that are not the request pipeline: the
//! upstreams in force and their supervisors, the catalog cell and its rebuilds, events, sessions'
//! own connections, the call tracker and the access state. The facade (`gateway.rs`) holds one
//! `Arc<Core>`; the pipeline's stages (`router.rs`, `policy/gates.rs`, `call_record.rs`,
//! `hosted.rs`), the drain (`drain.rs`) and reloads (`reconfigure.rs`) are methods on `Core` and
//! never see the facade.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use manifold_wire::Revision;
use tokio::sync::{broadcast, mpsc, watch};

use crate::builtin::names::NAMES;
use crate::catalog::build::Catalog;
use crate::events::GatewayEvent;
use crate::gateway_settings::GatewaySettings;
use crate::server_requests::ToOriginatingClient;
use crate::supervisor::supervise;
use crate::upstream::{LAZY_START_WAIT, Status, Upstream, UpstreamEvent};

/// How long clients may cache a list (modern era `ttlMs`).
pub const LIST_TTL_MS: u64 = 60_000;

/// What the gateway owns: every part the facade and the pipeline work on.
pub struct Core {
    pub(crate) settings: GatewaySettings,
    /// The upstreams in force; replaced whole by a reload.
    pub(crate) upstreams: RwLock<Arc<Vec<Arc<Upstream>>>>,
    pub(crate) catalog: RwLock<Arc<Catalog>>,
    pub(crate) catalog_error: RwLock<Option<String>>,
    /// Held through one rebuild of the catalog, from reading the upstreams' lists to storing
    /// the result: two rebuilds that overlapped (the catalog task's, after an upstream came up,
    /// and `wait_started`'s) could store out of order, an older view replacing a newer one, and
    /// a call until the next rebuild found a tool of a server already up unknown.
    pub(crate) rebuilding: Mutex<()>,
    pub(crate) events: broadcast::Sender<GatewayEvent>,
    pub(crate) held: crate::mrtr::HeldCalls,
    pub(crate) sessions: crate::sessions::SessionConnections,
    pub(crate) shutdown: watch::Sender<bool>,
    /// One per running upstream (retiring ones included until they stop).
    pub(crate) supervisors: Mutex<Vec<Supervisor>>,
    pub(crate) upstream_events: mpsc::UnboundedSender<UpstreamEvent>,
    pub(crate) tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// One reload at a time.
    pub(crate) reconfiguring: tokio::sync::Mutex<()>,
    pub(crate) calls: Arc<crate::drain::CallTracker>,
    /// Rules, rate limits and task owners in force; replaced by a reload.
    pub(crate) access: crate::policy::Access,
    /// Answers of read-only, idempotent tools, for servers with a `cache_ttl`.
    pub(crate) results: crate::result_cache::ResultCache,
}

/// An upstream's supervisor task and the signal that stops it.
pub(crate) struct Supervisor {
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) task: tokio::task::JoinHandle<()>,
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

impl Core {
    /// Starts an upstream's supervisor; refused (false) once shutdown has begun.
    pub(crate) fn start_supervisor(&self, upstream: &Arc<Upstream>) -> bool {
        let mut supervisors = self.supervisors.lock().unwrap_or_else(|p| p.into_inner());
        if *self.shutdown.borrow() {
            return false;
        }
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(supervise(
            Arc::clone(upstream),
            Arc::new(ToOriginatingClient),
            self.upstream_events.clone(),
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
            let mut supervisors = self.supervisors.lock().unwrap_or_else(|p| p.into_inner());
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
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Replaces the set of upstreams in force (the caller has started the new ones).
    pub(crate) fn replace_upstreams(&self, next: Vec<Arc<Upstream>>) {
        let next = Arc::new(next);
        match self.upstreams.write() {
            Ok(mut u) => *u = next,
            Err(p) => *p.into_inner() = next,
        }
    }

    /// Waits until every upstream has finished its first start (up or down; a lazy one not yet
    /// needed counts as settled), or `limit` passes. Returns whether they all had.
    pub async fn wait_started(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self
                .upstreams()
                .iter()
                .all(|u| u.status() != Status::Starting)
            {
                self.rebuild();
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
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
        self.catalog
            .read()
            .map(|c| Arc::clone(&c))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// Why the last catalog rebuild was refused (a name collision), if it was.
    pub fn catalog_error(&self) -> Option<String> {
        self.catalog_error
            .read()
            .map(|e| e.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The upstreams in force, in configuration order.
    pub fn upstreams(&self) -> Upstreams {
        Upstreams(current_upstreams(self))
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
        self.events.subscribe()
    }

    pub fn settings(&self) -> &GatewaySettings {
        &self.settings
    }

    /// Rebuilds the catalog now and tells sessions what changed.
    pub fn rebuild(&self) {
        rebuild(self);
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
        let text = self.settings.instructions.clone().unwrap_or_else(|| {
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
            LIST_TTL_MS,
            manifold_wire::meta::SERVER_INFO,
            self.server_info()
        )
    }

    /// A legacy session ended (DELETE, expiry, disconnect): its own upstream connections close.
    pub async fn end_session(&self, session: &str) {
        self.sessions.end(session).await;
    }

    /// How a session's own upstream connections are carried ("stdio CMD (pid N)").
    pub fn describe_session(&self, session: &str) -> Vec<String> {
        self.sessions.describe(session)
    }

    /// Per-session upstream connections alive now.
    pub fn session_connections(&self) -> usize {
        self.sessions.count()
    }

    /// Stops every supervisor and closes every upstream connection (each child process is
    /// asked to exit, then its process group is killed, and it is reaped).
    pub async fn shutdown(&self) {
        self.sessions.end_all().await;
        let supervisors = {
            let mut s = self.supervisors.lock().unwrap_or_else(|p| p.into_inner());
            // Under the lock, so no supervisor starts after this.
            self.shutdown.send_replace(true);
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
}

fn current_upstreams(inner: &Core) -> Arc<Vec<Arc<Upstream>>> {
    inner
        .upstreams
        .read()
        .map(|u| Arc::clone(&u))
        .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
}

pub(crate) fn rebuild(inner: &Core) {
    rebuild_and_tell(inner, false);
}

/// Rebuilds the catalog and tells sessions which lists changed; with `everything_changed`, every
/// list, as after new rules (what each caller sees may differ even where the catalog does not).
pub(crate) fn rebuild_and_tell(inner: &Core, everything_changed: bool) {
    let _one_at_a_time = inner.rebuilding.lock().unwrap_or_else(|p| p.into_inner());
    let pins = inner.settings.pins.as_deref();
    match Catalog::build_pinned(
        &inner.settings.naming,
        &current_upstreams(inner),
        NAMES,
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
                // A changed tool, or changed rules, may answer otherwise.
                inner.results.clear();
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
pub(crate) async fn tell_hosted_changes(
    inner: std::sync::Weak<Core>,
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

pub(crate) async fn keep_catalog(
    inner: std::sync::Weak<Core>,
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
