//! Streamable HTTP, one transport for both eras.
//!
//! Every message is its own POST. The era decides the rest: a modern (2026-07-28) request carries
//! its revision in `_meta` and gets the request metadata headers, a per-request reply stream that
//! is closed to cancel, and nothing else; a legacy request rides a session (`Mcp-Session-Id`),
//! may be answered on a resumable stream, shares a GET stream for server-initiated messages, and
//! survives the server forgetting the session by a transparent re-initialization. The era is read
//! from each message, so the `server/discover` probe and a legacy `initialize` can share one
//! transport.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_wire::{Era, Id, Kind, Message, Revision, meta};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use url::Url;

use super::client::{
    BodyError, MAX_JSON_BODY, describe_error, excerpt, media_type, read_body_limited,
    read_error_body, send_failure,
};
use super::headers::{ToolHeaders, modern_headers};
use super::sse_stream::{SseEnd, SseItem, SseReader};
use crate::connection::lock;
use crate::error::UpstreamError;
use crate::transport::{Inbound, InboundTx, RejectedTool, Transport};

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
    reinit_count: AtomicU64,
}

#[derive(Default)]
struct State {
    /// The revision negotiation settled on.
    revision: Option<Revision>,
    /// The legacy session, from the `initialize` response.
    session: Option<String>,
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
                reinit_count: AtomicU64::new(0),
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

    /// The legacy headers of a request: the session (unless this starts one) and the revision.
    fn legacy_headers(&self, starts_session: bool) -> (HeaderMap, Option<String>) {
        let st = lock(&self.state);
        let mut headers = HeaderMap::new();
        if let Some(rev) = st.revision.filter(|r| r.has_version_header())
            && !starts_session
            && let Ok(v) = HeaderValue::from_str(rev.as_str())
        {
            headers.insert(meta::header::PROTOCOL_VERSION, v);
        }
        let session = if starts_session {
            None
        } else {
            st.session.clone()
        };
        if let Some(s) = &session
            && let Ok(v) = HeaderValue::from_str(s)
        {
            headers.insert(meta::header::SESSION_ID, v);
        }
        (headers, session)
    }

    /// POSTs one message. Returns the reply and the session id the request carried.
    async fn post(&self, message: &Message) -> Result<(Reply, Option<String>), UpstreamError> {
        let method = message.method().unwrap_or("a response");
        let (headers, session) = match self.era_of(message) {
            MessageEra::Modern(revision) => {
                let headers = modern_headers(message, &revision, &lock(&self.tools));
                (headers, None)
            }
            MessageEra::Legacy => self.legacy_headers(method == meta::method::INITIALIZE),
        };
        let response = self
            .client
            .post(self.url.clone())
            .headers(headers)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(message.as_str().to_owned())
            .send()
            .await
            .map_err(|e| UpstreamError::Connect {
                server: self.server.clone(),
                reason: format!("POST {} ({method}): {}", self.url, send_failure(&e)),
            })?;
        if method == meta::method::INITIALIZE && response.status().is_success() {
            self.remember_session(&response);
        }
        Ok((classify(response).await, session))
    }

    fn remember_session(&self, response: &reqwest::Response) {
        let session = response
            .headers()
            .get(meta::header::SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b)))
            .map(str::to_owned);
        if session.is_none() && response.headers().contains_key(meta::header::SESSION_ID) {
            tracing::warn!(server = %self.server, "the server's session id holds characters a session id may not; ignored");
        }
        lock(&self.state).session = session;
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

    /// Delivers one request and everything its reply carries. An `Err` settles the request.
    async fn run_request(self: &Arc<Self>, message: Message, id: Id) -> Result<(), UpstreamError> {
        let method = message.method().unwrap_or_default().to_owned();
        let legacy = matches!(self.era_of(&message), MessageEra::Legacy);
        let mut renewed = false;
        loop {
            let (reply, session) = self.post(&message).await?;
            match reply {
                Reply::Failed {
                    status: 404,
                    ref body,
                } if legacy && session.is_some() && !renewed && !is_method_not_found(body) => {
                    renewed = true;
                    self.reinitialize(session.as_deref()).await?;
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
                    return self.stream_reply(&method, &id, legacy, response).await;
                }
            }
        }
    }

    /// A non-success status: a JSON-RPC error body is the answer, anything else an HTTP error.
    async fn failed_reply(
        &self,
        method: &str,
        id: &Id,
        status: u16,
        body: &[u8],
    ) -> Result<(), UpstreamError> {
        if let Ok(reply) = Message::decode(body)
            && reply.kind() == Kind::Error
            && let Some(error) = reply.error_object()
        {
            // Servers often send such errors with a null or missing id; it answers this request.
            let reply = if reply.id() == Some(id) {
                reply
            } else {
                Message::error(Some(id.clone()), &error)
            };
            self.hand_up(Inbound::Message {
                message: reply,
                related: Some(id.clone()),
            })
            .await;
            return Ok(());
        }
        Err(self.http_error(method, status, body))
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

    /// Reads a reply stream until this request's response, resuming a broken legacy stream.
    async fn stream_reply(
        &self,
        method: &str,
        id: &Id,
        legacy: bool,
        response: reqwest::Response,
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
            if attempts >= MAX_RESUME_ATTEMPTS {
                return Err(self.protocol(format!(
                    "its reply stream to {method} broke {MAX_RESUME_ATTEMPTS} times in a row without a message ({end}); gave up resuming it"
                )));
            }
            attempts += 1;
            tokio::time::sleep(retry.unwrap_or(DEFAULT_RETRY_DELAY).min(MAX_RETRY_DELAY)).await;
            match self.resume(&last).await {
                Ok(Some(response)) => reader = SseReader::new(response),
                Ok(None) => {
                    return Err(self.protocol(format!(
                        "{end} before the response to {method} arrived, and the server does not allow resuming it (GET with Last-Event-ID answered 405)"
                    )));
                }
                Err(UpstreamError::Connect { reason, .. }) => {
                    tracing::debug!(server = %self.server, reason = %reason, "resuming a reply stream failed; will retry");
                    reader = SseReader::empty();
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn stream_ended(&self, method: &str, end: &SseEnd, legacy: bool) -> UpstreamError {
        let detail = if legacy {
            format!(
                "{end} before the response to {method} arrived, with no event id to resume from"
            )
        } else {
            format!("{end} before the response to {method} arrived")
        };
        self.protocol(detail)
    }

    /// GET with `Last-Event-ID`: the legacy way to pick a broken stream up. `None` means 405.
    async fn resume(
        &self,
        last_event_id: &str,
    ) -> Result<Option<reqwest::Response>, UpstreamError> {
        let (mut headers, _) = self.legacy_headers(false);
        if let Ok(v) = HeaderValue::from_str(last_event_id) {
            headers.insert(meta::header::LAST_EVENT_ID, v);
        }
        let response = self.get(headers).await?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(None);
        }
        if !status.is_success() {
            let body = read_error_body(response).await;
            return Err(self.http_error("GET (resuming a reply stream)", status.as_u16(), &body));
        }
        Ok(Some(response))
    }

    async fn get(&self, headers: HeaderMap) -> Result<reqwest::Response, UpstreamError> {
        self.client
            .get(self.url.clone())
            .headers(headers)
            .header(ACCEPT, EVENT_STREAM)
            .send()
            .await
            .map_err(|e| UpstreamError::Connect {
                server: self.server.clone(),
                reason: format!("GET {}: {}", self.url, send_failure(&e)),
            })
    }

    /// Sends a notification or a response and waits until the server accepted it.
    async fn deliver_one_way(self: &Arc<Self>, message: &Message) -> Result<(), UpstreamError> {
        let method = message.method().unwrap_or("a response").to_owned();
        let renewable = message.kind() == Kind::Notification
            && method != meta::method::INITIALIZED
            && matches!(self.era_of(message), MessageEra::Legacy);
        let mut renewed = false;
        loop {
            let (reply, session) = self.post(message).await?;
            match reply {
                Reply::Failed { status: 404, .. } if renewable && session.is_some() && !renewed => {
                    renewed = true;
                    self.reinitialize(session.as_deref()).await?;
                }
                Reply::Failed { status, body } => {
                    return Err(self.http_error(&method, status, &body));
                }
                // The body of an accepted notification means nothing; it is not read.
                _ => return Ok(()),
            }
        }
    }

    /// Starts a new legacy session after the server forgot `expired`: the remembered
    /// `initialize` again, `notifications/initialized`, and a new GET stream.
    async fn reinitialize(self: &Arc<Self>, expired: Option<&str>) -> Result<(), UpstreamError> {
        let _one_at_a_time = self.reinit.lock().await;
        let initialize = {
            let mut st = lock(&self.state);
            if st.session.as_deref() != expired {
                // Another request already started a new session.
                return Ok(());
            }
            st.session = None;
            if let Some(listener) = st.listener.take() {
                listener.abort();
            }
            st.initialize.clone()
        };
        let Some(initialize) = initialize else {
            return Err(self.protocol(
                "it ended the session (HTTP 404) and no initialize request is known to start a new one".to_owned(),
            ));
        };
        let n = self.reinit_count.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(server = %self.server, "the server ended the session (HTTP 404); initializing a new one");
        let id = Id::from(format!("manifold-reinitialize-{n}").as_str());
        let initialize = initialize.with_id(&id);
        let (reply, _) = self.post(&initialize).await?;
        let response = match reply {
            Reply::Json(response) => {
                let body = read_body_limited(response, MAX_JSON_BODY)
                    .await
                    .map_err(|_| {
                        self.protocol(
                            "its reply to the repeated initialize could not be read".to_owned(),
                        )
                    })?;
                Message::decode(&body).ok()
            }
            Reply::Stream(response) => self.collect_response(response, &id).await,
            Reply::Failed { status, body } => {
                return Err(self.http_error(meta::method::INITIALIZE, status, &body));
            }
            Reply::Accepted | Reply::Other { .. } => None,
        };
        match response {
            Some(m) if m.kind() == Kind::Result && m.id() == Some(&id) => {}
            Some(m) if m.kind() == Kind::Error => {
                return Err(self.protocol(format!(
                    "it refused to start a new session after ending the old one: {}",
                    m.error_object().map(|e| e.to_string()).unwrap_or_default()
                )));
            }
            _ => {
                return Err(self.protocol(
                    "it did not answer the repeated initialize after ending the session".to_owned(),
                ));
            }
        }
        let initialized = Message::notification(meta::method::INITIALIZED, None);
        let (reply, _) = self.post(&initialized).await?;
        if let Reply::Failed { status, body } = reply {
            return Err(self.http_error(meta::method::INITIALIZED, status, &body));
        }
        self.open_listener();
        Ok(())
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

    /// Opens (or reopens) the legacy GET stream for server-initiated messages.
    fn open_listener(self: &Arc<Self>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let me = Arc::clone(self);
        let task = tokio::spawn(async move { me.listen().await });
        if let Some(old) = lock(&self.state).listener.replace(task.abort_handle()) {
            old.abort();
        }
    }

    async fn listen(self: Arc<Self>) {
        let mut cursor: Option<String> = None;
        let mut retry: Option<Duration> = None;
        let mut failures = 0u32;
        loop {
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            let (mut headers, _) = self.legacy_headers(false);
            if let Some(last) = cursor
                .as_deref()
                .and_then(|c| HeaderValue::from_str(c).ok())
            {
                headers.insert(meta::header::LAST_EVENT_ID, last);
            }
            match self.get(headers).await {
                Err(e) => {
                    failures += 1;
                    tracing::debug!(server = %self.server, error = %e, "the GET stream could not be opened");
                }
                Ok(response) => {
                    let status = response.status();
                    if status == StatusCode::METHOD_NOT_ALLOWED {
                        tracing::debug!(server = %self.server, "the server offers no GET stream (405); server-initiated messages come on reply streams only");
                        return;
                    }
                    if !status.is_success() {
                        tracing::info!(server = %self.server, status = status.as_u16(), "the server refused the GET stream; server-initiated messages come on reply streams only");
                        return;
                    }
                    if media_type(&response).as_deref() != Some(EVENT_STREAM) {
                        tracing::warn!(server = %self.server, "the server answered the GET stream without text/event-stream; not listening");
                        return;
                    }
                    let mut reader = SseReader::new(response);
                    let mut got_message = false;
                    let end = loop {
                        match reader.next().await {
                            Ok(SseItem::Event(event)) => {
                                if let Some(last) = reader.last_event_id() {
                                    cursor = Some(last);
                                }
                                retry = reader.retry().or(retry);
                                let Some(data) = event.data.as_deref().filter(|d| !d.is_empty())
                                else {
                                    continue;
                                };
                                if event.kind() != "message" {
                                    continue;
                                }
                                got_message = true;
                                let item = match Message::decode(data.as_bytes()) {
                                    Ok(message) => Inbound::Message {
                                        message,
                                        related: None,
                                    },
                                    Err(fault) => Inbound::Fault(fault),
                                };
                                if !self.hand_up(item).await {
                                    return;
                                }
                            }
                            Ok(SseItem::TooLarge { limit }) => {
                                tracing::warn!(server = %self.server, limit, "the server sent an event larger than the limit on its GET stream; it was dropped");
                            }
                            Err(end) => break end,
                        }
                    };
                    failures = if got_message { 0 } else { failures + 1 };
                    tracing::debug!(server = %self.server, end = %end, "the GET stream ended; reconnecting");
                }
            }
            if failures >= MAX_RESUME_ATTEMPTS {
                tracing::warn!(server = %self.server, attempts = failures, "the GET stream keeps failing; server-initiated messages now come on reply streams only");
                return;
            }
            tokio::time::sleep(retry.unwrap_or(DEFAULT_RETRY_DELAY).min(MAX_RETRY_DELAY)).await;
        }
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

    async fn end_session(&self) {
        let (headers, session) = self.legacy_headers(false);
        if session.is_none() {
            return;
        }
        let request = self.client.delete(self.url.clone()).headers(headers).send();
        match tokio::time::timeout(CLOSE_TIMEOUT, request).await {
            Ok(Ok(response)) => {
                let status = response.status();
                if !status.is_success() && status != StatusCode::METHOD_NOT_ALLOWED {
                    tracing::debug!(server = %self.server, status = status.as_u16(), "the server refused to end the session");
                }
            }
            Ok(Err(e)) => {
                tracing::debug!(server = %self.server, error = %describe_error(&e), "could not end the session");
            }
            Err(_) => {
                tracing::debug!(server = %self.server, "ending the session timed out");
            }
        }
    }
}

/// Whether an error body says "unknown method": a 404 that is not about the session.
fn is_method_not_found(body: &[u8]) -> bool {
    Message::decode(body)
        .ok()
        .and_then(|m| m.error_object())
        .is_some_and(|e| e.code == manifold_wire::ErrorCode::MethodNotFound.code())
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
            let (registered_tx, registered_rx) = oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                // Waiting for registration keeps the task's own removal from coming first.
                let _ = registered_rx.await;
                let outcome = me.run_request(message, task_id.clone()).await;
                lock(&me.state).streams.remove(&task_id);
                if let Err(error) = outcome {
                    me.hand_up(Inbound::RequestFailed { id: task_id, error })
                        .await;
                }
            });
            lock(&shared.state)
                .streams
                .insert(id, (task.abort_handle(), modern));
            let _ = registered_tx.send(());
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
}

impl Drop for StreamableHttpTransport {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.abort_all();
    }
}
