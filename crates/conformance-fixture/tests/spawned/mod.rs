//! Starting the fixture binary for a test and talking to it: JSON lines over stdio, or raw
//! HTTP/1.1 over TCP (so no HTTP client library sits between the test and the bytes).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A hang guard, never a measurement.
pub const PATIENCE: Duration = Duration::from_secs(20);

pub const BIN: &str = env!("CARGO_BIN_EXE_manifold-conformance-fixture");

/// The fixture in stdio mode.
pub struct StdioFixture {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl StdioFixture {
    pub fn start() -> StdioFixture {
        let mut child = Command::new(BIN)
            .arg("stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the fixture binary starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        StdioFixture {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        }
    }

    pub async fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        let mut line = message.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next message on stdout.
    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("the fixture answered in time")
            .unwrap()
            .expect("stdout is still open");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"))
    }

    /// Sends a request and returns the next message (its response when nothing else is pending).
    pub async fn call(&mut self, message: &Value) -> Value {
        self.send(message).await;
        self.recv().await
    }

    /// Closes stdin and waits for the process to exit; returns whatever stdout still had.
    pub async fn finish(mut self) -> (std::process::ExitStatus, Vec<Value>) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        while let Ok(Some(line)) = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("stdout closed in time")
        {
            rest.push(serde_json::from_str(&line).unwrap());
        }
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the fixture exited in time")
            .unwrap();
        (status, rest)
    }
}

/// The `_meta` of a modern request with these client capabilities.
pub fn modern_meta(capabilities: Value) -> Value {
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": { "name": "fixture-test", "version": "1.0.0" },
    })
}

/// The fixture in HTTP mode.
pub struct HttpFixture {
    child: Child,
    pub port: u16,
}

impl HttpFixture {
    pub async fn start() -> HttpFixture {
        let mut child = Command::new(BIN)
            .args(["http", "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the fixture binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .expect("the fixture printed its port in time")
            .unwrap()
            .expect("a first line");
        let port = first
            .strip_prefix("listening on 127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {first}"));
        HttpFixture { child, port }
    }

    /// Sends one HTTP/1.1 request (the connection closes after it) and reads the whole response.
    pub async fn request(&self, method: &str, headers: &[(&str, &str)], body: &str) -> HttpReply {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: 127.0.0.1:{}\r\n", self.port));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(PATIENCE, stream.read_to_end(&mut raw))
            .await
            .expect("the response ended in time")
            .unwrap();
        HttpReply::parse(&raw)
    }

    /// A JSON-RPC POST with the usual Streamable HTTP headers plus `extra`.
    pub async fn post(&self, extra: &[(&str, &str)], body: &Value) -> HttpReply {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        self.request("POST", &headers, &body.to_string()).await
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A parsed HTTP response.
#[derive(Debug)]
pub struct HttpReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpReply {
    fn parse(raw: &[u8]) -> HttpReply {
        let text = String::from_utf8_lossy(raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        };
        HttpReply {
            status,
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }

    /// The `data` of every SSE event, in order (empty data included).
    pub fn sse_data(&self) -> Vec<String> {
        self.body
            .split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|event| {
                event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let Some((size, rest)) = body.split_once("\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
}
