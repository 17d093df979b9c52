//! Why: every HTTP test needs the same scene (a gateway over the workspace's test peer, a server
//! on 127.0.0.1:0, a raw HTTP client and an SSE reader); building it one way keeps the tests
//! about the rules they check.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use manifold_gateway::{Gateway, GatewaySettings, UpstreamDefinition};
use manifold_server::{BoundServer, Server, ServerSettings, SessionKey};
use manifold_testkit::McpSession;
use manifold_upstream::Target;
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_wire::sse::{SseEvent, SseParser};
use serde_json::Value;

/// How long any single wait may take before the test is declared hung.
pub const HANG_GUARD: Duration = Duration::from_secs(20);
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

pub fn peer_def(name: &str, extra: &[&str]) -> UpstreamDefinition {
    let mut args = vec!["stdio".to_owned()];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let mut def = UpstreamDefinition::new(
        name,
        Target::Stdio(StdioSpec {
            command: manifold_testkit::test_peer().unwrap().display().to_string(),
            args,
            ..StdioSpec::default()
        }),
    );
    def.client_capabilities = r#"{"elicitation":{}}"#.to_owned();
    def
}

pub fn key(byte: u8) -> SessionKey {
    SessionKey::from_bytes(&[byte; 32]).unwrap()
}

pub async fn gateway(defs: Vec<UpstreamDefinition>) -> Gateway {
    let g = Gateway::start(GatewaySettings::default(), defs);
    g.wait_started(HANG_GUARD).await;
    g
}

pub struct Live {
    pub gateway: Gateway,
    pub server: BoundServer,
    pub url: String,
    pub base: String,
    pub http: reqwest::Client,
}

pub fn http_client() -> reqwest::Client {
    manifold_testkit::http_client()
}

/// A server over `gateway`, with settings adjusted by `adjust`.
pub async fn serve(gateway: Gateway, adjust: impl FnOnce(&mut ServerSettings)) -> Live {
    let mut settings = ServerSettings::new(key(7));
    adjust(&mut settings);
    let server = Server::bind(settings, gateway.clone()).await.unwrap();
    let base = format!("http://{}", server.local_addr());
    Live {
        gateway,
        url: format!("{base}/mcp"),
        base,
        server,
        http: http_client(),
    }
}

/// The usual scene: one upstream named SERVER.
pub async fn start() -> Live {
    start_with(vec![peer_def("SERVER", &[])]).await
}

/// A server with default settings over a gateway of `defs`.
pub async fn start_with(defs: Vec<UpstreamDefinition>) -> Live {
    serve(gateway(defs).await, |_| {}).await
}

impl Live {
    pub async fn stop(self) {
        self.server.shutdown().await;
        self.gateway.shutdown().await;
    }

    /// `GET` of `path` on the server's listener, not yet sent.
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}{path}", self.base))
    }

    pub fn post(&self, body: &str) -> reqwest::RequestBuilder {
        self.post_accepting(ACCEPT_BOTH, body)
    }

    pub fn post_accepting(&self, accept: &str, body: &str) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.to_owned())
    }

    /// POST within a legacy session.
    pub fn session_post(&self, session: &str, body: &str) -> reqwest::RequestBuilder {
        self.session_post_accepting(session, ACCEPT_BOTH, body)
    }

    /// POSTs `body` within session `session` (accepting both reply forms) and returns the response.
    pub async fn session_send(&self, session: &str, body: &str) -> reqwest::Response {
        self.session_post(session, body).send().await.unwrap()
    }

    pub fn session_post_accepting(
        &self,
        session: &str,
        accept: &str,
        body: &str,
    ) -> reqwest::RequestBuilder {
        self.post_accepting(accept, body)
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25")
    }

    /// Initializes a legacy session (client `raw-test`, declaring `capabilities`) and sends
    /// `notifications/initialized`; returns its id.
    pub async fn initialize(&self, capabilities: &str) -> String {
        let session = McpSession::options(&self.url)
            .http(self.http.clone())
            .client_info("raw-test", "1")
            .capabilities(serde_json::from_str(capabilities).unwrap())
            .legacy()
            .await
            .unwrap();
        session.session_id().unwrap().to_owned()
    }

    /// `GET /mcp` for session `sid`'s stream, resumed after `last_event_id` when given.
    pub async fn get_stream(&self, sid: &str, last_event_id: Option<&str>) -> reqwest::Response {
        let mut get = self
            .http
            .get(&self.url)
            .header("mcp-session-id", sid)
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            get = get.header("last-event-id", id);
        }
        get.send().await.unwrap()
    }
}

pub fn init_body(version: &str, capabilities: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{capabilities},"clientInfo":{{"name":"raw-test","version":"1"}}}}}}"#
    )
}

pub const MODERN_META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw-test","version":"1"}}"#;

/// A modern request body whose params are `params` (an object body without braces) plus `_meta`.
pub fn modern_body(id: i64, method: &str, params: &str) -> String {
    let sep = if params.is_empty() { "" } else { "," };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params}{sep}{MODERN_META}}}}}"#
    )
}

pub async fn json_of(r: reqwest::Response) -> Value {
    let text = r.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
}

pub fn content_type(r: &reqwest::Response) -> String {
    r.headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Reads the SSE events of a response, one at a time.
pub struct Events {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    parser: SseParser,
}

impl Events {
    pub fn of(r: reqwest::Response) -> Events {
        assert!(
            content_type(&r).starts_with("text/event-stream"),
            "{}",
            content_type(&r)
        );
        Events {
            body: Box::pin(r.bytes_stream()),
            parser: SseParser::default(),
        }
    }

    /// The next event, or `None` when the stream ends.
    pub async fn next(&mut self) -> Option<SseEvent> {
        tokio::time::timeout(HANG_GUARD, async {
            loop {
                if let Some(e) = self.parser.next_event() {
                    return Some(e.unwrap());
                }
                match self.body.next().await {
                    Some(Ok(chunk)) => self.parser.push(&chunk),
                    _ => return None,
                }
            }
        })
        .await
        .expect("an SSE event did not come in time")
    }

    /// The next event that carries a message, parsed.
    pub async fn next_message(&mut self) -> Option<(Option<String>, Value)> {
        loop {
            let e = self.next().await?;
            if let Some(data) = e.data.as_deref().filter(|d| !d.is_empty()) {
                return Some((e.id.clone(), serde_json::from_str(data).unwrap()));
            }
        }
    }
}
