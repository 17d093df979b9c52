//! Why: the figures must measure the gateways, not the client, so the benchmark talks MCP itself
//! over one hyper HTTP/1.1 connection per worker: request bodies are two constant byte strings
//! around an id, each call is timed from send to the last body byte, and replies are checked
//! (JSON or SSE, right id, no error, the echoed text) only after the clock has stopped.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The stateless revision.
pub const MODERN_REVISION: &str = "2026-07-28";
/// The legacy revision offered in `initialize`.
pub const LEGACY_OFFER: &str = "2025-11-25";
/// A hang guard on every request; no figure is ever close to it.
pub const REQUEST_HANG_GUARD: Duration = Duration::from_secs(60);
const CLIENT_INFO: &str = concat!(
    r#"{"name":"manifold-bench","version":""#,
    env!("CARGO_PKG_VERSION"),
    r#""}"#
);

/// Why a request or a reply failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{url} is not an http://IP:PORT/PATH URL")]
    BadUrl { url: String },
    #[error("could not connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP exchange failed: {0}")]
    Http(String),
    #[error("HTTP {status}: {excerpt}")]
    Status { status: u16, excerpt: String },
    #[error("{0}")]
    Protocol(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Which era a session speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Legacy,
    Modern,
}

impl Era {
    pub fn name(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// Where an MCP endpoint listens.
#[derive(Debug, Clone)]
pub struct Endpoint {
    addr: SocketAddr,
    authority: HeaderValue,
    path: String,
    url: String,
}

impl Endpoint {
    /// Reads `http://IP:PORT/PATH` (the benchmark only ever talks to loopback addresses).
    pub fn parse(url: &str) -> Result<Self, ClientError> {
        let bad = || ClientError::BadUrl {
            url: url.to_owned(),
        };
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, "/"),
        };
        let addr: SocketAddr = authority.parse().map_err(|_| bad())?;
        let authority = HeaderValue::from_str(authority).map_err(|_| bad())?;
        Ok(Endpoint {
            addr,
            authority,
            path: path.to_owned(),
            url: url.to_owned(),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The same server at another path (Manifold's `/metrics` beside its `/mcp`).
    pub fn with_path(&self, path: &str) -> Endpoint {
        let url = format!("http://{}{path}", self.addr);
        Endpoint {
            addr: self.addr,
            authority: self.authority.clone(),
            path: path.to_owned(),
            url,
        }
    }
}

/// One keep-alive HTTP/1.1 connection.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    endpoint: Endpoint,
}

/// A whole HTTP answer, and how long it took from sending to its last byte.
pub struct HttpReply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub elapsed: Duration,
}

impl Connection {
    pub async fn open(endpoint: &Endpoint) -> Result<Self, ClientError> {
        let stream = tokio::net::TcpStream::connect(endpoint.addr)
            .await
            .map_err(|source| ClientError::Connect {
                addr: endpoint.addr,
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| ClientError::Http(e.to_string()))?;
        tokio::spawn(async move {
            // The connection ends when the sender is dropped or the server closes it; either is
            // reported through the next request on it.
            let _ = connection.await;
        });
        Ok(Connection {
            sender,
            endpoint: endpoint.clone(),
        })
    }

    /// POSTs `body` with `headers` and reads the whole answer.
    pub async fn post(
        &mut self,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<HttpReply, ClientError> {
        match tokio::time::timeout(REQUEST_HANG_GUARD, self.post_unguarded(headers, body)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ClientError::Timeout(REQUEST_HANG_GUARD)),
        }
    }

    /// GETs the endpoint's path and reads the whole answer.
    pub async fn get(&mut self) -> Result<HttpReply, ClientError> {
        match tokio::time::timeout(
            REQUEST_HANG_GUARD,
            self.send_unguarded(Method::GET, &[], Bytes::new()),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => Err(ClientError::Timeout(REQUEST_HANG_GUARD)),
        }
    }

    async fn post_unguarded(
        &mut self,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<HttpReply, ClientError> {
        self.send_unguarded(Method::POST, headers, body).await
    }

    async fn send_unguarded(
        &mut self,
        method: Method,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<HttpReply, ClientError> {
        self.sender
            .ready()
            .await
            .map_err(|e| ClientError::Http(e.to_string()))?;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = self
            .endpoint
            .path
            .parse()
            .map_err(|_| ClientError::BadUrl {
                url: self.endpoint.url.clone(),
            })?;
        let map = request.headers_mut();
        map.insert(HOST, self.endpoint.authority.clone());
        for (name, value) in headers {
            map.insert(name.clone(), value.clone());
        }
        let started = Instant::now();
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| ClientError::Http(e.to_string()))?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| ClientError::Http(e.to_string()))?
            .to_bytes();
        let elapsed = started.elapsed();
        Ok(HttpReply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
            elapsed,
        })
    }
}

/// A session's standing headers: the session id and revision (legacy), or the revision (modern).
#[derive(Debug, Clone)]
pub struct Session {
    pub era: Era,
    headers: Vec<(HeaderName, HeaderValue)>,
}

fn common_headers() -> Vec<(HeaderName, HeaderValue)> {
    vec![
        (CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        ),
    ]
}

fn header_name(name: &'static str) -> HeaderName {
    HeaderName::from_static(name)
}

/// The `_meta` every modern request carries.
fn modern_meta() -> String {
    format!(
        r#""_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_REVISION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{CLIENT_INFO}}}"#
    )
}

impl Session {
    /// Opens a session: `initialize` + `notifications/initialized` (legacy), nothing (modern).
    pub async fn open(connection: &mut Connection, era: Era) -> Result<Session, ClientError> {
        if era == Era::Modern {
            return Ok(Session {
                era,
                headers: vec![(
                    header_name("mcp-protocol-version"),
                    HeaderValue::from_static(MODERN_REVISION),
                )],
            });
        }
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{LEGACY_OFFER}","capabilities":{{}},"clientInfo":{CLIENT_INFO}}}}}"#
        );
        let reply = connection
            .post(&common_headers(), Bytes::from(body))
            .await?;
        let message = reply.message_for(0)?;
        let result = message.result()?;
        #[derive(Deserialize)]
        struct InitializeView {
            #[serde(rename = "protocolVersion")]
            protocol_version: String,
        }
        let view: InitializeView = serde_json::from_str(result.get()).map_err(|e| {
            ClientError::Protocol(format!("the initialize result is not readable: {e}"))
        })?;
        let mut headers = Vec::with_capacity(2);
        if let Some(id) = reply.headers.get("mcp-session-id") {
            headers.push((header_name("mcp-session-id"), id.clone()));
        }
        let revision = HeaderValue::from_str(&view.protocol_version).map_err(|_| {
            ClientError::Protocol("the initialize result names an unprintable revision".into())
        })?;
        headers.push((header_name("mcp-protocol-version"), revision));
        let session = Session { era, headers };
        let mut initialized = common_headers();
        initialized.extend(session.headers.iter().cloned());
        let reply = connection
            .post(
                &initialized,
                Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            )
            .await?;
        if !(200..300).contains(&reply.status) {
            return Err(reply.status_error());
        }
        Ok(session)
    }
}

/// A request prepared once and sent many times: only the id changes between sends.
pub struct Prepared {
    suffix: Bytes,
    headers: Vec<(HeaderName, HeaderValue)>,
    expected_text: Option<String>,
}

const BODY_PREFIX: &[u8] = br#"{"jsonrpc":"2.0","id":"#;

impl Prepared {
    /// `tools/call` of `tool` with `{"message": message}`; the reply must echo `message`.
    pub fn tools_call(session: &Session, tool: &str, message: &str) -> Result<Self, ClientError> {
        let message_json = serde_json::to_string(message)
            .map_err(|e| ClientError::Protocol(format!("unencodable message: {e}")))?;
        let tool_json = serde_json::to_string(tool)
            .map_err(|e| ClientError::Protocol(format!("unencodable tool name: {e}")))?;
        let meta = match session.era {
            Era::Legacy => String::new(),
            Era::Modern => format!(",{}", modern_meta()),
        };
        let suffix = format!(
            r#","method":"tools/call","params":{{"name":{tool_json},"arguments":{{"message":{message_json}}}{meta}}}}}"#
        );
        let mut headers = Self::headers_for(session, "tools/call")?;
        if session.era == Era::Modern {
            let name = HeaderValue::from_str(tool)
                .map_err(|_| ClientError::Protocol(format!("tool {tool:?} cannot be a header")))?;
            headers.push((header_name("mcp-name"), name));
        }
        Ok(Prepared {
            suffix: Bytes::from(suffix),
            headers,
            expected_text: Some(message.to_owned()),
        })
    }

    /// `tools/list`, from `cursor` when given.
    pub fn tools_list(session: &Session, cursor: Option<&str>) -> Result<Self, ClientError> {
        let mut members = Vec::new();
        if let Some(cursor) = cursor {
            let cursor = serde_json::to_string(cursor)
                .map_err(|e| ClientError::Protocol(format!("unencodable cursor: {e}")))?;
            members.push(format!(r#""cursor":{cursor}"#));
        }
        if session.era == Era::Modern {
            members.push(modern_meta());
        }
        let params = if members.is_empty() {
            String::new()
        } else {
            format!(r#","params":{{{}}}"#, members.join(","))
        };
        Ok(Prepared {
            suffix: Bytes::from(format!(r#","method":"tools/list"{params}}}"#)),
            headers: Self::headers_for(session, "tools/list")?,
            expected_text: None,
        })
    }

    fn headers_for(
        session: &Session,
        method: &'static str,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, ClientError> {
        let mut headers = common_headers();
        headers.extend(session.headers.iter().cloned());
        if session.era == Era::Modern {
            headers.push((header_name("mcp-method"), HeaderValue::from_static(method)));
        }
        Ok(headers)
    }

    fn body(&self, id: u64) -> Bytes {
        let id = id.to_string();
        let mut body = Vec::with_capacity(BODY_PREFIX.len() + id.len() + self.suffix.len());
        body.extend_from_slice(BODY_PREFIX);
        body.extend_from_slice(id.as_bytes());
        body.extend_from_slice(&self.suffix);
        Bytes::from(body)
    }

    /// Sends the request with `id` and returns the timed reply, unchecked.
    pub async fn send(
        &self,
        connection: &mut Connection,
        id: u64,
    ) -> Result<HttpReply, ClientError> {
        connection.post(&self.headers, self.body(id)).await
    }

    /// Sends a `tools/call` and checks its reply: its duration when it echoed what was sent.
    pub async fn call(
        &self,
        connection: &mut Connection,
        id: u64,
    ) -> Result<Duration, ClientError> {
        let reply = self.send(connection, id).await?;
        self.check_call(&reply, id)?;
        Ok(reply.elapsed)
    }

    fn check_call(&self, reply: &HttpReply, id: u64) -> Result<(), ClientError> {
        let message = reply.message_for(id)?;
        let result = message.result()?;
        #[derive(Deserialize)]
        struct CallView<'a> {
            #[serde(rename = "isError", default)]
            is_error: Option<bool>,
            #[serde(borrow, default)]
            content: Vec<ContentView<'a>>,
        }
        #[derive(Deserialize)]
        struct ContentView<'a> {
            #[serde(borrow, default)]
            text: Option<Cow<'a, str>>,
        }
        let view: CallView<'_> = serde_json::from_str(result.get()).map_err(|e| {
            ClientError::Protocol(format!("the tools/call result is not readable: {e}"))
        })?;
        let text = view.content.first().and_then(|c| c.text.as_deref());
        if view.is_error == Some(true) {
            return Err(ClientError::Protocol(format!(
                "the tool reported an error: {}",
                excerpt(text.unwrap_or("").as_bytes())
            )));
        }
        if let Some(expected) = &self.expected_text
            && text != Some(expected.as_str())
        {
            return Err(ClientError::Protocol(format!(
                "the tool answered {} instead of echoing the {}-byte message",
                excerpt(text.unwrap_or("(no text)").as_bytes()),
                expected.len()
            )));
        }
        Ok(())
    }
}

/// One page of `tools/list`.
pub struct ListPage {
    pub tools: usize,
    pub elapsed: Duration,
}

/// Lists every tool, following cursors; the pages in order.
pub async fn list_all_tools(
    connection: &mut Connection,
    session: &Session,
    next_id: &mut u64,
) -> Result<Vec<ListPage>, ClientError> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let prepared = Prepared::tools_list(session, cursor.as_deref())?;
        *next_id += 1;
        let id = *next_id;
        let reply = prepared.send(connection, id).await?;
        let message = reply.message_for(id)?;
        let result = message.result()?;
        #[derive(Deserialize)]
        struct ListView {
            tools: Vec<serde::de::IgnoredAny>,
            #[serde(rename = "nextCursor", default)]
            next_cursor: Option<String>,
        }
        let view: ListView = serde_json::from_str(result.get()).map_err(|e| {
            ClientError::Protocol(format!("the tools/list result is not readable: {e}"))
        })?;
        let done = view.next_cursor.is_none();
        cursor = view.next_cursor;
        pages.push(ListPage {
            tools: view.tools.len(),
            elapsed: reply.elapsed,
        });
        if done || pages.len() > 10_000 {
            return Ok(pages);
        }
    }
}

/// One JSON-RPC message taken out of a reply.
pub struct ReplyMessage<'a> {
    text: Cow<'a, [u8]>,
}

#[derive(Deserialize)]
struct EnvelopeView<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

impl ReplyMessage<'_> {
    /// The raw `result`, or the JSON-RPC error as a failure.
    pub fn result(&self) -> Result<&RawValue, ClientError> {
        let view: EnvelopeView<'_> = serde_json::from_slice(&self.text)
            .map_err(|e| ClientError::Protocol(format!("the answer is not JSON-RPC: {e}")))?;
        match (view.result, view.error) {
            (Some(result), None) => Ok(result),
            (_, Some(error)) => Err(ClientError::Protocol(format!(
                "JSON-RPC error {}",
                excerpt(error.get().as_bytes())
            ))),
            (None, None) => Err(ClientError::Protocol(
                "the answer has neither result nor error".into(),
            )),
        }
    }
}

impl HttpReply {
    /// The message answering request `id`: the JSON body, or the SSE event that carries it.
    pub fn message_for(&self, id: u64) -> Result<ReplyMessage<'_>, ClientError> {
        if self.status != 200 {
            return Err(self.status_error());
        }
        let is_sse = self
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            return Ok(ReplyMessage {
                text: Cow::Borrowed(&self.body),
            });
        }
        for data in sse_data(&self.body) {
            let matches = serde_json::from_slice::<EnvelopeView<'_>>(&data)
                .ok()
                .and_then(|v| v.id.map(|i| i.get() == id.to_string()))
                .unwrap_or(false);
            if matches {
                return Ok(ReplyMessage { text: data });
            }
        }
        Err(ClientError::Protocol(format!(
            "the SSE reply carried no answer to request {id}: {}",
            excerpt(&self.body)
        )))
    }

    /// This reply as a status failure.
    pub fn status_error(&self) -> ClientError {
        ClientError::Status {
            status: self.status,
            excerpt: excerpt(&self.body),
        }
    }
}

/// The `data` of each event of an SSE body, multi-line data joined with `\n`.
fn sse_data(body: &[u8]) -> Vec<Cow<'_, [u8]>> {
    let mut events = Vec::new();
    let mut current: Option<Cow<'_, [u8]>> = None;
    for raw_line in body.split(|b| *b == b'\n') {
        let line = raw_line.strip_suffix(b"\r").unwrap_or(raw_line);
        if line.is_empty() {
            if let Some(data) = current.take() {
                events.push(data);
            }
            continue;
        }
        let Some(value) = line.strip_prefix(b"data:") else {
            continue;
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        current = Some(match current.take() {
            None => Cow::Borrowed(value),
            Some(previous) => {
                let mut joined = previous.into_owned();
                joined.push(b'\n');
                joined.extend_from_slice(value);
                Cow::Owned(joined)
            }
        });
    }
    if let Some(data) = current {
        events.push(data);
    }
    events
}

/// At most 160 characters of `bytes`, for error messages.
pub fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().nth(160) {
        Some((cut, _)) => format!("{}...", text.get(..cut).unwrap_or(text)),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn sse_events_are_split_and_multi_line_data_joined() {
        let body = b"id: 1\nretry: 10\n\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata:{\"b\":2}";
        let events = sse_data(body);
        assert_eq!(events.len(), 2);
        assert_eq!(&*events[0], b"{\"a\":\n1}");
        assert_eq!(&*events[1], b"{\"b\":2}");
    }

    #[test]
    fn urls_other_than_http_ip_port_are_refused() {
        assert!(Endpoint::parse("http://127.0.0.1:80/mcp").is_ok());
        assert!(Endpoint::parse("https://127.0.0.1:80/mcp").is_err());
        assert!(Endpoint::parse("http://localhost:80/mcp").is_err());
    }

    #[test]
    fn another_path_keeps_the_server() {
        let mcp = Endpoint::parse("http://127.0.0.1:8080/mcp").unwrap();
        let metrics = mcp.with_path("/metrics");
        assert_eq!(metrics.url(), "http://127.0.0.1:8080/metrics");
        assert_eq!(metrics.addr, mcp.addr);
        assert_eq!(metrics.path, "/metrics");
    }

    #[test]
    fn a_prepared_body_is_the_request_with_its_id() {
        let session = Session {
            era: Era::Modern,
            headers: Vec::new(),
        };
        let prepared = Prepared::tools_call(&session, "echo", "hi").unwrap();
        let value: serde_json::Value = serde_json::from_slice(&prepared.body(42)).unwrap();
        assert_eq!(value["id"], 42);
        assert_eq!(value["params"]["arguments"]["message"], "hi");
        assert_eq!(
            value["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            MODERN_REVISION
        );
    }
}
