//! One live conversation with an upstream server, whatever carries it.
//!
//! The connection owns our request ids and progress tokens: it registers a request (and the
//! caller's progress token) before a byte is written, routes every inbound message to the call it
//! belongs to, answers server-initiated requests through the caller's handler, and settles every
//! pending call exactly once when a response arrives, the deadline passes, the caller cancels or
//! the transport dies.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_wire::patch::CheckedMembers;
use manifold_wire::{ErrorCode, ErrorObject, Id, Kind, Message, Revision, meta, patch};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::auth::passthrough::CallerToken;
use crate::error::UpstreamError;
use crate::transport::{Inbound, InboundRx, Transport};

/// Requests one connection may have in flight at once.
pub const MAX_IN_FLIGHT: usize = 1024;
/// Notifications tied to one call that may wait for its caller; more are dropped and counted.
pub const MAX_QUEUED_PER_CALL: usize = 256;
/// Connection-level notifications that may wait for the caller; more are dropped and counted.
pub const MAX_QUEUED_NOTIFICATIONS: usize = 1024;
/// The default deadline of one request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Whatever the caller attached to a request (the gateway attaches the downstream client that
/// caused it), handed back with every server request that belongs to that request.
pub type CallContext = Arc<dyn std::any::Any + Send + Sync>;

/// A server-initiated request (`roots/list`, `sampling/createMessage`, `elicitation/create`, ...).
#[derive(Clone)]
pub struct ServerRequest {
    pub method: String,
    /// Raw params, untouched.
    pub params: Option<String>,
    /// Our id of the call that caused it, when known.
    pub related: Option<Id>,
    /// The context the caller attached to that call, when known.
    pub context: Option<CallContext>,
}

impl std::fmt::Debug for ServerRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerRequest")
            .field("method", &self.method)
            .field("params", &self.params)
            .field("related", &self.related)
            .field("context", &self.context.is_some())
            .finish()
    }
}

/// Answers server-initiated requests on the caller's behalf.
pub trait ServerRequestHandler: Send + Sync + 'static {
    /// Returns the raw JSON result, or an error object for the server.
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>>;
}

/// A handler that declines everything with a clear reason: the default when the client declares
/// no capabilities.
#[derive(Debug, Default, Clone, Copy)]
pub struct RefuseServerRequests;

impl ServerRequestHandler for RefuseServerRequests {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        Box::pin(async move {
            Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!(
                    "this client does not support {} (it declared no such capability)",
                    request.method
                ),
            ))
        })
    }
}

/// Per-call settings.
#[derive(Debug, Clone, Copy)]
pub struct CallOptions {
    /// Time allowed without an answer.
    pub timeout: Duration,
    /// Whether a progress notification restarts the timeout.
    pub reset_on_progress: bool,
    /// The absolute cap, whatever progress arrives.
    pub max_total: Option<Duration>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            timeout: DEFAULT_REQUEST_TIMEOUT,
            reset_on_progress: true,
            max_total: None,
        }
    }
}

impl CallOptions {
    pub fn with_timeout(timeout: Duration) -> CallOptions {
        CallOptions {
            timeout,
            ..CallOptions::default()
        }
    }
}

/// What the modern era adds to every request's `_meta`, its members checked once when it is
/// made rather than parsed again for every request.
#[derive(Debug, Clone)]
pub(crate) struct ModernMeta {
    capabilities: String,
    client_info: String,
    /// The members (revision, capabilities, client info), or why they are not JSON.
    members: Result<CheckedMembers, patch::PatchError>,
}

impl ModernMeta {
    pub(crate) fn new(revision: Revision, capabilities: String, client_info: String) -> ModernMeta {
        let rev = manifold_wire::id::json_string(revision.as_str());
        let members = CheckedMembers::new(&[
            (meta::PROTOCOL_VERSION, rev.as_str()),
            (meta::CLIENT_CAPABILITIES, capabilities.as_str()),
            (meta::CLIENT_INFO, client_info.as_str()),
        ]);
        ModernMeta {
            capabilities,
            client_info,
            members,
        }
    }

    /// The same, stating another revision.
    pub(crate) fn with_revision(&self, revision: Revision) -> ModernMeta {
        ModernMeta::new(
            revision,
            self.capabilities.clone(),
            self.client_info.clone(),
        )
    }
}

struct Pending {
    /// The request's method, for errors that name it.
    method: String,
    context: Option<CallContext>,
    /// The caller's own progress token, restored on the way back.
    caller_token: Option<String>,
    our_token: Option<String>,
    events: mpsc::Sender<Message>,
    done: oneshot::Sender<Result<Message, UpstreamError>>,
}

#[derive(Default)]
struct Tables {
    pending: HashMap<Id, Pending>,
    /// Our progress token (raw JSON) -> our request id.
    progress: HashMap<String, Id>,
    /// Server request id -> the task answering it, so the server can cancel it.
    serving: HashMap<Id, AbortHandle>,
}

/// Counters that show how a server misbehaved without flooding the log.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    pub stray_responses: AtomicU64,
    pub dropped_notifications: AtomicU64,
    pub faults: AtomicU64,
}

pub(crate) struct Inner {
    pub(crate) server: String,
    pub(crate) transport: Arc<dyn Transport>,
    next_id: AtomicI64,
    tables: Mutex<Tables>,
    closed: AtomicBool,
    close_cause: Mutex<Option<String>>,
    /// Flips to true once, when the connection closes; supervisors wait on it.
    closed_signal: tokio::sync::watch::Sender<bool>,
    handler: Arc<dyn ServerRequestHandler>,
    notifications_tx: mpsc::Sender<Message>,
    notifications_rx: Mutex<Option<mpsc::Receiver<Message>>>,
    pub(crate) modern: Mutex<Option<Arc<ModernMeta>>>,
    stats: ConnectionStats,
}

/// A handle to one upstream conversation; cheap to clone.
#[derive(Clone)]
pub struct Connection {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.inner.server)
            .field("transport", &self.inner.transport.describe())
            .finish()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not wedge every call: the tables stay consistent per operation.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Connection {
    /// Starts routing the transport's inbound messages. Negotiation is a separate step.
    pub fn start(
        server: impl Into<String>,
        transport: Arc<dyn Transport>,
        inbound: InboundRx,
        handler: Arc<dyn ServerRequestHandler>,
    ) -> Connection {
        let (ntx, nrx) = mpsc::channel(MAX_QUEUED_NOTIFICATIONS);
        let inner = Arc::new(Inner {
            server: server.into(),
            transport,
            next_id: AtomicI64::new(1),
            tables: Mutex::new(Tables::default()),
            closed: AtomicBool::new(false),
            close_cause: Mutex::new(None),
            closed_signal: tokio::sync::watch::Sender::new(false),
            handler,
            notifications_tx: ntx,
            notifications_rx: Mutex::new(Some(nrx)),
            modern: Mutex::new(None),
            stats: ConnectionStats::default(),
        });
        let weak = Arc::downgrade(&inner);
        inbound.attach(Box::new(move |item| match weak.upgrade() {
            Some(inner) => route_inbound(&inner, item),
            None => false,
        }));
        Connection { inner }
    }

    /// The server's configured name.
    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// Misbehaviour counters.
    pub fn stats(&self) -> &ConnectionStats {
        &self.inner.stats
    }

    /// Whether the transport is gone.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Resolves when the connection has closed, with the cause.
    pub async fn closed(&self) -> String {
        let mut rx = self.inner.closed_signal.subscribe();
        // An error means the sender is gone, which can only happen once the connection is dropped.
        let _ = rx.wait_for(|closed| *closed).await;
        lock(&self.inner.close_cause)
            .clone()
            .unwrap_or_else(|| "the connection was closed".to_owned())
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        lock(&self.inner.tables).pending.len()
    }

    /// The methods of the requests in flight, oldest id first: what a deadline that passed
    /// was waiting for.
    pub fn pending_methods(&self) -> Vec<String> {
        let t = lock(&self.inner.tables);
        let mut pending: Vec<(&Id, &Pending)> = t.pending.iter().collect();
        pending.sort_by(|a, b| a.0.cmp(b.0));
        pending.into_iter().map(|(_, p)| p.method.clone()).collect()
    }

    /// The connection-level notifications (list changes, logs not tied to a call). Taken once.
    pub fn take_notifications(&self) -> Option<mpsc::Receiver<Message>> {
        lock(&self.inner.notifications_rx).take()
    }

    /// In the legacy era, whether the server's questions can travel on this connection (see
    /// [`crate::transport::Transport::carries_server_requests`]).
    pub fn carries_server_requests(&self) -> bool {
        self.inner.transport.carries_server_requests()
    }

    /// Describes the transport for logs and health.
    pub fn describe(&self) -> String {
        self.inner.transport.describe()
    }

    /// What the sandbox enforced around the server, when it runs in one.
    pub fn sandbox(&self) -> Option<Arc<manifold_sandbox::Report>> {
        self.inner.transport.sandbox()
    }

    /// Tells the transport which tool arguments carry `x-mcp-header`, from raw tool definitions
    /// (each a JSON object as `tools/list` returned it); call it with every listed tool. The
    /// tools returned must be left out of what is offered downstream.
    pub fn learn_tool_headers(&self, tools: &[&str]) -> Vec<crate::transport::RejectedTool> {
        self.inner.transport.learn_tool_headers(tools)
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Option<&str>) -> Result<(), UpstreamError> {
        self.ensure_open()?;
        let mut message = Message::notification(method, params);
        if let Some(meta) = lock(&self.inner.modern).clone() {
            message = with_modern_meta(&message, &meta).unwrap_or(message);
        }
        self.inner.transport.send(message).await
    }

    fn ensure_open(&self) -> Result<(), UpstreamError> {
        if self.is_closed() {
            let cause = lock(&self.inner.close_cause)
                .clone()
                .unwrap_or_else(|| "the connection was closed".to_owned());
            return Err(UpstreamError::Closed {
                server: self.inner.server.clone(),
                cause,
            });
        }
        Ok(())
    }

    /// Sends a request and returns the call, whose events end with its one response.
    ///
    /// `params` is raw JSON. A `_meta.progressToken` in it is replaced by ours before writing and
    /// restored on every progress notification handed back.
    pub async fn request(
        &self,
        method: &str,
        params: Option<&str>,
        options: CallOptions,
    ) -> Result<Call, UpstreamError> {
        self.request_in_context(method, params, options, None, None)
            .await
    }

    /// Like [`Connection::request`], attaching a context that server requests caused by this
    /// call carry back to the handler, and the caller it runs for, whose own token a server
    /// configured with `token_passthrough` is sent.
    pub async fn request_in_context(
        &self,
        method: &str,
        params: Option<&str>,
        options: CallOptions,
        context: Option<CallContext>,
        caller: Option<CallerToken>,
    ) -> Result<Call, UpstreamError> {
        self.ensure_open()?;
        let id = Id::Num(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let mut message = Message::request(&id, method, params);
        let protocol = |e: patch::PatchError| UpstreamError::Protocol {
            server: self.inner.server.clone(),
            detail: format!("could not prepare {method}: {e}"),
        };
        let caller_token = message
            .params_raw(&["_meta", meta::PROGRESS_TOKEN])
            .map(str::to_owned);
        let our_token = caller_token.as_ref().map(|_| id.to_json());
        if let Some(ours) = &our_token {
            message = message.with_progress_token(ours).map_err(protocol)?;
        }
        if let Some(meta) = lock(&self.inner.modern).clone() {
            message = with_modern_meta(&message, &meta).map_err(protocol)?;
        }
        let (events_tx, events_rx) = mpsc::channel(MAX_QUEUED_PER_CALL);
        let (done_tx, done_rx) = oneshot::channel();
        {
            let mut t = lock(&self.inner.tables);
            if t.pending.len() >= MAX_IN_FLIGHT {
                return Err(UpstreamError::Overloaded {
                    server: self.inner.server.clone(),
                    limit: MAX_IN_FLIGHT,
                });
            }
            if let Some(tok) = &our_token {
                t.progress.insert(tok.clone(), id.clone());
            }
            t.pending.insert(
                id.clone(),
                Pending {
                    method: method.to_owned(),
                    context,
                    caller_token,
                    our_token,
                    events: events_tx,
                    done: done_tx,
                },
            );
        }
        // The transport may have closed between the check and the registration.
        if self.is_closed() {
            self.inner.forget(&id);
            self.ensure_open()?;
        }
        let started = Instant::now();
        let call = Call {
            id: id.clone(),
            method: method.to_owned(),
            inner: Arc::clone(&self.inner),
            events: events_rx,
            done: Some(done_rx),
            stashed: None,
            started,
            deadline: started + options.timeout,
            cap: options.max_total.map(|m| started + m),
            options,
            finished: false,
        };
        tracing::debug!(server = %self.inner.server, id = ?id, method = %method, "request registered");
        if let Err(e) = self.inner.transport.send_as(message, caller).await {
            self.inner.forget(&id);
            let mut call = call;
            call.finished = true;
            return Err(e);
        }
        Ok(call)
    }

    /// Sends a request and waits for its response, dropping its notifications.
    pub async fn call(
        &self,
        method: &str,
        params: Option<&str>,
        options: CallOptions,
    ) -> Result<Message, UpstreamError> {
        self.request(method, params, options)
            .await?
            .response()
            .await
    }

    /// Closes the transport and settles everything pending.
    pub async fn close(&self) {
        self.inner.transport.close().await;
        self.inner.close_all("the client closed the connection");
    }
}

/// Adds the modern era's required `_meta` to a request or notification. Values the caller put
/// there already (a gateway passing on its client's capabilities) are kept.
fn with_modern_meta(message: &Message, m: &ModernMeta) -> Result<Message, patch::PatchError> {
    let members = m.members.as_ref().map_err(Clone::clone)?;
    message.patch_missing_checked(patch::Part::Params, &["_meta"], members)
}

impl Inner {
    /// States `revision` in the modern `_meta` from now on (when the era is modern).
    pub(crate) fn set_modern_revision(&self, revision: Revision) {
        let mut slot = lock(&self.modern);
        if let Some(m) = slot.as_ref() {
            *slot = Some(Arc::new(m.with_revision(revision)));
        }
    }

    /// The handler that answers server requests, also used for modern-era input requests.
    pub(crate) fn handler_for_input(&self) -> Arc<dyn ServerRequestHandler> {
        Arc::clone(&self.handler)
    }

    /// Whether `id` is one this connection sent a request under (ids are issued in order).
    fn issued(&self, id: &Id) -> bool {
        matches!(id, Id::Num(n) if *n >= 1 && *n < self.next_id.load(Ordering::Relaxed))
    }

    /// Removes a call without settling it (its caller is gone or never saw it).
    fn forget(&self, id: &Id) -> Option<Pending> {
        let mut t = lock(&self.tables);
        let p = t.pending.remove(id);
        if let Some(tok) = p.as_ref().and_then(|p| p.our_token.as_ref()) {
            t.progress.remove(tok);
        }
        p
    }

    fn settle(&self, id: &Id, outcome: Result<Message, UpstreamError>) -> bool {
        match self.forget(id) {
            Some(p) => {
                // The caller may have dropped its call meanwhile; then nobody waits.
                let _ = p.done.send(outcome);
                true
            }
            None => false,
        }
    }

    fn close_all(&self, cause: &str) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        *lock(&self.close_cause) = Some(cause.to_owned());
        self.closed_signal.send_replace(true);
        let (pending, serving) = {
            let mut t = lock(&self.tables);
            t.progress.clear();
            (
                std::mem::take(&mut t.pending),
                std::mem::take(&mut t.serving),
            )
        };
        for (_, abort) in serving {
            abort.abort();
        }
        for (_, p) in pending {
            let _ = p.done.send(Err(UpstreamError::Closed {
                server: self.server.clone(),
                cause: cause.to_owned(),
            }));
        }
    }

    fn send_cancel(self: &Arc<Self>, id: Id, reason: String) {
        if self.transport.cancel_request(&id) || self.closed.load(Ordering::Acquire) {
            return;
        }
        let params = format!(
            "{{\"requestId\":{},\"reason\":{}}}",
            id.to_json(),
            manifold_wire::id::json_string(&reason)
        );
        let inner = Arc::clone(self);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let conn = Connection { inner };
                if let Err(e) = conn
                    .notify(meta::method::CANCELLED, Some(&params))
                    .await
                {
                    tracing::debug!(server = %conn.inner.server, error = %e, "could not send cancellation");
                }
            });
        }
    }
}

/// One request in flight: its notifications, then its response.
pub struct Call {
    id: Id,
    method: String,
    inner: Arc<Inner>,
    events: mpsc::Receiver<Message>,
    done: Option<oneshot::Receiver<Result<Message, UpstreamError>>>,
    stashed: Option<Result<Message, UpstreamError>>,
    started: Instant,
    deadline: Instant,
    cap: Option<Instant>,
    options: CallOptions,
    finished: bool,
}

/// What a call yields.
#[derive(Debug, Clone)]
pub enum CallEvent {
    /// A notification tied to this call (progress, a log line on its stream), in order.
    Notification(Message),
    /// The response (a result or a JSON-RPC error); always the last event.
    Response(Message),
}

impl Call {
    /// Our id of the request on the wire.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// Starts the idle timeout again (after the call was parked waiting for a person, say).
    /// The absolute cap still holds.
    pub fn restart_deadline(&mut self) {
        self.deadline = Instant::now() + self.options.timeout;
    }

    fn effective_deadline(&self) -> Instant {
        match self.cap {
            Some(cap) if cap < self.deadline => cap,
            _ => self.deadline,
        }
    }

    /// The next event; `None` once the response (or failure) was returned.
    pub async fn next(&mut self) -> Option<Result<CallEvent, UpstreamError>> {
        if self.finished {
            return None;
        }
        if let Some(outcome) = self.stashed.take() {
            if let Ok(m) = self.events.try_recv() {
                self.stashed = Some(outcome);
                return Some(Ok(CallEvent::Notification(m)));
            }
            self.finished = true;
            return Some(outcome.map(CallEvent::Response));
        }
        let deadline = self.effective_deadline();
        let Some(done) = self.done.as_mut() else {
            self.finished = true;
            return None;
        };
        tokio::select! {
            biased;
            Some(m) = self.events.recv() => {
                if self.options.reset_on_progress && m.method() == Some(meta::method::PROGRESS) {
                    self.deadline = Instant::now() + self.options.timeout;
                }
                Some(Ok(CallEvent::Notification(m)))
            }
            outcome = done => {
                self.done = None;
                let outcome = outcome.unwrap_or_else(|_| Err(UpstreamError::Closed {
                    server: self.inner.server.clone(),
                    cause: "the connection dropped the request".to_owned(),
                }));
                if let Ok(m) = self.events.try_recv() {
                    self.stashed = Some(outcome);
                    return Some(Ok(CallEvent::Notification(m)));
                }
                self.finished = true;
                Some(outcome.map(CallEvent::Response))
            }
            _ = tokio::time::sleep_until(deadline) => {
                self.finished = true;
                let after = Instant::now().saturating_duration_since(self.started);
                self.abandon(format!("timed out after {after:?}"));
                Some(Err(UpstreamError::Timeout {
                    server: self.inner.server.clone(),
                    method: self.method.clone(),
                    after,
                }))
            }
        }
    }

    /// Waits for the response, discarding notifications.
    pub async fn response(mut self) -> Result<Message, UpstreamError> {
        loop {
            match self.next().await {
                Some(Ok(CallEvent::Response(m))) => return Ok(m),
                Some(Ok(CallEvent::Notification(_))) => continue,
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(UpstreamError::Closed {
                        server: self.inner.server.clone(),
                        cause: "the call had already finished".to_owned(),
                    });
                }
            }
        }
    }

    /// Cancels the request: the server is told (or its stream closed) and the call settles.
    pub fn cancel(mut self, reason: &str) -> UpstreamError {
        self.finished = true;
        self.abandon(reason.to_owned());
        UpstreamError::Cancelled {
            server: self.inner.server.clone(),
            method: self.method.clone(),
            reason: reason.to_owned(),
        }
    }

    fn abandon(&mut self, reason: String) {
        if self.inner.forget(&self.id).is_some() {
            self.inner.send_cancel(self.id.clone(), reason);
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.finished {
            self.abandon("the caller went away".to_owned());
        }
    }
}

/// Routes one thing the transport handed up, on the transport's reader task; `false` once the
/// transport has closed (nothing more is taken).
fn route_inbound(inner: &Arc<Inner>, item: Inbound) -> bool {
    match item {
        Inbound::Message { message, related } => route_message(inner, message, related),
        Inbound::Fault(fault) => {
            inner.stats.faults.fetch_add(1, Ordering::Relaxed);
            let settled = fault.id.as_ref().is_some_and(|id| {
                inner.settle(
                    id,
                    Err(UpstreamError::Protocol {
                        server: inner.server.clone(),
                        detail: format!("its response was malformed: {}", fault.kind),
                    }),
                )
            });
            if !settled {
                tracing::warn!(server = %inner.server, fault = %fault.kind, "dropped a malformed message from the server");
            }
        }
        Inbound::RequestFailed { id, error } => {
            inner.settle(&id, Err(error));
        }
        Inbound::AnswerTooLong { id, limit } => answer_too_long(inner, &id, limit),
        Inbound::Closed { cause } => {
            inner.close_all(&cause);
            return false;
        }
    }
    true
}

/// Fails the call an over-long answer was meant for, naming its method and the limit.
fn answer_too_long(inner: &Inner, id: &Id, limit: usize) {
    inner.stats.faults.fetch_add(1, Ordering::Relaxed);
    let Some(p) = inner.forget(id) else {
        tracing::warn!(server = %inner.server, id = %id, "an over-long line answered no pending request");
        return;
    };
    let _ = p.done.send(Err(UpstreamError::Protocol {
        server: inner.server.clone(),
        detail: format!(
            "the server's answer to {} was over {}; it was skipped unread (make the answer smaller, e.g. page it)",
            p.method,
            byte_size(limit)
        ),
    }));
}

/// A byte count as people read limits: whole MiB or KiB where exact.
fn byte_size(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

fn route_message(inner: &Arc<Inner>, message: Message, related: Option<Id>) {
    match message.kind() {
        Kind::Result | Kind::Error => {
            let Some(id) = message.id().cloned() else {
                tracing::warn!(server = %inner.server, message = %truncate(message.as_str()), "the server sent an error with a null id");
                return;
            };
            if !inner.settle(&id, Ok(message)) {
                inner.stats.stray_responses.fetch_add(1, Ordering::Relaxed);
                if inner.issued(&id) {
                    // The specification lets an answer cross a cancellation, and a server slow to
                    // start answers a probe that timed out (`server/discover` to a legacy server
                    // behind `npx`): nothing is wrong, so no warning.
                    tracing::debug!(server = %inner.server, id = %id, "the server answered a request already settled (timed out or cancelled) or answered it twice; ignored");
                } else {
                    tracing::warn!(server = %inner.server, id = %id, "the server answered a request that was never sent (an id this connection did not issue); ignored");
                }
            }
        }
        Kind::Notification => route_notification(inner, message, related),
        Kind::Request => serve_request(inner, message, related),
    }
}

fn route_notification(inner: &Arc<Inner>, message: Message, related: Option<Id>) {
    let method = message.method().unwrap_or_default();
    if method == meta::method::PROGRESS {
        let token = message.params_raw(&[meta::PROGRESS_TOKEN]).map(str::trim);
        let t = lock(&inner.tables);
        let target = token
            .and_then(|tok| t.progress.get(tok))
            .and_then(|id| t.pending.get(id));
        match target {
            Some(p) => {
                let restored = match &p.caller_token {
                    Some(tok) => message
                        .patch(patch::Part::Params, &[meta::PROGRESS_TOKEN], tok)
                        .unwrap_or(message),
                    None => message,
                };
                if p.events.try_send(restored).is_err() {
                    inner
                        .stats
                        .dropped_notifications
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            None => {
                tracing::debug!(server = %inner.server, "progress for no pending request; dropped");
            }
        }
        return;
    }
    if method == meta::method::CANCELLED {
        if let Some(id) = message
            .params_raw(&["requestId"])
            .and_then(|raw| Id::from_raw(raw).ok())
            && let Some(abort) = lock(&inner.tables).serving.remove(&id)
        {
            abort.abort();
        }
        return;
    }
    // A log line over stdio carries no request id; with exactly one call in flight it can only
    // belong to that call (the rule server requests follow too).
    let related = related.or_else(|| {
        (method == meta::method::MESSAGE)
            .then(|| {
                let t = lock(&inner.tables);
                (t.pending.len() == 1)
                    .then(|| t.pending.keys().next().cloned())
                    .flatten()
            })
            .flatten()
    });
    if let Some(id) = related {
        let t = lock(&inner.tables);
        if let Some(p) = t.pending.get(&id) {
            if p.events.try_send(message).is_err() {
                inner
                    .stats
                    .dropped_notifications
                    .fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
    }
    if inner.notifications_tx.try_send(message).is_err() {
        inner
            .stats
            .dropped_notifications
            .fetch_add(1, Ordering::Relaxed);
    }
}

fn serve_request(inner: &Arc<Inner>, message: Message, related: Option<Id>) {
    let Some(server_id) = message.id().cloned() else {
        return;
    };
    let method = message.method().unwrap_or_default().to_owned();
    let transport = Arc::clone(&inner.transport);
    if method == meta::method::PING {
        tokio::spawn(async move {
            let _ = transport.send(Message::result(&server_id, "{}")).await;
        });
        return;
    }
    let (related, context) = {
        let t = lock(&inner.tables);
        // Over stdio nothing ties a server request to a call; with exactly one call in flight
        // the attribution is certain.
        let related = related.or_else(|| {
            (t.pending.len() == 1)
                .then(|| t.pending.keys().next().cloned())
                .flatten()
        });
        let context = related
            .as_ref()
            .and_then(|id| t.pending.get(id))
            .and_then(|p| p.context.clone());
        (related, context)
    };
    let request = ServerRequest {
        method,
        params: message.params().map(str::to_owned),
        related,
        context,
    };
    let handler = Arc::clone(&inner.handler);
    let weak = Arc::downgrade(inner);
    let reply_id = server_id.clone();
    // The task waits until its abort handle is registered, so its own removal cannot come first.
    let (registered_tx, registered_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = registered_rx.await;
        let reply = match handler.handle(request).await {
            Ok(result) => Message::result(&reply_id, &result),
            Err(error) => Message::error(Some(reply_id.clone()), &error),
        };
        if let Some(inner) = weak.upgrade() {
            lock(&inner.tables).serving.remove(&reply_id);
        }
        let _ = transport.send(reply).await;
    });
    lock(&inner.tables)
        .serving
        .insert(server_id, task.abort_handle());
    let _ = registered_tx.send(());
}

pub(crate) fn truncate(s: &str) -> String {
    const SHOWN: usize = 200;
    if s.len() <= SHOWN {
        return s.to_owned();
    }
    let mut end = SHOWN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}... ({} bytes)",
        s.get(..end).unwrap_or_default(),
        s.len()
    )
}
