//! The HTTP+SSE transport of protocol revision 2024-11-05 (deprecated, still widely deployed).
//!
//! One long GET stream carries everything the server says; the first event names the endpoint
//! that every client message is POSTed to. The stream is the connection: when it ends, the
//! connection is closed, because nothing else could bring a reply.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_wire::{Id, Kind, Message, Revision};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use tokio::task::AbortHandle;
use url::Url;

use super::sse_stream::{SseItem, SseReader};
use crate::auth::RequestAuthorizer;
use crate::auth::passthrough::CallerToken;
use crate::connection::lock;
use crate::error::UpstreamError;
use crate::http_client::{excerpt, media_type, read_error_body};
use crate::transport::{Inbound, InboundTx, Transport};

/// How long the server may take to name its message endpoint.
pub const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a POST may take to be accepted (replies come on the stream, not in the POST).
pub const POST_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection over the 2024-11-05 HTTP+SSE transport.
pub struct LegacySseTransport {
    shared: Arc<Shared>,
    reader: AbortHandle,
}

struct Shared {
    server: String,
    client: reqwest::Client,
    sse_url: Url,
    endpoint: Url,
    inbound: InboundTx,
    closed: AtomicBool,
    /// Requests posted and not yet answered, to attribute a lost (oversized) reply.
    outstanding: Mutex<HashSet<Id>>,
    /// Adds credentials to every request and answers the server's challenges.
    auth: RequestAuthorizer,
}

/// Opens the SSE stream, waits for the `endpoint` event and starts reading.
pub async fn open(
    server: &str,
    client: reqwest::Client,
    sse_url: Url,
    inbound: InboundTx,
) -> Result<LegacySseTransport, UpstreamError> {
    open_with_auth(
        server,
        client,
        sse_url,
        inbound,
        RequestAuthorizer::default(),
    )
    .await
}

/// Like [`open`], sending every request through `auth`.
pub async fn open_with_auth(
    server: &str,
    client: reqwest::Client,
    sse_url: Url,
    inbound: InboundTx,
    auth: RequestAuthorizer,
) -> Result<LegacySseTransport, UpstreamError> {
    let response = auth
        .send(None, || {
            client
                .get(sse_url.clone())
                .header(ACCEPT, "text/event-stream")
        })
        .await
        .map_err(|e| e.into_upstream(server, &format!("GET {sse_url}")))?;
    let status = response.status();
    if !status.is_success() {
        let body = read_error_body(response).await;
        return Err(UpstreamError::Http {
            server: server.to_owned(),
            method: "GET (opening the HTTP+SSE stream)".to_owned(),
            status: status.as_u16(),
            body: excerpt(&body),
        });
    }
    let protocol = |detail: String| UpstreamError::Protocol {
        server: server.to_owned(),
        detail,
    };
    let content_type = media_type(&response);
    if content_type.as_deref() != Some("text/event-stream") {
        return Err(protocol(format!(
            "{sse_url} answered GET with content type {content_type:?}, not an SSE stream; is it the server's SSE URL (often ending in /sse)?"
        )));
    }
    let mut reader = SseReader::new(response);
    let mut early = Vec::new();
    let waiting = async {
        loop {
            match reader.next().await {
                Ok(SseItem::Event(event)) if event.kind() == "endpoint" => {
                    return Ok(event.data.unwrap_or_default());
                }
                Ok(SseItem::Event(event)) => {
                    if let Some(data) = event.data.filter(|d| !d.is_empty()) {
                        early.push(data);
                    }
                }
                Ok(SseItem::TooLarge { limit }) => {
                    tracing::warn!(
                        server,
                        limit,
                        "an SSE event larger than the limit was dropped"
                    );
                }
                Err(end) => {
                    return Err(protocol(format!(
                        "{end} before naming its message endpoint (the \"endpoint\" event)"
                    )));
                }
            }
        }
    };
    let data = tokio::time::timeout(ENDPOINT_TIMEOUT, waiting)
        .await
        .map_err(|_| {
            protocol(format!(
                "it sent no \"endpoint\" event within {ENDPOINT_TIMEOUT:?} on {sse_url}; is this an MCP HTTP+SSE server?"
            ))
        })??;
    let endpoint = sse_url.join(data.trim()).map_err(|e| {
        protocol(format!(
            "its endpoint event {:?} is not a usable URL: {e}",
            data.chars().take(200).collect::<String>()
        ))
    })?;
    if endpoint.origin() != sse_url.origin() {
        return Err(UpstreamError::Connect {
            server: server.to_owned(),
            reason: format!(
                "it named a message endpoint on another origin ({endpoint}); Manifold only posts to the origin of the configured URL"
            ),
        });
    }
    tracing::debug!(server, endpoint = %endpoint, "HTTP+SSE endpoint received");
    let shared = Arc::new(Shared {
        server: server.to_owned(),
        client,
        sse_url,
        endpoint,
        inbound,
        closed: AtomicBool::new(false),
        outstanding: Mutex::new(HashSet::new()),
        auth,
    });
    let task = tokio::spawn(read_stream(Arc::clone(&shared), reader, early));
    Ok(LegacySseTransport {
        shared,
        reader: task.abort_handle(),
    })
}

async fn read_stream(shared: Arc<Shared>, mut reader: SseReader, early: Vec<String>) {
    for data in early {
        if !shared.deliver(&data).await {
            return;
        }
    }
    let end = loop {
        match reader.next().await {
            Ok(SseItem::Event(event)) => {
                if event.kind() != "message" {
                    tracing::debug!(server = %shared.server, event = %event.kind(), "skipped an SSE event of another type");
                    continue;
                }
                let Some(data) = event.data.filter(|d| !d.is_empty()) else {
                    continue;
                };
                if !shared.deliver(&data).await {
                    return;
                }
            }
            Ok(SseItem::TooLarge { limit }) => {
                let waiting: Vec<Id> = lock(&shared.outstanding).iter().cloned().collect();
                if let [only] = waiting.as_slice() {
                    // With one request waiting, the dropped event can only have been its reply.
                    lock(&shared.outstanding).remove(only);
                    let error = UpstreamError::Protocol {
                        server: shared.server.clone(),
                        detail: format!(
                            "it sent an SSE event larger than {limit} bytes while this request waited; the event was dropped and the request abandoned"
                        ),
                    };
                    if shared
                        .inbound
                        .send(Inbound::RequestFailed {
                            id: only.clone(),
                            error,
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                } else {
                    tracing::warn!(server = %shared.server, limit, "the server sent an SSE event larger than the limit; it was dropped");
                }
            }
            Err(end) => break end,
        }
    };
    let cause = if shared.closed.load(Ordering::Acquire) {
        "the client closed the connection".to_owned()
    } else {
        format!("{end}; over HTTP+SSE that stream carries every reply, so the connection is over")
    };
    let _ = shared.inbound.send(Inbound::Closed { cause }).await;
}

impl Shared {
    /// Hands one event's message up; false once the connection is gone.
    async fn deliver(&self, data: &str) -> bool {
        let item = match Message::decode(data.as_bytes()) {
            Ok(message) => {
                if let Some(id) = message.id().filter(|_| message.is_response()) {
                    lock(&self.outstanding).remove(id);
                }
                Inbound::Message {
                    message,
                    related: None,
                }
            }
            Err(fault) => Inbound::Fault(fault),
        };
        self.inbound.send(item).await.is_ok()
    }

    async fn post(
        &self,
        message: &Message,
        caller: Option<&CallerToken>,
    ) -> Result<(), UpstreamError> {
        let method = message.method().unwrap_or("a response");
        let request = self.auth.send(caller, || {
            self.client
                .post(self.endpoint.clone())
                .headers(super::trace_headers::from_meta(message))
                .header(CONTENT_TYPE, "application/json")
                .body(message.as_str().to_owned())
        });
        let response = tokio::time::timeout(POST_TIMEOUT, request)
            .await
            .map_err(|_| UpstreamError::Timeout {
                server: self.server.clone(),
                method: method.to_owned(),
                after: POST_TIMEOUT,
            })?
            .map_err(|e| {
                e.into_upstream(&self.server, &format!("POST {} ({method})", self.endpoint))
            })?;
        let status = response.status();
        if !status.is_success() {
            let body = read_error_body(response).await;
            return Err(UpstreamError::Http {
                server: self.server.clone(),
                method: method.to_owned(),
                status: status.as_u16(),
                body: excerpt(&body),
            });
        }
        Ok(())
    }
}

impl Transport for LegacySseTransport {
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
            if shared.closed.load(Ordering::Acquire) || self.reader.is_finished() {
                return Err(UpstreamError::Closed {
                    server: shared.server.clone(),
                    cause: "the HTTP+SSE stream is closed".to_owned(),
                });
            }
            let id = message
                .id()
                .cloned()
                .filter(|_| message.kind() == Kind::Request);
            if let Some(id) = &id {
                lock(&shared.outstanding).insert(id.clone());
            }
            let outcome = shared.post(&message, caller.as_ref()).await;
            if outcome.is_err()
                && let Some(id) = &id
            {
                lock(&shared.outstanding).remove(id);
            }
            outcome
        })
    }

    fn cancel_request(&self, id: &Id) -> bool {
        lock(&self.shared.outstanding).remove(id);
        false
    }

    fn negotiated(&self, _revision: Revision) {}

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.shared.closed.store(true, Ordering::Release);
            self.reader.abort();
        })
    }

    fn describe(&self) -> String {
        format!("HTTP+SSE {}", self.shared.sse_url)
    }
}

impl Drop for LegacySseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
