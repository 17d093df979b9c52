//! Why: the interop tests in other crates trust this peer to be a plain rmcp server; these tests pin,
//! without any Manifold code in the loop, that it speaks both eras over stdio and listens on loopback
//! only over HTTP, so an interop failure points at Manifold and not at the peer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::time::Duration;

use manifold_testkit::{ChildGuard, listening_addrs, wait_for_port};
use serde_json::{Value, json};

const PEER: &str = env!("CARGO_BIN_EXE_manifold-rmcp-peer");
const HANG_GUARD: Duration = Duration::from_secs(30);

/// Sends each request line to a fresh stdio peer and returns the parsed response lines.
fn stdio_exchange(lines: &[Value], responses: usize) -> Vec<Value> {
    let mut command = Command::new(PEER);
    command
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut guard = ChildGuard::spawn(command).unwrap();
    let mut stdin = guard.child_mut().stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = BufReader::new(guard.child_mut().stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // A hang guard: a peer that never answers fails the test instead of blocking it.
    let got: Vec<Value> = (0..responses)
        .map(|_| {
            let line = rx
                .recv_timeout(HANG_GUARD)
                .expect("the peer did not answer");
            serde_json::from_str(&line).unwrap()
        })
        .collect();
    drop(stdin);
    got
}

#[test]
fn stdio_legacy_era_initializes_and_calls_echo() {
    let got = stdio_exchange(
        &[
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
                "name":"echo","arguments":{"message":"hi"}}}),
        ],
        2,
    );
    assert_eq!(got[0]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(got[0]["result"]["serverInfo"]["name"], "manifold-rmcp-peer");
    assert_eq!(got[1]["id"], 2);
    assert_eq!(
        got[1]["result"]["content"],
        json!([{"type":"text","text":"hi"}])
    );
}

#[test]
fn stdio_modern_era_discovers_and_adds() {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}
    });
    let got = stdio_exchange(
        &[
            json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta": meta}}),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
                "name":"add","arguments":{"a":2,"b":3},"_meta": meta}}),
        ],
        2,
    );
    assert!(
        got[0]["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{}",
        got[0]
    );
    assert_eq!(got[1]["result"]["resultType"], "complete");
    assert_eq!(
        got[1]["result"]["content"],
        json!([{"type":"text","text":"5"}])
    );
}

#[tokio::test]
async fn http_listens_on_loopback_only_at_the_port_it_prints() {
    let mut command = Command::new(PEER);
    command
        .args(["http", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut guard = ChildGuard::spawn(command).unwrap();
    let mut stderr = BufReader::new(guard.child_mut().stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let url = first
        .trim()
        .strip_prefix("manifold-rmcp-peer listening on ")
        .unwrap_or_else(|| panic!("unexpected first stderr line {first:?}"));
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap()
        .parse()
        .unwrap();
    wait_for_port(port, HANG_GUARD).await.unwrap();
    assert_eq!(
        listening_addrs(port).unwrap(),
        vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]
    );
    drop(guard);
}
