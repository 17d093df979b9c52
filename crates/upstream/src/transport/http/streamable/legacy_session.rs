//! The legacy era's session over Streamable HTTP: the `Mcp-Session-Id` headers, a session the
//! server ended and its renewal (one `initialize` again, while requests wait), a broken reply
//! stream resumed with `Last-Event-ID` in the session that issued it, the standalone GET stream
//! for server messages, and the `DELETE` that ends the session. The modern era has none of this:
//! each of its requests stands alone (`streamable.rs`).

use super::*;

impl Shared {
    /// The legacy headers of a request: the session (unless this starts one) and the revision.
    pub(super) fn legacy_headers(&self, starts_session: bool) -> (HeaderMap, Option<String>) {
        legacy_headers_of(&lock(&self.state), starts_session)
    }

    /// The legacy headers of a request once no session renewal is under way. The wait is bounded
    /// by the renewal (which ends with its own request, at the latest at that request's deadline)
    /// and by the waiting request's own deadline, which aborts its task.
    pub(super) async fn legacy_headers_after_renewal(&self) -> (HeaderMap, Option<String>) {
        loop {
            let mut renewed = std::pin::pin!(self.renewed.notified());
            // Registered before the flag is read, so a renewal ending in between still wakes us.
            renewed.as_mut().enable();
            {
                let st = lock(&self.state);
                if !st.renewing {
                    return legacy_headers_of(&st, false);
                }
            }
            tracing::debug!(server = %self.server, "waiting for the session renewal");
            renewed.await;
        }
    }

    /// Takes the session an `initialize` response started as the live one, and returns it.
    pub(super) fn remember_session(&self, response: &reqwest::Response) -> Option<String> {
        let session = response
            .headers()
            .get(meta::header::SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b)))
            .map(str::to_owned);
        if session.is_none() && response.headers().contains_key(meta::header::SESSION_ID) {
            tracing::warn!(server = %self.server, "the server's session id holds characters a session id may not; ignored");
        }
        lock(&self.state).session.clone_from(&session);
        self.live_session.send_replace(session.clone());
        session
    }

    /// Picks a broken legacy reply stream up after `last`, in the session it belongs to, trying
    /// until [`MAX_RESUME_ATTEMPTS`] (shared with the streams that ended without a message).
    pub(super) async fn resume_reply(
        &self,
        method: &str,
        last: &str,
        (session, caller): (Option<&str>, Option<&CallerToken>),
        end: &SseEnd,
        attempts: &mut u32,
        retry: Option<Duration>,
    ) -> Result<SseReader, UpstreamError> {
        // Why the latest reconnection failed, when the server could not be reached at all: then
        // it went away mid-call, which is what the caller must hear, not that streams broke.
        let mut unreachable: Option<String> = None;
        loop {
            if !self.in_session(session) {
                return Err(self.reply_lost(method));
            }
            if *attempts >= MAX_RESUME_ATTEMPTS {
                return Err(match unreachable {
                    Some(reason) => UpstreamError::Connect {
                        server: self.server.clone(),
                        reason: format!(
                            "the server closed the reply stream to {method} and refused reconnection: {reason}"
                        ),
                    },
                    None => self.protocol(format!(
                        "its reply stream to {method} broke {MAX_RESUME_ATTEMPTS} times in a row without a message ({end}); gave up resuming it"
                    )),
                });
            }
            *attempts += 1;
            tokio::time::sleep(retry.unwrap_or(DEFAULT_RETRY_DELAY).min(MAX_RETRY_DELAY)).await;
            match self.resume(last, session, caller).await {
                Ok(Resumption::Stream(response)) => return Ok(SseReader::new(response)),
                Ok(Resumption::NotAllowed) => {
                    let why = format!(
                        "before the response to {method} arrived, and the server does not allow resuming it (GET with Last-Event-ID answered 405)"
                    );
                    return Err(match end {
                        SseEnd::Broken(_) => UpstreamError::Closed {
                            server: self.server.clone(),
                            cause: format!("{end} {why}"),
                        },
                        SseEnd::Eof => self.protocol(format!("{end} {why}")),
                    });
                }
                Ok(Resumption::SessionLost) => return Err(self.reply_lost(method)),
                Err(UpstreamError::Connect { reason, .. }) => {
                    tracing::debug!(server = %self.server, reason = %reason, "resuming a reply stream failed; will retry");
                    unreachable = Some(reason);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `session` is still the live session, with no renewal replacing it.
    fn in_session(&self, session: Option<&str>) -> bool {
        let st = lock(&self.state);
        !st.renewing && st.session.as_deref() == session
    }

    /// GET with `Last-Event-ID` in `session`: the legacy way to pick a broken stream up. Event
    /// ids mean something only in the session that issued them, so a stream is never resumed in
    /// another: a new session (or one being started) means the reply is lost.
    async fn resume(
        &self,
        last_event_id: &str,
        session: Option<&str>,
        caller: Option<&CallerToken>,
    ) -> Result<Resumption, UpstreamError> {
        let mut headers = {
            let st = lock(&self.state);
            if st.renewing || st.session.as_deref() != session {
                return Ok(Resumption::SessionLost);
            }
            legacy_headers_of(&st, false).0
        };
        if let Ok(v) = HeaderValue::from_str(last_event_id) {
            headers.insert(meta::header::LAST_EVENT_ID, v);
        }
        let response = self.get(headers, caller).await?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(Resumption::NotAllowed);
        }
        if status == StatusCode::NOT_FOUND && session.is_some() {
            return Ok(Resumption::SessionLost);
        }
        if !status.is_success() {
            let body = read_error_body(response).await;
            return Err(self.http_error("GET (resuming a reply stream)", status.as_u16(), &body));
        }
        Ok(Resumption::Stream(response))
    }

    async fn get(
        &self,
        headers: HeaderMap,
        caller: Option<&CallerToken>,
    ) -> Result<reqwest::Response, UpstreamError> {
        self.auth
            .send(caller, || {
                self.client
                    .get(self.url.clone())
                    .headers(headers.clone())
                    .header(ACCEPT, EVENT_STREAM)
            })
            .await
            .map_err(|e| e.into_upstream(&self.server, &format!("GET {}", self.url)))
    }

    /// Starts a new legacy session after the server forgot `expired`: the remembered
    /// `initialize` again, `notifications/initialized`, and a new GET stream. Other requests wait
    /// until it is done (or failed), then go out in the new session (or find the old one expired
    /// and try again).
    pub(super) async fn reinitialize(
        self: &Arc<Self>,
        expired: Option<&str>,
        caller: Option<&CallerToken>,
    ) -> Result<(), UpstreamError> {
        let _one_at_a_time = self.reinit.lock().await;
        let initialize = {
            let mut st = lock(&self.state);
            if st.session.as_deref() != expired {
                // Another request already started a new session.
                return Ok(());
            }
            st.renewing = true;
            if let Some(listener) = st.listener.take() {
                listener.abort();
            }
            st.initialize.clone()
        };
        // Ends the renewal however this returns, even when the request driving it is aborted.
        let _renewal = RenewalUnderWay(self);
        let Some(initialize) = initialize else {
            return Err(self.protocol(
                "it ended the session (HTTP 404) and no initialize request is known to start a new one".to_owned(),
            ));
        };
        let n = self.reinit_count.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(server = %self.server, "the server ended the session (HTTP 404); initializing a new one");
        let id = Id::from(format!("manifold-reinitialize-{n}").as_str());
        let initialize = initialize.with_id(&id);
        let (reply, _) = self.post_with(&initialize, false, caller).await?;
        let response = match reply {
            Reply::Json(response) => {
                let body =
                    read_body_limited(response, MAX_JSON_BODY)
                        .await
                        .map_err(|e| match e {
                            BodyError::TooLarge { limit } => self.protocol(format!(
                                "its reply to the repeated initialize is larger than {limit} bytes"
                            )),
                            BodyError::Read(why) => UpstreamError::Connect {
                                server: self.server.clone(),
                                reason: format!(
                                    "reading its reply to the repeated initialize failed: {why}"
                                ),
                            },
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
        let (reply, _) = self.post_with(&initialized, false, caller).await?;
        if let Reply::Failed { status, body } = reply {
            return Err(self.http_error(meta::method::INITIALIZED, status, &body));
        }
        self.open_listener();
        Ok(())
    }

    /// Opens (or reopens) the legacy GET stream for server-initiated messages.
    pub(super) fn open_listener(self: &Arc<Self>) {
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
            match self.get(headers, None).await {
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

    pub(super) async fn end_session(&self) {
        let (headers, session) = self.legacy_headers(false);
        if session.is_none() {
            return;
        }
        let request = self.auth.send(None, || {
            self.client
                .delete(self.url.clone())
                .headers(headers.clone())
        });
        match tokio::time::timeout(CLOSE_TIMEOUT, request).await {
            Ok(Ok(response)) => {
                let status = response.status();
                if !status.is_success() && status != StatusCode::METHOD_NOT_ALLOWED {
                    tracing::debug!(server = %self.server, status = status.as_u16(), "the server refused to end the session");
                }
            }
            Ok(Err(e)) => {
                let e = e.into_upstream(&self.server, "DELETE");
                tracing::debug!(server = %self.server, error = %e, "could not end the session");
            }
            Err(_) => {
                tracing::debug!(server = %self.server, "ending the session timed out");
            }
        }
    }
}

/// Marks a session renewal under way until dropped, then wakes the requests waiting for it.
struct RenewalUnderWay<'a>(&'a Shared);

impl Drop for RenewalUnderWay<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).renewing = false;
        self.0.renewed.notify_waiters();
    }
}

/// How a GET resuming a reply stream went.
enum Resumption {
    Stream(reqwest::Response),
    /// 405: the server does not resume streams.
    NotAllowed,
    /// The stream's session is gone (replaced, being replaced, or unknown to the server).
    SessionLost,
}

/// The legacy headers of a request: the session (unless this starts one) and the revision.
fn legacy_headers_of(st: &State, starts_session: bool) -> (HeaderMap, Option<String>) {
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

/// Whether an error body says "unknown method": a 404 that is not about the session.
pub(super) fn is_method_not_found(body: &[u8]) -> bool {
    Message::decode(body)
        .ok()
        .and_then(|m| m.error_object())
        .is_some_and(|e| e.code == manifold_wire::ErrorCode::MethodNotFound.code())
}
