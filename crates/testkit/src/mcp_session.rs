//! Why: the end-to-end tests talk to an MCP endpoint over Streamable HTTP in one of the two eras,
//! and each file used to build its own client: the legacy handshake (`initialize`, the
//! `Mcp-Session-Id` it mints, `notifications/initialized`), the modern request (per-request
//! `_meta`, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers), bearer tokens, and
//! reading an answer that comes as JSON or as an SSE stream. One client here, in the exact form the
//! tests sent by hand, so a test says what it asks and not how.

use std::sync::atomic::{AtomicI64, Ordering};

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::error::TestkitError;

/// The legacy revision the tests speak unless told otherwise.
pub const LEGACY_REVISION: &str = "2025-11-25";
/// The stateless revision.
pub const MODERN_REVISION: &str = "2026-07-28";
/// What a client that takes either reply form sends as `Accept`.
pub const ACCEPT_JSON_OR_SSE: &str = "application/json, text/event-stream";

/// Which era a session speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEra {
    /// `initialize` first, then every request in the session it minted (2024-11-05 .. 2025-11-25).
    Legacy,
    /// No handshake: every request carries its own `_meta` and headers (2026-07-28).
    Modern,
}

/// An HTTP client for plain-HTTP tests. reqwest is built without a TLS provider in this
/// workspace, and even plain HTTP needs one installed; proxies from the environment are ignored.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// How a session is opened: the endpoint, and what the client says about itself.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    url: String,
    http: Option<reqwest::Client>,
    bearer: Option<String>,
    client_name: String,
    client_version: String,
    capabilities: Value,
    revision: Option<String>,
    accept: String,
}

impl SessionOptions {
    pub fn new(url: impl Into<String>) -> SessionOptions {
        SessionOptions {
            url: url.into(),
            http: None,
            bearer: None,
            client_name: "manifold-testkit".to_owned(),
            client_version: "1".to_owned(),
            capabilities: json!({}),
            revision: None,
            accept: ACCEPT_JSON_OR_SSE.to_owned(),
        }
    }

    /// `Authorization: Bearer TOKEN` on every request.
    pub fn bearer(mut self, token: impl Into<String>) -> SessionOptions {
        self.bearer = Some(token.into());
        self
    }

    /// The `clientInfo` the client sends.
    pub fn client_info(mut self, name: &str, version: &str) -> SessionOptions {
        name.clone_into(&mut self.client_name);
        version.clone_into(&mut self.client_version);
        self
    }

    /// The client capabilities it declares (`{}` unless set).
    pub fn capabilities(mut self, capabilities: Value) -> SessionOptions {
        self.capabilities = capabilities;
        self
    }

    /// The protocol revision it asks for (default: [`LEGACY_REVISION`] or [`MODERN_REVISION`]).
    pub fn revision(mut self, revision: &str) -> SessionOptions {
        self.revision = Some(revision.to_owned());
        self
    }

    /// The `Accept` header of every request ([`ACCEPT_JSON_OR_SSE`] unless set).
    pub fn accept(mut self, accept: &str) -> SessionOptions {
        accept.clone_into(&mut self.accept);
        self
    }

    /// A client to share (its connection pool) instead of a new one.
    pub fn http(mut self, http: reqwest::Client) -> SessionOptions {
        self.http = Some(http);
        self
    }

    /// A modern session; nothing is sent until the first request.
    pub fn modern(self) -> McpSession {
        self.session(SessionEra::Modern, MODERN_REVISION)
    }

    /// A legacy session: `initialize` (which must be answered 200 with an `Mcp-Session-Id`),
    /// then `notifications/initialized` (which must be accepted with 202).
    pub async fn legacy(self) -> Result<McpSession, TestkitError> {
        let mut session = self.session(SessionEra::Legacy, LEGACY_REVISION);
        let reply = session.send_initialize().await?;
        let id = reply
            .header("mcp-session-id")
            .filter(|_| reply.status == 200)
            .ok_or_else(|| TestkitError::NoAnswer {
                method: "initialize (with an Mcp-Session-Id)".to_owned(),
                status: reply.status,
                body: reply.body.clone(),
            })?;
        session.session_id = Some(id.to_owned());
        let initialized = session
            .notify("notifications/initialized", Value::Null)
            .await?;
        if initialized.status != 202 {
            return Err(TestkitError::NoAnswer {
                method: "notifications/initialized (accepted with 202)".to_owned(),
                status: initialized.status,
                body: initialized.body,
            });
        }
        Ok(session)
    }

    /// Only the legacy `initialize` request, with id 1: its reply whatever the status (for tests
    /// of who may open a session).
    pub async fn initialize(self) -> Result<Reply, TestkitError> {
        self.session(SessionEra::Legacy, LEGACY_REVISION)
            .send_initialize()
            .await
    }

    /// A session of `era`.
    pub async fn open(self, era: SessionEra) -> Result<McpSession, TestkitError> {
        match era {
            SessionEra::Legacy => self.legacy().await,
            SessionEra::Modern => Ok(self.modern()),
        }
    }

    fn session(self, era: SessionEra, default_revision: &str) -> McpSession {
        McpSession {
            http: self.http.unwrap_or_else(http_client),
            url: self.url,
            era,
            revision: self.revision.unwrap_or_else(|| default_revision.to_owned()),
            bearer: self.bearer,
            accept: self.accept,
            client_info: json!({"name": self.client_name, "version": self.client_version}),
            capabilities: self.capabilities,
            session_id: None,
            next_id: AtomicI64::new(1),
        }
    }
}

/// A client of one MCP endpoint in one era. Requests are numbered from 1 (a legacy session's
/// `initialize` is 1); [`message`](Self::message) and [`send`](Self::send) take any id.
#[derive(Debug)]
pub struct McpSession {
    http: reqwest::Client,
    url: String,
    era: SessionEra,
    revision: String,
    bearer: Option<String>,
    accept: String,
    client_info: Value,
    capabilities: Value,
    session_id: Option<String>,
    next_id: AtomicI64,
}

impl McpSession {
    /// A modern session at `url` with the default options.
    pub fn modern(url: impl Into<String>) -> McpSession {
        SessionOptions::new(url).modern()
    }

    /// A legacy session at `url` with the default options.
    pub async fn legacy(url: impl Into<String>) -> Result<McpSession, TestkitError> {
        SessionOptions::new(url).legacy().await
    }

    /// Options for a session at `url`, to open with `.modern()` or `.legacy().await`.
    pub fn options(url: impl Into<String>) -> SessionOptions {
        SessionOptions::new(url)
    }

    pub fn era(&self) -> SessionEra {
        self.era
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The legacy session's `Mcp-Session-Id` (`None` in the modern era).
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The revision it speaks.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The HTTP client, for requests of a test's own making.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The next request id.
    pub fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The JSON-RPC request `{id, method, params}` as this session sends it: in the modern era
    /// with the protocol version, capabilities and client info added to `params._meta`.
    pub fn message(&self, id: impl Into<Value>, method: &str, params: Value) -> Value {
        let mut params = match params {
            Value::Null => json!({}),
            params => params,
        };
        if self.era == SessionEra::Modern {
            self.add_meta(&mut params);
        }
        json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
    }

    async fn send_initialize(&self) -> Result<Reply, TestkitError> {
        let initialize = json!({"jsonrpc": "2.0", "id": self.next_id(), "method": "initialize",
            "params": {"protocolVersion": self.revision, "capabilities": self.capabilities,
                "clientInfo": self.client_info}});
        self.send(&initialize).await
    }

    fn add_meta(&self, params: &mut Value) {
        let Some(params) = params.as_object_mut() else {
            return;
        };
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                "io.modelcontextprotocol/protocolVersion".to_owned(),
                json!(self.revision),
            );
            meta.insert(
                "io.modelcontextprotocol/clientCapabilities".to_owned(),
                self.capabilities.clone(),
            );
            meta.insert(
                "io.modelcontextprotocol/clientInfo".to_owned(),
                self.client_info.clone(),
            );
        }
    }

    /// A POST of `body` with this session's headers, not yet sent: `Content-Type`, `Accept`,
    /// the bearer token; in a legacy session `Mcp-Session-Id` (once minted) and
    /// `MCP-Protocol-Version`; in the modern era `MCP-Protocol-Version`, `Mcp-Method` and, when
    /// the params name a tool, prompt or resource, `Mcp-Name`.
    pub fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", &self.accept);
        if let Some(token) = &self.bearer {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        match self.era {
            SessionEra::Legacy => {
                if let Some(id) = &self.session_id {
                    request = request
                        .header("mcp-session-id", id)
                        .header("mcp-protocol-version", &self.revision);
                }
            }
            SessionEra::Modern => {
                request = request.header("mcp-protocol-version", &self.revision);
                if let Some(method) = body["method"].as_str() {
                    request = request.header("mcp-method", method);
                }
                let params = &body["params"];
                let name = params["name"].as_str().or_else(|| params["uri"].as_str());
                if let Some(name) = name.filter(|n| !n.is_empty()) {
                    request = request.header("mcp-name", name);
                }
            }
        }
        request.body(body.to_string())
    }

    /// Sends `body` and reads the whole reply, whatever its status.
    pub async fn send(&self, body: &Value) -> Result<Reply, TestkitError> {
        let method = body["method"].as_str().unwrap_or("a response").to_owned();
        let failed = |source| TestkitError::Http {
            method: method.clone(),
            url: self.url.clone(),
            source,
        };
        let response = self.post(body).send().await.map_err(failed)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.map_err(failed)?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// A request with the next id; its JSON-RPC answer (a `result` or an `error`). An HTTP status
    /// other than 2xx, or a reply without the answer, is an error quoting the body.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, TestkitError> {
        let id = self.next_id();
        let reply = self.send(&self.message(id, method, params)).await?;
        match reply.answer(id) {
            Some(answer) if (200..300).contains(&reply.status) => Ok(answer),
            _ => Err(TestkitError::NoAnswer {
                method: method.to_owned(),
                status: reply.status,
                body: reply.body,
            }),
        }
    }

    /// A notification (no id); the reply, whose status says whether it was accepted.
    pub async fn notify(&self, method: &str, params: Value) -> Result<Reply, TestkitError> {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            message["params"] = params;
        }
        self.send(&message).await
    }

    /// `tools/call` of `name` with `arguments`: the JSON-RPC answer.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, TestkitError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// `tools/list`: the JSON-RPC answer.
    pub async fn list_tools(&self) -> Result<Value, TestkitError> {
        self.request("tools/list", json!({})).await
    }

    /// Ends a legacy session with `DELETE`; the HTTP status.
    pub async fn delete(&self) -> Result<u16, TestkitError> {
        let mut request = self.http.delete(&self.url);
        if let Some(id) = &self.session_id {
            request = request
                .header("mcp-session-id", id)
                .header("mcp-protocol-version", &self.revision);
        }
        if let Some(token) = &self.bearer {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = request.send().await.map_err(|source| TestkitError::Http {
            method: "DELETE".to_owned(),
            url: self.url.clone(),
            source,
        })?;
        Ok(response.status().as_u16())
    }
}

/// One HTTP reply, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// A header's value, when present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The JSON-RPC messages it carries: the JSON body (each element of a batch), or the data of
    /// each SSE event that holds JSON.
    pub fn messages(&self) -> Vec<Value> {
        json_rpc_messages(&self.body)
    }

    /// The answer to request `id`: the message with that id and a `result` or an `error`.
    pub fn answer(&self, id: impl Into<Value>) -> Option<Value> {
        let id = id.into();
        self.messages()
            .into_iter()
            .find(|m| m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()))
    }

    /// The body as JSON (`Value::Null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// The JSON-RPC messages of a reply body: a JSON body (each element of a batch), else the `data`
/// of each SSE event that parses as JSON.
pub fn json_rpc_messages(body: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return match value {
            Value::Array(batch) => batch,
            one => vec![one],
        };
    }
    let normalized = body.replace("\r\n", "\n");
    normalized
        .split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            serde_json::from_str(&data.join("\n")).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn messages_are_read_from_json_batches_and_sse_events() {
        assert_eq!(json_rpc_messages(r#"{"id":1}"#), vec![json!({"id": 1})]);
        assert_eq!(
            json_rpc_messages(r#"[{"id":1},{"id":2}]"#),
            vec![json!({"id": 1}), json!({"id": 2})]
        );
        let sse = "id: a.0\r\nretry: 1000\r\ndata: \r\n\r\nevent: message\nid: a.1\ndata: {\"method\":\"notifications/progress\"}\n\ndata: {\"id\":3,\ndata: \"result\":{}}\n\n";
        assert_eq!(
            json_rpc_messages(sse),
            vec![
                json!({"method": "notifications/progress"}),
                json!({"id": 3, "result": {}})
            ]
        );
    }

    #[test]
    fn a_modern_message_carries_its_meta_and_keeps_the_callers() {
        let session = SessionOptions::new("http://127.0.0.1:1/mcp")
            .client_info("t", "2")
            .modern();
        let message = session.message(
            7,
            "tools/call",
            json!({"name": "x", "_meta": {"progressToken": "p"}}),
        );
        let meta = &message["params"]["_meta"];
        assert_eq!(meta["progressToken"], "p");
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            MODERN_REVISION
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"],
            json!({"name": "t", "version": "2"})
        );
        assert_eq!(message["id"], 7);
        let reply = Reply {
            status: 200,
            headers: HeaderMap::new(),
            body: r#"{"jsonrpc":"2.0","id":7,"result":{}}"#.to_owned(),
        };
        assert_eq!(
            reply.answer(7),
            Some(json!({"jsonrpc": "2.0", "id": 7, "result": {}}))
        );
        assert_eq!(reply.answer(8), None);
    }
}
