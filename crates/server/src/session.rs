//! What one legacy-era client is to the server, whatever carries it: its declared view, the
//! requests it has in flight (to cancel them), the requests the server asked it (to route its
//! answers), the resources it subscribed to and the log level it chose.
//!
//! Streamable HTTP sessions, HTTP+SSE sessions and stdio connections all keep one of these; the
//! transports differ only in where a call's messages go (its [`Outlet`]).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use futures::future::BoxFuture;
use manifold_gateway::audience::Audience;
use manifold_gateway::drain::CallGuard;
use manifold_gateway::{
    Caller, ClientView, DownstreamPeer, Gateway, GatewayEvent, RequestContext, SessionId,
};
use manifold_wire::{ErrorCode, ErrorObject, Id, Kind, Message, meta};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::events;
use crate::limits::{MAX_PENDING_SERVER_REQUESTS, MAX_SUBSCRIPTIONS_PER_SESSION};
use manifold_wire::log_level::LogLevel;

/// Where the messages of one call (its notifications and the server's requests) go.
pub trait Outlet: Send + Sync + 'static {
    /// Delivers a message tied to the call; `false` when it could not be delivered.
    fn send(&self, message: &Message) -> bool;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

type Answer = oneshot::Sender<Result<String, ErrorObject>>;

/// The legacy-era state of one client.
pub struct ClientSession {
    view: RwLock<ClientView>,
    /// The session id, for the gateway's logs and its per-session upstreams.
    pub id: Option<SessionId>,
    /// Prefix of the ids of requests the server sends, unique per session.
    request_prefix: String,
    next_request: AtomicU64,
    pending: Mutex<HashMap<Id, Answer>>,
    in_flight: Mutex<HashMap<Id, CancellationToken>>,
    subscriptions: Mutex<HashSet<String>>,
    log_level: Mutex<Option<LogLevel>>,
    max_in_flight: usize,
    /// Whose rules judge what this session hears: set by its first call, renewed when the
    /// caller changes.
    audience: RwLock<Option<Arc<Audience>>>,
}

impl ClientSession {
    pub fn new(
        view: ClientView,
        id: Option<String>,
        request_prefix: String,
        max_in_flight: usize,
    ) -> ClientSession {
        ClientSession {
            view: RwLock::new(view),
            id: id.map(SessionId::new),
            request_prefix,
            next_request: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            subscriptions: Mutex::new(HashSet::new()),
            log_level: Mutex::new(None),
            max_in_flight,
            audience: RwLock::new(None),
        }
    }

    /// Makes `caller`'s rules judge what this session hears from now on (see
    /// `manifold_gateway::audience`); kept while the caller stays the same.
    pub fn heard_by(
        &self,
        gateway: &Gateway,
        caller: Option<&Arc<Caller>>,
        toolset: Option<&Arc<str>>,
    ) {
        // The token may be renewed; the rules look only at who the caller is.
        let who = |c: Option<&Arc<Caller>>| {
            c.map(|c| (c.name.clone(), c.groups.clone(), c.scopes.clone()))
        };
        let same =
            |a: &Audience| who(a.caller()) == who(caller) && a.toolset() == toolset.map(|t| &**t);
        if self
            .audience
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_deref()
            .is_some_and(same)
        {
            return;
        }
        let audience = Arc::new(Audience::new(
            gateway.clone(),
            caller.cloned(),
            toolset.cloned(),
        ));
        *self.audience.write().unwrap_or_else(|p| p.into_inner()) = Some(audience);
    }

    fn audience(&self) -> Option<Arc<Audience>> {
        self.audience
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn view(&self) -> ClientView {
        self.view
            .read()
            .map(|v| v.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Replaces the view (a stdio client's `initialize`).
    pub fn set_view(&self, view: ClientView) {
        match self.view.write() {
            Ok(mut v) => *v = view,
            Err(p) => *p.into_inner() = view,
        }
    }

    /// Requests in flight plus server requests awaiting answers: whether the session is busy.
    pub fn busy(&self) -> bool {
        !lock(&self.in_flight).is_empty() || !lock(&self.pending).is_empty()
    }

    /// Registers a request as in flight; refused past the bound or for an id already in flight.
    pub fn begin(&self, id: &Id) -> Result<CancellationToken, ErrorObject> {
        let mut in_flight = lock(&self.in_flight);
        if in_flight.len() >= self.max_in_flight {
            return Err(ErrorObject::new(
                ErrorCode::Overloaded,
                format!(
                    "this client already has {} requests in flight; wait for some to finish",
                    in_flight.len()
                ),
            ));
        }
        if in_flight.contains_key(id) {
            return Err(ErrorObject::new(
                ErrorCode::InvalidRequest,
                format!("a request with id {id} is already in flight; ids must be unique"),
            ));
        }
        let token = CancellationToken::new();
        in_flight.insert(id.clone(), token.clone());
        Ok(token)
    }

    pub fn end(&self, id: &Id) {
        lock(&self.in_flight).remove(id);
    }

    /// Applies a client's `notifications/cancelled`.
    pub fn cancel_from(&self, params: Option<&str>) {
        let id = params
            .and_then(|p| manifold_wire::patch::get(p, &["requestId"]).ok().flatten())
            .and_then(|raw| Id::from_raw(raw).ok());
        if let Some(id) = id
            && let Some(token) = lock(&self.in_flight).remove(&id)
        {
            tracing::debug!(request = %id, "the client cancelled a request");
            token.cancel();
        }
    }

    /// Takes what a legacy client sent that is not a request: `notifications/cancelled` cancels
    /// the call it names, a response completes the server request waiting for it, any other
    /// notification needs nothing. A request is given back for the transport to run. One rule
    /// for stdio, Streamable HTTP and HTTP+SSE.
    pub fn take_unless_request(&self, message: Message) -> Option<Message> {
        match message.kind() {
            Kind::Request => return Some(message),
            Kind::Notification => {
                if message.method() == Some(meta::method::CANCELLED) {
                    self.cancel_from(message.params());
                }
            }
            Kind::Result | Kind::Error => {
                self.answer(&message);
            }
        }
        None
    }

    /// Whether the client's request `id` is running in this session here.
    pub fn is_in_flight(&self, id: &Id) -> bool {
        lock(&self.in_flight).contains_key(id)
    }

    /// Cancels everything in flight (the client went away).
    pub fn cancel_all(&self) {
        for (_, token) in lock(&self.in_flight).drain() {
            token.cancel();
        }
        lock(&self.pending).clear();
    }

    /// Sends a server-initiated request through `deliver` and waits for the client's answer.
    pub fn ask(
        self: &Arc<Self>,
        method: &str,
        params: Option<String>,
        deliver: impl Fn(&Message) -> bool + Send + Sync + 'static,
    ) -> BoxFuture<'static, Result<String, ErrorObject>> {
        let n = self.next_request.fetch_add(1, Ordering::Relaxed);
        let id = Id::from(format!("{}-{n}", self.request_prefix).as_str());
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= MAX_PENDING_SERVER_REQUESTS {
                let e = ErrorObject::new(
                    ErrorCode::Overloaded,
                    format!(
                        "the client has {MAX_PENDING_SERVER_REQUESTS} server requests unanswered already"
                    ),
                );
                return Box::pin(async move { Err(e) });
            }
            pending.insert(id.clone(), tx);
        }
        let request = Message::request(&id, method, params.as_deref());
        if !deliver(&request) {
            lock(&self.pending).remove(&id);
            let e = ErrorObject::new(
                ErrorCode::InternalError,
                format!(
                    "Manifold cannot reach the client with {method}: the request's reply is plain JSON and the client has no GET stream open; accept text/event-stream or open the GET stream"
                ),
            );
            return Box::pin(async move { Err(e) });
        }
        // Captured (not created inside the future) so that dropping even an unpolled answer
        // forgets the request, and withdraws it from the client if it was still open.
        let forget = Forget(Arc::clone(self), id, Box::new(deliver));
        Box::pin(async move {
            let _forget = forget;
            rx.await.unwrap_or_else(|_| {
                Err(ErrorObject::new(
                    ErrorCode::RequestCancelled,
                    "the client session ended before it answered",
                ))
            })
        })
    }

    /// Withdraws the server requests among `ids` that are still unanswered, telling the client
    /// through `deliver`; answered ones are left alone.
    pub fn withdraw(&self, ids: &[Id], deliver: impl Fn(&Message) -> bool) {
        for id in ids {
            // Dropping the sender fails the waiting question with "session ended"; its upstream
            // call is over anyway.
            if lock(&self.pending).remove(id).is_some() {
                let _ = deliver(&withdrawal(id));
            }
        }
    }

    /// Routes a client's response to the server request waiting for it; `false` if none waits.
    pub fn answer(&self, response: &Message) -> bool {
        let Some(id) = response.id() else {
            return false;
        };
        let Some(tx) = lock(&self.pending).remove(id) else {
            tracing::debug!(request = %id, "a client answered a request nobody waits for");
            return false;
        };
        let outcome = match response.kind() {
            Kind::Result => Ok(response.result_raw().unwrap_or("{}").to_owned()),
            _ => Err(response.error_object().unwrap_or_else(|| {
                ErrorObject::new(
                    ErrorCode::InternalError,
                    "the client answered with an unreadable error",
                )
            })),
        };
        let _ = tx.send(outcome);
        true
    }

    /// Remembers what a successful request changed about the session (subscriptions, log level).
    pub fn note_outcome(&self, request: &Message, response: &Message) {
        if response.kind() != Kind::Result {
            return;
        }
        let uri = || request.params_str(&["uri"]);
        match request.method() {
            Some("resources/subscribe") => {
                if let Some(uri) = uri() {
                    let mut subs = lock(&self.subscriptions);
                    if subs.len() < MAX_SUBSCRIPTIONS_PER_SESSION {
                        subs.insert(uri);
                    } else {
                        tracing::warn!(
                            "a session reached {MAX_SUBSCRIPTIONS_PER_SESSION} resource subscriptions; further ones get no updates"
                        );
                    }
                }
            }
            Some("resources/unsubscribe") => {
                if let Some(uri) = uri() {
                    lock(&self.subscriptions).remove(&uri);
                }
            }
            Some("logging/setLevel") => {
                if let Some(level) = request
                    .params_str(&["level"])
                    .and_then(|l| LogLevel::parse(&l))
                {
                    *lock(&self.log_level) = Some(level);
                }
            }
            _ => {}
        }
    }

    /// The resources this session is subscribed to, in no particular order.
    pub fn subscriptions(&self) -> Vec<String> {
        lock(&self.subscriptions).iter().cloned().collect()
    }

    /// Stops hearing updates of `uri` (another replica's unsubscribe reached this one).
    pub fn forget_subscription(&self, uri: &str) {
        lock(&self.subscriptions).remove(uri);
    }

    /// Sets the log level chosen on another replica.
    pub fn set_log_level(&self, level: Option<LogLevel>) {
        *lock(&self.log_level) = level;
    }

    /// Who the session's calls are made as, and in which tool set: what its first call set.
    pub fn heard_as(&self) -> (Option<Arc<Caller>>, Option<Arc<str>>) {
        match self.audience() {
            Some(a) => (a.caller().cloned(), a.toolset().map(Arc::from)),
            None => (None, None),
        }
    }

    /// The notification this session gets for a gateway event, if any.
    /// A change the caller's rules hide entirely is not heard, and a subscription to a resource
    /// the rules now hide is dropped.
    pub fn event_message(&self, event: &GatewayEvent) -> Option<Message> {
        let level = *lock(&self.log_level);
        let message = events::for_session(event, &lock(&self.subscriptions), level)?;
        let Some(audience) = self.audience() else {
            return Some(message);
        };
        if audience.admits(event) {
            return Some(message);
        }
        if let GatewayEvent::ResourceUpdated { uri } = event {
            tracing::debug!("a subscription to a resource the rules now hide was dropped");
            lock(&self.subscriptions).remove(uri);
        }
        None
    }

    /// The notifications this session gets for what its gateway event receiver yielded; `None`
    /// once the gateway's channel is closed. A receiver that lagged has missed events and any
    /// list may have changed meanwhile, so the session hears that every list changed (as a
    /// modern listen stream does). One rule for every legacy transport: stdio, Streamable HTTP
    /// and HTTP+SSE.
    pub fn messages_for_received(
        &self,
        received: Result<GatewayEvent, RecvError>,
    ) -> Option<Vec<Message>> {
        match received {
            Ok(event) => Some(self.event_message(&event).into_iter().collect()),
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "a session missed gateway events; telling it every list may have changed"
                );
                Some(
                    [
                        GatewayEvent::ToolsChanged,
                        GatewayEvent::PromptsChanged,
                        GatewayEvent::ResourcesChanged,
                    ]
                    .iter()
                    .filter_map(|e| self.event_message(e))
                    .collect(),
                )
            }
            Err(RecvError::Closed) => None,
        }
    }
}

/// Removes a server request from the pending table when whoever awaited it gives up.
/// `notifications/cancelled` for a server request the client was asked.
fn withdrawal(id: &Id) -> Message {
    let params = format!(
        r#"{{"requestId":{},"reason":"the server withdrew this request"}}"#,
        id.to_json()
    );
    Message::notification(meta::method::CANCELLED, Some(&params))
}

/// A server request's way to the client, kept to withdraw the request if it is given up.
type Deliver = Box<dyn Fn(&Message) -> bool + Send + Sync>;

struct Forget(Arc<ClientSession>, Id, Deliver);

impl Drop for Forget {
    fn drop(&mut self) {
        // Still pending means nobody answered: the upstream withdrew its question (its call was
        // cancelled) or the call ended, so the client is told to stop asking its user, as the
        // server would have told it directly.
        if lock(&self.0.pending).remove(&self.1).is_some() {
            let _ = (self.2)(&withdrawal(&self.1));
        }
    }
}

/// The downstream peer of one legacy call: its messages go to the call's outlet, and the
/// server's requests are answered through the session.
pub struct CallPeer {
    pub session: Arc<ClientSession>,
    pub outlet: Arc<dyn Outlet>,
    /// The ids of the server requests this call caused, so the ones still open when the call
    /// ends are withdrawn while its stream can still carry the withdrawal.
    pub asked: Arc<Mutex<Vec<Id>>>,
}

impl DownstreamPeer for CallPeer {
    fn notify(&self, message: Message) {
        // The session's own level judges its log lines: the upstream's level is set by whichever
        // session last chose one on this replica's shared connection, or by none on a replica
        // the session reached later.
        if message.method() == Some(meta::method::MESSAGE)
            && !crate::log_filter::admits(*lock(&self.session.log_level), message.params())
        {
            return;
        }
        if !self.outlet.send(&message) {
            tracing::debug!(method = ?message.method(), "a notification for a call could not be delivered");
        }
    }

    fn request(
        &self,
        method: &str,
        params: Option<String>,
    ) -> Option<BoxFuture<'static, Result<String, ErrorObject>>> {
        let outlet = Arc::clone(&self.outlet);
        let asked = Arc::clone(&self.asked);
        Some(self.session.ask(method, params, move |m| {
            if m.kind() == Kind::Request
                && let Some(id) = m.id()
            {
                lock(&asked).push(id.clone());
            }
            outlet.send(m)
        }))
    }
}

/// The downstream peer of one modern call: notifications tied to it (log lines only at or above
/// the level its `_meta` asked for, none without one); no server requests.
pub struct ModernPeer {
    pub outlet: Arc<dyn Outlet>,
    pub log_level: Option<LogLevel>,
}

impl DownstreamPeer for ModernPeer {
    fn notify(&self, message: Message) {
        if message.method() == Some(meta::method::MESSAGE)
            && (self.log_level.is_none()
                || !crate::log_filter::admits(self.log_level, message.params()))
        {
            return;
        }
        let _ = self.outlet.send(&message);
    }

    fn request(
        &self,
        _method: &str,
        _params: Option<String>,
    ) -> Option<BoxFuture<'static, Result<String, ErrorObject>>> {
        None
    }
}

/// A call's answer. It keeps the call counted as in flight (for a graceful shutdown) until
/// the transport is done with it, so a drain never ends between the answer and its delivery.
pub struct CallAnswer {
    message: Message,
    _in_flight: CallGuard,
}

impl std::ops::Deref for CallAnswer {
    type Target = Message;
    fn deref(&self) -> &Message {
        &self.message
    }
}

/// Runs one request through the gateway until it answers or `cancel` fires (then `None`: a
/// cancelled request is never answered). The call counts as in flight for a graceful shutdown
/// until its [`CallAnswer`] is dropped; one still running at the drain deadline is cancelled
/// upstream and answered with an error that says so.
pub async fn run_call(
    gateway: &Gateway,
    ctx: RequestContext,
    request: &Message,
    cancel: &CancellationToken,
) -> Option<CallAnswer> {
    let in_flight = gateway.track_call();
    let cut_off = gateway.shutdown_cut_off();
    let message = tokio::select! {
        response = crate::observed_call::handle(gateway, ctx, request) => response,
        _ = cancel.cancelled() => return None,
        _ = cut_off.cancelled() => Message::error(
            request.id().cloned(),
            &ErrorObject::new(ErrorCode::RequestCancelled, gateway.cut_off_message()),
        ),
    };
    Some(CallAnswer {
        message,
        _in_flight: in_flight,
    })
}

/// What the transport's edge knows of whom a call is for and where it came from: the
/// authenticated caller, the tool set it works in, and the trace context of the HTTP request that
/// carried it. Handed down with the call, so nothing on the call's way reads it from the side.
#[derive(Debug, Clone, Default)]
pub struct CallOrigin {
    pub caller: Option<Arc<Caller>>,
    pub toolset: Option<Arc<str>>,
    pub trace: Option<manifold_gateway::context::TraceHeaders>,
}

/// Runs a legacy call: as [`run_call`], then notes what it changed about the session.
pub async fn run_session_call(
    gateway: &Gateway,
    session: &Arc<ClientSession>,
    outlet: Arc<dyn Outlet>,
    request: &Message,
    cancel: &CancellationToken,
    toolset: Option<Arc<str>>,
) -> Option<CallAnswer> {
    let origin = CallOrigin {
        toolset,
        ..CallOrigin::default()
    };
    run_session_call_as(gateway, session, outlet, request, cancel, origin).await
}

/// As [`run_session_call`], for the caller, tool set and trace context `origin` names (HTTP
/// transports).
pub async fn run_session_call_as(
    gateway: &Gateway,
    session: &Arc<ClientSession>,
    outlet: Arc<dyn Outlet>,
    request: &Message,
    cancel: &CancellationToken,
    origin: CallOrigin,
) -> Option<CallAnswer> {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let ctx = RequestContext {
        client: session.view(),
        peer: Arc::new(CallPeer {
            session: Arc::clone(session),
            outlet: Arc::clone(&outlet),
            asked: Arc::clone(&asked),
        }),
        session: session.id.clone(),
        caller: origin.caller,
        toolset: origin.toolset,
        trace: origin.trace,
        audit: Default::default(),
    };
    session.heard_by(gateway, ctx.caller.as_ref(), ctx.toolset.as_ref());
    let response = run_call(gateway, ctx, request, cancel).await;
    // A question the upstream asked during a call that is now over (cancelled, typically) will
    // never be answered usefully: the client is told to stop asking its user.
    session.withdraw(&std::mem::take(&mut *lock(&asked)), |m| outlet.send(m));
    if let Some(r) = &response {
        session.note_outcome(request, r);
    }
    response
}

/// The `initialize` of a legacy client: the negotiated revision and its view.
pub fn negotiate(request: &Message) -> Result<ClientView, ErrorObject> {
    let requested = request.params_str(&["protocolVersion"]).ok_or_else(|| {
        ErrorObject::new(
            ErrorCode::InvalidParams,
            "initialize needs params.protocolVersion (a string such as \"2025-11-25\")",
        )
    })?;
    let legacy: Vec<_> = manifold_wire::Revision::legacy().collect();
    let revision = manifold_wire::revision::legacy_server_answer(&requested, &legacy);
    let capabilities = request
        .params_raw(&["capabilities"])
        .filter(|c| c.trim_start().starts_with('{'))
        .unwrap_or("{}")
        .to_owned();
    Ok(ClientView {
        revision,
        capabilities,
        info: request
            .params_raw(&["clientInfo"])
            .map(manifold_gateway::ClientInfo::new),
    })
}

#[cfg(test)]
mod tests;
