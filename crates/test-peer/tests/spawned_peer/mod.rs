//! Launching the peer binary from a test and reading exactly what it writes.
//!
//! Every test of the peer goes through the real binary (`CARGO_BIN_EXE_manifold-test-peer`), so
//! the bytes checked are the bytes other test suites will see. Timeouts here are hang guards only.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

pub mod raw_http;

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

pub const PEER: &str = env!("CARGO_BIN_EXE_manifold-test-peer");

/// Longest any single step may take before the test is declared hung.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

pub const MODERN: &str = "2026-07-28";

/// `params._meta` of a modern request, with the given client capabilities.
pub fn modern_meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "peer-test", "version": "0"}
    })
}

pub async fn guarded<F: std::future::Future>(what: &str, future: F) -> F::Output {
    match tokio::time::timeout(HANG_GUARD, future).await {
        Ok(output) => output,
        Err(_) => panic!("hang guard: {what} took longer than {HANG_GUARD:?}"),
    }
}

/// The peer over stdio.
pub struct StdioPeer {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pub stderr: Option<BufReader<ChildStderr>>,
}

impl StdioPeer {
    /// `manifold-test-peer stdio ARGS...`, stderr discarded.
    pub fn spawn(args: &[&str]) -> Self {
        Self::spawn_with(args, false, false)
    }

    /// Same, with stderr piped for the test to read (it must then drain it).
    pub fn spawn_reading_stderr(args: &[&str]) -> Self {
        Self::spawn_with(args, true, false)
    }

    /// `own_group`: the peer leads a new process group, so the test can kill the whole group.
    pub fn spawn_with(args: &[&str], read_stderr: bool, own_group: bool) -> Self {
        let mut command = Command::new(PEER);
        command
            .arg("stdio")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if read_stderr {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .kill_on_drop(true);
        if own_group {
            command.process_group(0);
        }
        let mut child = command.spawn().expect("spawn manifold-test-peer");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stderr = child.stderr.take().map(BufReader::new);
        Self {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    pub async fn send_text(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(text.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, message: Value) {
        self.send_text(&message.to_string()).await;
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// One raw line, terminator included; empty at EOF.
    pub async fn read_line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        guarded(
            "reading a stdout line",
            self.stdout.read_until(b'\n', &mut line),
        )
        .await
        .unwrap();
        line
    }

    /// One line parsed as JSON (the terminator must be a lone LF).
    pub async fn read_json(&mut self) -> Value {
        let line = self.read_line().await;
        assert!(
            line.ends_with(b"\n"),
            "expected a full line, got {:?}",
            String::from_utf8_lossy(&line)
        );
        serde_json::from_slice(&line).unwrap_or_else(|error| {
            panic!("not JSON ({error}): {:?}", String::from_utf8_lossy(&line))
        })
    }

    /// Whatever one read of stdout returns (what is buffered, or a single read of the pipe).
    pub async fn read_available(&mut self) -> Vec<u8> {
        let available = guarded("reading stdout", self.stdout.fill_buf())
            .await
            .unwrap()
            .to_vec();
        self.stdout.consume(available.len());
        available
    }

    /// Everything until stdout closes.
    pub async fn read_to_end(&mut self) -> Vec<u8> {
        let mut rest = Vec::new();
        guarded("reading stdout to EOF", self.stdout.read_to_end(&mut rest))
            .await
            .unwrap();
        rest
    }

    /// One stderr line (stderr must have been piped).
    pub async fn read_stderr_line(&mut self) -> String {
        let stderr = self.stderr.as_mut().expect("spawned with stderr piped");
        let mut line = String::new();
        guarded("reading a stderr line", stderr.read_line(&mut line))
            .await
            .unwrap();
        line
    }

    pub async fn wait(&mut self) -> ExitStatus {
        guarded("waiting for the peer to exit", self.child.wait())
            .await
            .unwrap()
    }

    /// Sends a legacy `initialize` (revision 2025-11-25 unless given) and `initialized`;
    /// returns the whole initialize response.
    pub async fn initialize_with(&mut self, version: &str, capabilities: Value) -> Value {
        self.send(json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": capabilities,
                       "clientInfo": {"name": "peer-test", "version": "0"}}
        }))
        .await;
        let response = self.read_json().await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        response
    }

    pub async fn initialize(&mut self) -> Value {
        self.initialize_with("2025-11-25", json!({})).await
    }

    /// Sends a legacy `tools/call` with the given id.
    pub async fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}
        }))
        .await;
    }
}

/// The peer over HTTP (`http` or `sse` mode), with the address it announced.
pub struct HttpPeer {
    pub child: Child,
    pub address: String,
    pub stderr: Option<BufReader<ChildStderr>>,
}

impl HttpPeer {
    /// `manifold-test-peer MODE --port 0 ARGS...`; waits for `listening on 127.0.0.1:PORT`.
    pub async fn spawn(mode: &str, args: &[&str]) -> Self {
        Self::spawn_with(mode, args, false).await
    }

    pub async fn spawn_with(mode: &str, args: &[&str], read_stderr: bool) -> Self {
        let mut child = Command::new(PEER)
            .arg(mode)
            .args(["--port", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if read_stderr {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .kill_on_drop(true)
            .spawn()
            .expect("spawn manifold-test-peer");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        guarded("the listening line", stdout.read_line(&mut first))
            .await
            .unwrap();
        let address = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first stdout line was {first:?}"))
            .trim_end()
            .to_owned();
        assert!(address.starts_with("127.0.0.1:"), "bound {address}");
        let stderr = child.stderr.take().map(BufReader::new);
        Self {
            child,
            address,
            stderr,
        }
    }

    pub async fn read_stderr_line(&mut self) -> String {
        let stderr = self.stderr.as_mut().expect("spawned with stderr piped");
        let mut line = String::new();
        guarded("reading a stderr line", stderr.read_line(&mut line))
            .await
            .unwrap();
        line
    }
}
