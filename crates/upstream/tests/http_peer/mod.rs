//! The harness the HTTP transport tests share: a manifold-test-peer child (port read from its
//! first line, stderr kept for assertions) and the calls every test makes the same way.

// Each test file uses a different part of the harness.
#![allow(dead_code)]

use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_testkit::ListeningPeer;
use manifold_upstream::{
    Call, CallEvent, CallOptions, ConnectOptions, Connection, HttpSpec, HttpTransportChoice,
    PeerInfo, ServerRequest, ServerRequestHandler, Target, UpstreamError, connect,
};
use manifold_wire::{ErrorObject, Kind, Message};
use serde_json::Value;

/// Generous bound on anything that should finish promptly: a hang guard, never a measurement.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

/// A running manifold-test-peer and the lines it writes to stderr.
pub struct Peer {
    process: ListeningPeer,
    pub port: u16,
}

impl Peer {
    pub async fn start(mode: &str, args: &[&str]) -> Peer {
        let mut command = std::process::Command::new(manifold_testkit::test_peer().unwrap());
        command.arg(mode).args(["--port", "0"]).args(args);
        let process = ListeningPeer::start(command, HANG_GUARD).await.unwrap();
        Peer {
            port: process.port(),
            process,
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.process.url(path)
    }

    /// Waits for a stderr line starting with `prefix` and returns it.
    pub async fn stderr_line(&mut self, prefix: &str) -> String {
        self.process.stderr_line(prefix, HANG_GUARD).await.unwrap()
    }

    /// A connection to `path` on this peer over `transport`, and what the peer said of itself.
    pub async fn open(
        &self,
        path: &str,
        transport: HttpTransportChoice,
        options: &ConnectOptions,
    ) -> (Connection, PeerInfo) {
        open(self.url(path), transport, options).await
    }

    /// [`Peer::open`] with the default options for server "peer".
    pub async fn connect(
        &self,
        path: &str,
        transport: HttpTransportChoice,
    ) -> (Connection, PeerInfo) {
        self.open(path, transport, &ConnectOptions::new("peer"))
            .await
    }

    /// [`Peer::connect`] to `/mcp` over Streamable HTTP.
    pub async fn open_streamable(&self) -> (Connection, PeerInfo) {
        self.connect("/mcp", HttpTransportChoice::StreamableHttp)
            .await
    }
}

pub fn target(url: String, transport: HttpTransportChoice) -> Target {
    Target::Http(HttpSpec {
        url,
        transport,
        ..HttpSpec::default()
    })
}

pub async fn open(
    url: String,
    transport: HttpTransportChoice,
    options: &ConnectOptions,
) -> (Connection, PeerInfo) {
    tokio::time::timeout(HANG_GUARD, connect(&target(url, transport), options))
        .await
        .expect("connect hung")
        .unwrap()
}

pub async fn open_err(
    url: String,
    transport: HttpTransportChoice,
    options: &ConnectOptions,
) -> UpstreamError {
    match tokio::time::timeout(HANG_GUARD, connect(&target(url, transport), options))
        .await
        .expect("connect hung")
    {
        Ok((_, info)) => panic!("connected unexpectedly: {info:?}"),
        Err(e) => e,
    }
}

pub async fn call(conn: &Connection, method: &str, params: &str) -> Result<Message, UpstreamError> {
    tokio::time::timeout(
        HANG_GUARD,
        conn.call(method, Some(params), CallOptions::default()),
    )
    .await
    .expect("call hung")
}

/// Calls the peer's `echo` with `message`: the text it answered, or why the call failed.
pub async fn echo(conn: &Connection, message: &str) -> Result<String, UpstreamError> {
    let arguments = serde_json::json!({"name": "echo", "arguments": {"message": message}});
    call(conn, "tools/call", &arguments.to_string())
        .await
        .map(|reply| text_of(&reply))
}

/// Starts `slow` (60 s in 600 steps, progress token 1) and returns it once its first progress
/// arrived, which proves the tool is running.
pub async fn slow_call_under_way(conn: &Connection) -> Call {
    let mut running = conn
        .request(
            "tools/call",
            Some(r#"{"name":"slow","arguments":{"seconds":60,"steps":600},"_meta":{"progressToken":1}}"#),
            CallOptions::default(),
        )
        .await
        .unwrap();
    match tokio::time::timeout(HANG_GUARD, running.next())
        .await
        .unwrap()
    {
        Some(Ok(CallEvent::Notification(n))) => {
            assert_eq!(n.method(), Some("notifications/progress"))
        }
        other => panic!("expected progress, got {other:?}"),
    }
    running
}

pub fn result_json(message: &Message) -> Value {
    assert_eq!(message.kind(), Kind::Result, "{}", message.as_str());
    serde_json::from_str(message.result_raw().unwrap()).unwrap()
}

pub fn text_of(message: &Message) -> String {
    result_json(message)["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub async fn seen_headers(conn: &Connection, arguments: &str) -> serde_json::Map<String, Value> {
    let reply = call(
        conn,
        "tools/call",
        &format!(r#"{{"name":"seen_headers","arguments":{arguments}}}"#),
    )
    .await
    .unwrap();
    result_json(&reply)["structuredContent"]["headers"]
        .as_object()
        .unwrap()
        .clone()
}

/// Calls `slow` with a progress token and returns the progress tokens seen and the final text.
pub async fn slow_with_progress(conn: &Connection) -> (Vec<String>, String) {
    let mut running = conn
        .request(
            "tools/call",
            Some(r#"{"name":"slow","arguments":{"seconds":0.3,"steps":3},"_meta":{"progressToken":"mine"}}"#),
            CallOptions::default(),
        )
        .await
        .unwrap();
    let mut tokens = Vec::new();
    loop {
        match tokio::time::timeout(HANG_GUARD, running.next())
            .await
            .unwrap()
        {
            Some(Ok(CallEvent::Notification(n))) => {
                assert_eq!(n.method(), Some("notifications/progress"));
                tokens.push(n.params_raw(&["progressToken"]).unwrap().to_owned());
            }
            Some(Ok(CallEvent::Response(r))) => return (tokens, text_of(&r)),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Answers elicitation with a fixed answer and remembers what it was asked.
#[derive(Default)]
pub struct Answering {
    pub asked: Mutex<Vec<(String, Option<String>)>>,
}

impl ServerRequestHandler for Answering {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        self.asked
            .lock()
            .unwrap()
            .push((request.method.clone(), request.params.clone()));
        Box::pin(async { Ok(r#"{"action":"accept","content":{"answer":"blue"}}"#.to_owned()) })
    }
}
