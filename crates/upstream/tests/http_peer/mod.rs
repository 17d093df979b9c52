//! The harness the HTTP transport tests share: a manifold-test-peer child (port read from its
//! first line, stderr kept for assertions) and the calls every test makes the same way.

// Each test file uses a different part of the harness.
#![allow(dead_code)]

use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_upstream::{
    CallEvent, CallOptions, ConnectOptions, Connection, HttpSpec, HttpTransportChoice, PeerInfo,
    ServerRequest, ServerRequestHandler, Target, UpstreamError, connect,
};
use manifold_wire::{ErrorObject, Kind, Message};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// Generous bound on anything that should finish promptly: a hang guard, never a measurement.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

/// A running manifold-test-peer and the lines it writes to stderr.
pub struct Peer {
    _child: Child,
    pub port: u16,
    stderr: mpsc::UnboundedReceiver<String>,
}

impl Peer {
    pub async fn start(mode: &str, args: &[&str]) -> Peer {
        let binary = manifold_testkit::test_peer().unwrap();
        let mut child = Command::new(binary)
            .arg(mode)
            .args(["--port", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(HANG_GUARD, stdout.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let port = first
            .strip_prefix("listening on 127.0.0.1:")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .parse()
            .unwrap();
        let (tx, stderr) = mpsc::unbounded_channel();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("peer: {line}");
                let _ = tx.send(line);
            }
        });
        Peer {
            _child: child,
            port,
            stderr,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Waits for a stderr line starting with `prefix` and returns it.
    pub async fn stderr_line(&mut self, prefix: &str) -> String {
        tokio::time::timeout(HANG_GUARD, async {
            loop {
                let line = self.stderr.recv().await.expect("peer stderr closed");
                if line.starts_with(prefix) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no stderr line starting with {prefix:?}"))
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
