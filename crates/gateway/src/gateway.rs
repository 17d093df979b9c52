//! The gateway's facade: what the transports, the binary and the tests hold. It starts the
//! gateway, hands each request to the pipeline, reloads, drains and shuts down, and answers the
//! few questions the outside asks (the catalog, the upstreams, the rules in force); everything
//! it does is done by the owned state behind it (`state.rs`) and the pipeline's stages on it.
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
use tokio_util::sync::CancellationToken;

use crate::builtin;
use crate::catalog::build::Catalog;
use crate::context::RequestContext;
use crate::drain::{CallGuard, DrainReport};
use crate::events::{EVENT_QUEUE, GatewayEvent};
use crate::gateway_settings::GatewaySettings;
use crate::policy::Policy;
use crate::rate_limit::{RateLimiter, RateLimits};
use crate::reconfigure::{AccessChange, ReconfigureError, Reconfigured};
use crate::state::{Core, Upstreams, keep_catalog, rebuild, tell_hosted_changes};
use crate::upstream::{Upstream, UpstreamDefinition};

pub use crate::events::event_notification;
pub use crate::gateway_settings::Discovery;

/// The running gateway; cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Core>,
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
            inner: Arc::new(Core {
                settings,
                upstreams: RwLock::new(Arc::new(upstreams)),
                catalog: RwLock::new(Arc::new(Catalog::default())),
                catalog_error: RwLock::new(None),
                rebuilding: Mutex::new(()),
                events,
                held: crate::mrtr::HeldCalls::new(),
                sessions: crate::sessions::SessionConnections::default(),
                shutdown,
                supervisors: Mutex::new(Vec::new()),
                upstream_events: tx,
                tasks: Mutex::new(Vec::new()),
                reconfiguring: tokio::sync::Mutex::new(()),
                calls: Arc::default(),
                access,
                results: crate::result_cache::ResultCache::default(),
            }),
        };
        for u in gateway.inner.upstreams().iter() {
            gateway.inner.start_supervisor(u);
        }
        gateway.inner.keep_task(tokio::spawn(keep_catalog(
            Arc::downgrade(&gateway.inner),
            rx,
            gateway.inner.shutdown.subscribe(),
        )));
        if let Some(pins) = &gateway.inner.settings.pins {
            // Writes what catalog builds decide, and takes in an approval by `manifold pins
            // approve`; rebuilding lets the approved tools back in and tells clients their lists
            // changed.
            let weak = Arc::downgrade(&gateway.inner);
            gateway
                .inner
                .keep_task(tokio::spawn(crate::pins::keep_in_step(
                    Arc::clone(pins),
                    move || weak.upgrade().map(|inner| rebuild(&inner)).is_some(),
                    gateway.inner.shutdown.subscribe(),
                )));
        }
        if let Some(hosted) = &gateway.inner.settings.hosted {
            gateway.inner.keep_task(tokio::spawn(tell_hosted_changes(
                Arc::downgrade(&gateway.inner),
                hosted.changes(),
                gateway.inner.shutdown.subscribe(),
            )));
        }
        if let Some(shared) = &gateway.inner.settings.shared_buckets {
            let weak_core = Arc::downgrade(&gateway.inner);
            gateway
                .inner
                .keep_task(tokio::spawn(crate::shared_limits::keep_shared(
                    move || weak_core.upgrade().map(|core| core.rate_limiter()),
                    Arc::clone(shared),
                    gateway.inner.shutdown.subscribe(),
                )));
        }
        gateway.inner.rebuild();
        gateway
    }

    /// Handles one request from a downstream client and returns its response (with the
    /// request's own id). Notifications tied to the request go out through `ctx.peer` first.
    /// Dropping the returned future cancels the upstream call.
    pub async fn handle(&self, ctx: &RequestContext, request: &Message) -> Message {
        self.inner.handle(ctx, request).await
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.is_shutting_down()
    }

    /// Waits until every upstream has finished its first start, or `limit` passes. Returns
    /// whether they all had.
    pub async fn wait_started(&self, limit: Duration) -> bool {
        self.inner.wait_started(limit).await
    }

    /// The current catalog snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.inner.catalog()
    }

    /// Why the last catalog rebuild was refused (a name collision), if it was.
    pub fn catalog_error(&self) -> Option<String> {
        self.inner.catalog_error()
    }

    /// The upstreams in force, in configuration order.
    pub fn upstreams(&self) -> Upstreams {
        self.inner.upstreams()
    }

    /// Subscribes to list changes, resource updates and upstream logs.
    pub fn events(&self) -> broadcast::Receiver<GatewayEvent> {
        self.inner.events()
    }

    pub fn settings(&self) -> &GatewaySettings {
        self.inner.settings()
    }

    /// Rebuilds the catalog now and tells sessions what changed.
    pub fn rebuild(&self) {
        self.inner.rebuild();
    }

    /// The capabilities Manifold declares to clients (raw JSON).
    pub fn capabilities(&self) -> String {
        self.inner.capabilities()
    }

    /// Whether any upstream offers the tasks extension, so Manifold can carry it.
    pub fn offers_tasks(&self) -> bool {
        self.inner.offers_tasks()
    }

    /// The result of a legacy `initialize` at the negotiated revision.
    pub fn initialize_result(&self, revision: Revision) -> String {
        self.inner.initialize_result(revision)
    }

    /// The result of a modern `server/discover`.
    pub fn discover_result(&self) -> String {
        self.inner.discover_result()
    }

    /// A legacy session ended (DELETE, expiry, disconnect): its own upstream connections close.
    pub async fn end_session(&self, session: &str) {
        self.inner.end_session(session).await;
    }

    /// How a session's own upstream connections are carried ("stdio CMD (pid N)").
    pub fn describe_session(&self, session: &str) -> Vec<String> {
        self.inner.describe_session(session)
    }

    /// Per-session upstream connections alive now.
    pub fn session_connections(&self) -> usize {
        self.inner.session_connections()
    }

    /// The rules in force now.
    pub fn policy(&self) -> Arc<Policy> {
        self.inner.policy()
    }

    /// The rate limits in force now, with their buckets.
    pub fn rate_limiter(&self) -> Arc<RateLimiter> {
        self.inner.rate_limiter()
    }

    /// Puts new rules and limits in force (a configuration reload): the next request is judged by
    /// them, every bucket starts full, and sessions are told that every list may have changed.
    pub fn replace_access(&self, rules: Policy, rate_limits: RateLimits) {
        self.inner.replace_access(rules, rate_limits);
    }

    /// Counts a call in flight until the guard drops (the drain waits for it).
    pub fn track_call(&self) -> CallGuard {
        self.inner.calls.track_call()
    }

    /// Calls in flight now.
    pub fn calls_in_flight(&self) -> usize {
        self.inner.calls.calls_in_flight()
    }

    /// Whether a drain has begun.
    pub fn is_draining(&self) -> bool {
        self.inner.calls.is_draining()
    }

    /// Cancelled when the drain's deadline passes: calls still running are cut off.
    pub fn shutdown_cut_off(&self) -> CancellationToken {
        self.inner.calls.shutdown_cut_off()
    }

    /// What a call cut off at the drain's deadline is told.
    pub fn cut_off_message(&self) -> String {
        self.inner.calls.cut_off_message()
    }

    /// What a new request is told while draining.
    pub fn draining_message(&self) -> String {
        self.inner.calls.draining_message()
    }

    /// Refuses new work, waits for the calls in flight until `deadline`, then cuts off the rest.
    pub async fn drain(&self, deadline: Duration) -> DrainReport {
        self.inner.calls.drain(deadline, &self.inner.events).await
    }

    /// Replaces the upstreams in force with `definitions` (see `reconfigure.rs`).
    pub async fn reconfigure(
        &self,
        definitions: Vec<UpstreamDefinition>,
        drain: Duration,
    ) -> Result<Reconfigured, ReconfigureError> {
        self.inner.reconfigure(definitions, drain).await
    }

    /// [`Gateway::reconfigure`], putting `access` in force with the new set of upstreams.
    pub async fn reconfigure_with(
        &self,
        definitions: Vec<UpstreamDefinition>,
        access: AccessChange,
        drain: Duration,
    ) -> Result<Reconfigured, ReconfigureError> {
        self.inner
            .reconfigure_with(definitions, access, drain)
            .await
    }

    /// Stops every supervisor and closes every upstream connection (each child process is
    /// asked to exit, then its process group is killed, and it is reaped).
    pub async fn shutdown(&self) {
        self.inner.shutdown().await;
    }

    /// The reserved built-in tool names.
    pub fn reserved_names() -> &'static [&'static str] {
        builtin::NAMES
    }
}
