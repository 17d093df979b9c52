//! Streamable HTTP, one transport for both eras.
//!
//! Every message is its own POST. The era decides the rest: a modern (2026-07-28) request carries
//! its revision in `_meta` and gets the request metadata headers, a per-request reply stream that
//! is closed to cancel, and nothing else; a legacy request rides a session (`Mcp-Session-Id`),
//! may be answered on a resumable stream, shares a GET stream for server-initiated messages, and
//! survives the server forgetting the session by a transparent re-initialization. The era is read
//! from each message, so the `server/discover` probe and a legacy `initialize` can share one
//! transport.
//!
//! A legacy reply stream belongs to the session it was opened in: it is resumed only there, and a
//! request never goes out while a new session is being started, since it would carry the old
//! session (or none) and be refused for that rather than for anything it asked.
//!
//! This file is the per-request path both eras share (post, reply as JSON or stream, the
//! `Transport` impl); what only the legacy session needs is in `streamable/legacy_session.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_wire::{Era, Id, Kind, Message, Revision, meta};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::task::AbortHandle;
use url::Url;

use super::headers::{ToolHeaders, modern_headers};
use super::sse_stream::{SseEnd, SseItem, SseReader};
use crate::auth::RequestAuthorizer;
use crate::auth::passthrough::CallerToken;
use crate::connection::lock;
use crate::error::UpstreamError;
use crate::http_client::{
    BodyError, MAX_JSON_BODY, excerpt, media_type, read_body_limited, read_error_body,
};
use crate::transport::{Inbound, InboundTx, RejectedTool, Transport};

mod legacy_session;

use legacy_session::is_method_not_found;

/// Times a broken legacy SSE stream is resumed without receiving a message in between.
pub const MAX_RESUME_ATTEMPTS: u32 = 5;
/// The reconnection delay when the server announced none.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest reconnection delay honoured; a larger `retry` is cut to this.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);
/// How long a notification or response POST may take to be accepted.
pub const ONE_WAY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the session DELETE on close may take.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a legacy POST still waits for its answer once the server has ended the session it
/// was sent in (a request saw 404 and a new session started). The server forgot the session,
/// so no answer is coming; the wait is only for a 404 already on its way, which sends the
/// request again in the new session. Without it a POST stuck on a dead server's connection
/// (seen in about 1 of 300 chaos runs: the HTTP client's `send` never returned although the
/// server was killed 12 ms after the request went out) waits for its call deadline.
pub const ENDED_SESSION_GRACE: Duration = Duration::from_secs(2);

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
const EVENT_STREAM: &str = "text/event-stream";

/// A Streamable HTTP connection to one MCP endpoint.
pub struct StreamableHttpTransport {
    shared: Arc<Shared>,
}

struct Shared {
    server: String,
    client: reqwest::Client,
    url: Url,
    inbound: InboundTx,
    state: Mutex<State>,
    tools: Mutex<ToolHeaders>,
    closed: AtomicBool,
    /// Serialises re-initialization, so concurrent 404s start one new session, not several.
    reinit: tokio::sync::Mutex<()>,
    /// Wakes the requests that waited for a session renewal to end.
    renewed: tokio::sync::Notify,
    /// The live legacy session, as `initialize` responses set it: a POST in flight watches it
    /// to learn that the server ended its session ([`ENDED_SESSION_GRACE`]).
    live_session: tokio::sync::watch::Sender<Option<String>>,
    reinit_count: AtomicU64,
    /// Adds credentials to every request and answers the server's challenges.
    auth: RequestAuthorizer,
}

#[derive(Default)]
struct State {
    /// The revision negotiation settled on.
    revision: Option<Revision>,
    /// The legacy session, from the `initialize` response. Kept while a renewal runs, so that a
    /// failed renewal leaves the old one for the next request to find expired and renew again.
    session: Option<String>,
    /// A new session is being started; ordinary legacy requests wait until it is done.
    renewing: bool,
    /// The legacy `initialize` request, replayed when the session expires.
    initialize: Option<Message>,
    /// Requests whose POST (and reply stream) is in flight, and whether each is modern.
    streams: HashMap<Id, (AbortHandle, bool)>,
    /// The legacy GET stream for server-initiated messages.
    listener: Option<AbortHandle>,
}

/// Which era one message travels in, and its modern revision.
#[derive(Debug, Clone)]
enum MessageEra {
    Modern(String),
    Legacy,
}

/// How the server answered a POST.
enum Reply {
    /// 202 or an empty success: nothing to read.
    Accepted,
    Json(reqwest::Response),
    Stream(reqwest::Response),
    Other {
        content_type: String,
    },
    Failed {
        status: u16,
        body: Vec<u8>,
    },
}

impl StreamableHttpTransport {
    pub fn new(
        server: &str,
        client: reqwest::Client,
        url: Url,
        inbound: InboundTx,
    ) -> StreamableHttpTransport {
        StreamableHttpTransport::with_auth(
            server,
            client,
            url,
            inbound,
            RequestAuthorizer::default(),
        )
    }

    /// Like [`StreamableHttpTransport::new`], sending every request through `auth`.
    pub fn with_auth(
        server: &str,
        client: reqwest::Client,
        url: Url,
        inbound: InboundTx,
        auth: RequestAuthorizer,
    ) -> StreamableHttpTransport {
        StreamableHttpTransport {
            shared: Arc::new(Shared {
                server: server.to_owned(),
                client,
                url,
                inbound,
                state: Mutex::new(State::default()),
                tools: Mutex::new(ToolHeaders::default()),
                closed: AtomicBool::new(false),
                reinit: tokio::sync::Mutex::new(()),
                renewed: tokio::sync::Notify::new(),
                live_session: tokio::sync::watch::Sender::new(None),
                reinit_count: AtomicU64::new(0),
                auth,
            }),
        }
    }

    /// The legacy session id, once the server assigned one.
    pub fn session_id(&self) -> Option<String> {
        lock(&self.shared.state).session.clone()
    }
}

impl Shared {
    fn closed_error(&self) -> UpstreamError {
        UpstreamError::Closed {
            server: self.server.clone(),
            cause: "the client closed the connection".to_owned(),
        }
    }

    /// The era a message travels in. Once negotiation settled on the legacy era, every message
    /// is legacy whatever its `_meta` says (a gateway passes its modern clients' `_meta` through);
    /// before that, and in the modern era, the message's own revision decides.
    fn era_of(&self, message: &Message) -> MessageEra {
        let negotiated = lock(&self.state).revision;
        if negotiated.is_some_and(|r| r.era() == Era::Legacy) {
            return MessageEra::Legacy;
        }
        match message.params_str(&["_meta", meta::PROTOCOL_VERSION]) {
            Some(revision) => MessageEra::Modern(revision),
            None => MessageEra::Legacy,
        }
    }

    fn is_modern_negotiated(&self) -> bool {
        lock(&self.state).revision.map(Revision::era) == Some(Era::Modern)
    }

    /// POSTs one message, a legacy one after any session renewal under way. Returns the reply
    /// and the session the exchange belongs to: the one the request carried, or the one the
    /// response to `initialize` started (its reply stream is resumed in that session).
    async fn post(
        &self,
        message: &Message,
        caller: Option<&CallerToken>,
    ) -> Result<(Reply, Option<String>), UpstreamError> {
        self.post_with(message, true, caller).await
    }

    /// POSTs one message; `after_renewal` is false only for the renewal's own messages.
    /// `caller` is the token of the caller a request runs for (passthrough servers only).
    async fn post_with(
        &self,
        message: &Message,
        after_renewal: bool,
        caller: Option<&CallerToken>,
    ) -> Result<(Reply, Option<String>), UpstreamError> {
        let method = message.method().unwrap_or("a response");
        let (mut headers, mut session) = match self.era_of(message) {
            MessageEra::Modern(revision) => {
                let headers = modern_headers(message, &revision, &lock(&self.tools));
                (headers, None)
            }
            MessageEra::Legacy if method == meta::method::INITIALIZE => self.legacy_headers(true),
            MessageEra::Legacy if after_renewal => self.legacy_headers_after_renewal().await,
            MessageEra::Legacy => self.legacy_headers(false),
        };
        super::trace_headers::copy_from_meta(message, &mut headers);
        let id = message.id();
        tracing::debug!(server = %self.server, method = %method, id = ?id, "POST");
        let exchange = async {
            let response = self
                .auth
                .send(caller, || {
                    self.client
                        .post(self.url.clone())
                        .headers(headers.clone())
                        .header(ACCEPT, ACCEPT_BOTH)
                        .header(CONTENT_TYPE, "application/json")
                        .body(message.as_str().to_owned())
                })
                .await
                .map_err(|e| {
                    e.into_upstream(&self.server, &format!("POST {} ({method})", self.url))
                })?;
            tracing::debug!(server = %self.server, method = %method, id = ?id, status = response.status().as_u16(), "POST answered");
            let started = if method == meta::method::INITIALIZE && response.status().is_success() {
                self.remember_session(&response)
            } else {
                None
            };
            Ok((classify(response).await, started))
        };
        // A request of a session (never `initialize`, which starts one) is given up once the
        // server has ended that session and the grace has passed.
        let sent_in = session.clone().filter(|_| id.is_some());
        let (reply, started) = match sent_in {
            Some(sent_in) => tokio::select! {
                exchanged = exchange => exchanged?,
                () = self.session_ended(&sent_in) => {
                    tracing::debug!(server = %self.server, method = %method, id = ?id, "the session ended while the POST waited for its answer; given up");
                    return Err(self.unanswered_in_ended_session(method));
                }
            },
            None => exchange.await?,
        };
        if started.is_some() {
            session = started;
        }
        Ok((reply, session))
    }

    /// Resolves [`ENDED_SESSION_GRACE`] after `session` stopped being the live one.
    async fn session_ended(&self, session: &str) {
        let mut live = self.live_session.subscribe();
        if live
            .wait_for(|live| live.as_deref() != Some(session))
            .await
            .is_err()
        {
            // The sender lives as long as `self`: never reached, and then never ended.
            return std::future::pending().await;
        }
        tokio::time::sleep(ENDED_SESSION_GRACE).await;
    }

    /// A legacy request whose session the server ended while its POST waited for the answer.
    fn unanswered_in_ended_session(&self, method: &str) -> UpstreamError {
        UpstreamError::Closed {
            server: self.server.clone(),
            cause: format!(
                "the server restarted or ended the session while {method} waited for its \
                 answer, and {}s later it still had none; a request of an ended session is \
                 never answered in another, so the call was lost (whether it ran is unknown)",
                ENDED_SESSION_GRACE.as_secs()
            ),
        }
    }

    async fn hand_up(&self, item: Inbound) -> bool {
        self.inbound.send(item).await.is_ok()
    }

    fn http_error(&self, method: &str, status: u16, body: &[u8]) -> UpstreamError {
        UpstreamError::Http {
            server: self.server.clone(),
            method: method.to_owned(),
            status,
            body: excerpt(body),
        }
    }

    fn protocol(&self, detail: String) -> UpstreamError {
        UpstreamError::Protocol {
            server: self.server.clone(),
            detail,
        }
    }

    /// A legacy reply stream whose session is gone: the reply cannot be picked up anywhere else.
    fn reply_lost(&self, method: &str) -> UpstreamError {
        UpstreamError::Closed {
            server: self.server.clone(),
            cause: format!(
                "the server restarted or ended the session while answering {method}; the reply \
                 stream belonged to that session and cannot be resumed in another, so the call \
                 was lost (whether it ran is unknown)"
            ),
        }
    }

    /// Delivers one request and everything its reply carries. An `Err` settles the request.
    async fn run_request(
        self: &Arc<Self>,
        message: Message,
        id: Id,
        caller: Option<CallerToken>,
    ) -> Result<(), UpstreamError> {
        let caller = caller.as_ref();
        let method = message.method().unwrap_or_default().to_owned();
        let legacy = matches!(self.era_of(&message), MessageEra::Legacy);
        let mut renewed = false;
        loop {
            let (reply, session) = self.post(&message, caller).await?;
            match reply {
                Reply::Failed {
                    status: 404,
                    ref body,
                } if legacy && session.is_some() && !renewed && !is_method_not_found(body) => {
                    renewed = true;
                    self.reinitialize(session.as_deref(), caller).await?;
                    continue;
                }
                Reply::Failed { status, body } => {
                    return self.failed_reply(&method, &id, status, &body).await;
                }
                Reply::Accepted if legacy => {
                    tracing::debug!(server = %self.server, method = %method, "the server accepted the request without a reply body; its response must come on the GET stream");
                    return Ok(());
                }
                Reply::Accepted => {
                    return Err(self.protocol(format!(
                        "it accepted {method} without answering it; in the modern era every request is answered on its own POST"
                    )));
                }
                Reply::Other { content_type } => {
                    return Err(self.protocol(format!(
                        "it answered {method} with content type {content_type:?}; expected application/json or text/event-stream"
                    )));
                }
                Reply::Json(response) => return self.json_reply(&method, &id, response).await,
                Reply::Stream(response) => {
                    let session = session.as_deref();
                    return self
                        .stream_reply(&method, &id, legacy, session, response, caller)
                        .await;
                }
            }
        }
    }

    /// A non-success status. Only a JSON-RPC response to this very request is its answer; any
    /// other body (an error about the session or the transport, with a null id, say) says why the
    /// HTTP request failed, and passing it on as the call's answer would hide which server said
    /// it and that the request never ran.
    async fn failed_reply(
        &self,
        method: &str,
        id: &Id,
        status: u16,
        body: &[u8],
    ) -> Result<(), UpstreamError> {
        let Ok(reply) = Message::decode(body) else {
            return Err(self.http_error(method, status, body));
        };
        let error = reply.error_object();
        let answer = if reply.is_response() && reply.id() == Some(id) {
            Some(reply)
        } else if reply.kind() == Kind::Error
            && reply.id().is_none()
            && is_negotiation(method)
            && let Some(error) = &error
        {
            // Negotiation reads the error code to choose the era (and the transport); servers
            // often leave the id out of such errors. The answer goes to the negotiation only.
            Some(Message::error(Some(id.clone()), error))
        } else {
            None
        };
        match answer {
            Some(message) => {
                self.hand_up(Inbound::Message {
                    message,
                    related: Some(id.clone()),
                })
                .await;
                Ok(())
            }
            None => Err(match error {
                Some(error) => UpstreamError::Http {
                    server: self.server.clone(),
                    method: method.to_owned(),
                    status,
                    body: error.to_string(),
                },
                None => self.http_error(method, status, body),
            }),
        }
    }

    async fn json_reply(
        &self,
        method: &str,
        id: &Id,
        response: reqwest::Response,
    ) -> Result<(), UpstreamError> {
        let body = read_body_limited(response, MAX_JSON_BODY)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge { limit } => self.protocol(format!(
                    "its reply to {method} is larger than {limit} bytes; the reply was dropped"
                )),
                BodyError::Read(why) => UpstreamError::Connect {
                    server: self.server.clone(),
                    reason: format!("reading its reply to {method} failed: {why}"),
                },
            })?;
        match Message::decode(&body) {
            Ok(message) => {
                let answers = message.is_response() && message.id() == Some(id);
                self.hand_up(Inbound::Message {
                    message,
                    related: Some(id.clone()),
                })
                .await;
                if answers {
                    Ok(())
                } else {
                    Err(self.protocol(format!(
                        "its JSON reply to {method} is not the response to that request"
                    )))
                }
            }
            Err(fault) if fault.id.is_some() => {
                self.hand_up(Inbound::Fault(fault)).await;
                Ok(())
            }
            Err(fault) => Err(self.protocol(format!(
                "its JSON reply to {method} is malformed: {}",
                fault.kind
            ))),
        }
    }

    /// Reads a reply stream until this request's response, resuming a broken legacy stream in
    /// `session`, the session the request was sent in.
    async fn stream_reply(
        &self,
        method: &str,
        id: &Id,
        legacy: bool,
        session: Option<&str>,
        response: reqwest::Response,
        caller: Option<&CallerToken>,
    ) -> Result<(), UpstreamError> {
        let mut reader = SseReader::new(response);
        let mut cursor: Option<String> = None;
        let mut retry: Option<Duration> = None;
        let mut attempts = 0u32;
        loop {
            let end = loop {
                match reader.next().await {
                    Ok(SseItem::Event(event)) => {
                        if let Some(last) = reader.last_event_id() {
                            cursor = Some(last);
                        }
                        retry = reader.retry().or(retry);
                        let Some(data) = event.data.as_deref().filter(|d| !d.is_empty()) else {
                            continue; // a priming event: only its id and retry matter
                        };
                        if event.kind() != "message" {
                            tracing::debug!(server = %self.server, event = %event.kind(), "skipped an SSE event of an unknown type");
                            continue;
                        }
                        attempts = 0;
                        match Message::decode(data.as_bytes()) {
                            Ok(message) => {
                                let answers = message.is_response() && message.id() == Some(id);
                                if !self
                                    .hand_up(Inbound::Message {
                                        message,
                                        related: Some(id.clone()),
                                    })
                                    .await
                                    || answers
                                {
                                    return Ok(());
                                }
                            }
                            Err(fault) => {
                                let answers = fault.id.as_ref() == Some(id);
                                if !self.hand_up(Inbound::Fault(fault)).await || answers {
                                    return Ok(());
                                }
                            }
                        }
                    }
                    Ok(SseItem::TooLarge { limit }) => {
                        return Err(self.protocol(format!(
                            "an event of its reply stream to {method} is larger than {limit} bytes; the request was abandoned"
                        )));
                    }
                    Err(end) => break end,
                }
            };
            let Some(last) = cursor.clone().filter(|_| legacy) else {
                return Err(self.stream_ended(method, &end, legacy));
            };
            let resumed =
                self.resume_reply(method, &last, (session, caller), &end, &mut attempts, retry);
            reader = resumed.await?;
        }
    }

    /// A reply stream that ended without the response and cannot be resumed. A stream that broke
    /// lost its connection (the server or the network went away); one the server ended cleanly
    /// was ended too early by the server.
    fn stream_ended(&self, method: &str, end: &SseEnd, legacy: bool) -> UpstreamError {
        let detail = if legacy {
            format!(
                "{end} before the response to {method} arrived, with no event id to resume from"
            )
        } else {
            format!("{end} before the response to {method} arrived")
        };
        match end {
            SseEnd::Broken(_) => UpstreamError::Closed {
                server: self.server.clone(),
                cause: detail,
            },
            SseEnd::Eof => self.protocol(detail),
        }
    }

    /// Sends a notification or a response and waits until the server accepted it.
    async fn deliver_one_way(self: &Arc<Self>, message: &Message) -> Result<(), UpstreamError> {
        let method = message.method().unwrap_or("a response").to_owned();
        let renewable = message.kind() == Kind::Notification
            && method != meta::method::INITIALIZED
            && matches!(self.era_of(message), MessageEra::Legacy);
        let mut renewed = false;
        loop {
            let (reply, session) = self.post(message, None).await?;
            match reply {
                Reply::Failed { status: 404, .. } if renewable && session.is_some() && !renewed => {
                    renewed = true;
                    self.reinitialize(session.as_deref(), None).await?;
                }
                Reply::Failed { status, body } => {
                    return Err(self.http_error(&method, status, &body));
                }
                // The body of an accepted notification means nothing; it is not read.
                _ => return Ok(()),
            }
        }
    }

    /// Reads a stream until the response to `id`, handing up anything else it carries.
    async fn collect_response(&self, response: reqwest::Response, id: &Id) -> Option<Message> {
        let mut reader = SseReader::new(response);
        while let Ok(item) = reader.next().await {
            let SseItem::Event(event) = item else {
                continue;
            };
            let Some(Ok(message)) = event
                .data
                .as_deref()
                .filter(|d| !d.is_empty())
                .map(|d| Message::decode(d.as_bytes()))
            else {
                continue;
            };
            if message.is_response() && message.id() == Some(id) {
                return Some(message);
            }
            self.hand_up(Inbound::Message {
                message,
                related: None,
            })
            .await;
        }
        None
    }

    fn abort_all(&self) {
        let (streams, listener) = {
            let mut st = lock(&self.state);
            (std::mem::take(&mut st.streams), st.listener.take())
        };
        for (_, (task, _)) in streams {
            task.abort();
        }
        if let Some(listener) = listener {
            listener.abort();
        }
    }
}

/// Whether `method` negotiates the era, whose error answers the negotiation reads itself.
fn is_negotiation(method: &str) -> bool {
    method == meta::method::INITIALIZE || method == meta::method::DISCOVER
}

async fn classify(response: reqwest::Response) -> Reply {
    let status = response.status();
    if !status.is_success() {
        let status = status.as_u16();
        let body = read_error_body(response).await;
        return Reply::Failed { status, body };
    }
    if status == StatusCode::ACCEPTED || response.content_length() == Some(0) {
        return Reply::Accepted;
    }
    match media_type(&response).as_deref() {
        Some("application/json") | None => Reply::Json(response),
        Some(EVENT_STREAM) => Reply::Stream(response),
        Some(other) => Reply::Other {
            content_type: other.to_owned(),
        },
    }
}

impl Transport for StreamableHttpTransport {
    fn send(&self, message: Message) -> BoxFuture<'_, Result<(), UpstreamError>> {
        self.send_as(message, None)
    }

    fn send_as(
        &self,
        message: Message,
        caller: Option<CallerToken>,
    ) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(async move {
            let shared = &self.shared;
            if shared.closed.load(Ordering::Acquire) {
                return Err(shared.closed_error());
            }
            let Some(id) = message
                .id()
                .cloned()
                .filter(|_| message.kind() == Kind::Request)
            else {
                let method = message.method().unwrap_or_default().to_owned();
                let legacy = matches!(shared.era_of(&message), MessageEra::Legacy);
                tokio::time::timeout(ONE_WAY_TIMEOUT, shared.deliver_one_way(&message))
                    .await
                    .map_err(|_| UpstreamError::Timeout {
                        server: shared.server.clone(),
                        method: message.method().unwrap_or("a response").to_owned(),
                        after: ONE_WAY_TIMEOUT,
                    })??;
                if legacy && method == meta::method::INITIALIZED {
                    shared.open_listener();
                }
                return Ok(());
            };
            let modern = matches!(shared.era_of(&message), MessageEra::Modern(_));
            if message.method() == Some(meta::method::INITIALIZE) && !modern {
                lock(&shared.state).initialize = Some(message.clone());
            }
            let me = Arc::clone(shared);
            let task_id = id.clone();
            // The caller's token (for passthrough servers) goes with the request to its task.
            let task = tokio::spawn(async move {
                let outcome = me.run_request(message, task_id.clone(), caller).await;
                tracing::debug!(server = %me.server, id = ?task_id, failed = outcome.is_err(), "request done");
                lock(&me.state).streams.remove(&task_id);
                if let Err(error) = outcome {
                    me.hand_up(Inbound::RequestFailed {
                        id: task_id.clone(),
                        error,
                    })
                    .await;
                }
                // Again, for a registration that came after the first removal.
                lock(&me.state).streams.remove(&task_id);
            });
            // The task may have ended before this registration: then the entry is taken out
            // again here; if it is still running, its last removal comes after this. Ids are
            // never reused on a connection, so no removal touches another request's entry. (The
            // task used to wait for a signal from here first: one more wake-up, often on another
            // thread, per call.)
            let mut state = lock(&shared.state);
            state
                .streams
                .insert(id.clone(), (task.abort_handle(), modern));
            if task.is_finished() {
                state.streams.remove(&id);
            }
            Ok(())
        })
    }

    fn cancel_request(&self, id: &Id) -> bool {
        let entry = lock(&self.shared.state).streams.remove(id);
        match entry {
            Some((task, modern)) => {
                // Closing the reply stream is the modern cancellation; in the legacy era it only
                // stops reading, and the connection still sends notifications/cancelled.
                task.abort();
                modern
            }
            None => self.shared.is_modern_negotiated(),
        }
    }

    fn negotiated(&self, revision: Revision) {
        lock(&self.shared.state).revision = Some(revision);
    }

    fn learn_tool_headers(&self, tools: &[&str]) -> Vec<RejectedTool> {
        let mut rejected = Vec::new();
        {
            let mut known = lock(&self.shared.tools);
            for tool in tools {
                if let Err(r) = known.learn(tool) {
                    rejected.push(r);
                }
            }
        }
        let legacy = lock(&self.shared.state).revision.map(Revision::era) == Some(Era::Legacy);
        if legacy {
            // x-mcp-header belongs to the modern revision; a legacy server's tools stay usable.
            return Vec::new();
        }
        for r in &rejected {
            tracing::warn!(server = %self.shared.server, tool = %r.name, reason = %r.reason, "tool rejected: invalid x-mcp-header annotation");
        }
        rejected
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.shared.closed.swap(true, Ordering::AcqRel) {
                return;
            }
            self.shared.abort_all();
            self.shared.end_session().await;
        })
    }

    fn describe(&self) -> String {
        format!("Streamable HTTP {}", self.shared.url)
    }

    fn carries_server_requests(&self) -> bool {
        self.session_id().is_some()
    }
}

impl Drop for StreamableHttpTransport {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.abort_all();
    }
}
