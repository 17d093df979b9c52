//! Why: proves Manifold's downstream side works with MCP clients we did not write: the Python
//! SDK client (mcp 2.3.0) in auto, legacy and 2026-07-28 modes over Streamable HTTP and over
//! stdio, and the TypeScript SDK v1 client over Streamable HTTP and HTTP+SSE. Each lists the
//! tools and calls `SERVER__echo`, and the test checks the text that came back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use std::path::PathBuf;
use std::process::Stdio;

use live_server::*;
use serde_json::Value;

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("clients")
}

/// Runs a client program to completion and parses the JSON line it prints last.
async fn run_client(program: PathBuf, args: Vec<String>, env: &[(&str, &str)]) -> Value {
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("the client hung")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{program:?} {args:?} failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("bad client output ({e}): {stdout}\nstderr: {stderr}"))
}

fn assert_echoed(report: &Value, message: &str) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"SERVER__echo") && tools.contains(&"manifold_health"),
        "{tools:?}"
    );
    assert_eq!(report["text"], message, "{report}");
    assert_eq!(report["isError"], false);
}

#[tokio::test]
async fn the_python_sdk_client_works_in_every_mode_over_http() {
    let live = start().await;
    let python = manifold_testkit::python().unwrap();
    let script = clients_dir().join("py_client.py").display().to_string();
    for (mode, expected) in [
        ("auto", "2026-07-28"),
        ("legacy", "2025-11-25"),
        ("2026-07-28", "2026-07-28"),
    ] {
        let message = format!("python {mode}");
        let report = run_client(
            python.clone(),
            vec![
                script.clone(),
                "http".into(),
                live.url.clone(),
                mode.into(),
                message.clone(),
            ],
            &[],
        )
        .await;
        assert_eq!(report["protocol"], expected, "{mode}: {report}");
        assert_echoed(&report, &message);
    }
    live.stop().await;
}

#[tokio::test]
async fn the_typescript_sdk_v1_client_works_over_streamable_http_and_http_sse() {
    let live = start().await;
    let node = manifold_testkit::node().unwrap();
    let modules = manifold_testkit::peers_dir()
        .unwrap()
        .join("node_modules")
        .display()
        .to_string();
    let script = clients_dir().join("ts_client.mjs").display().to_string();
    let report = run_client(
        node.clone(),
        vec![
            script.clone(),
            modules.clone(),
            "streamable".into(),
            live.url.clone(),
            "ts streamable".into(),
        ],
        &[],
    )
    .await;
    assert!(
        report["sessionId"].as_str().unwrap().starts_with("k1."),
        "{report}"
    );
    assert_echoed(&report, "ts streamable");
    let report = run_client(
        node,
        vec![
            script,
            modules,
            "sse".into(),
            format!("{}/sse", live.base),
            "ts sse".into(),
        ],
        &[],
    )
    .await;
    assert_echoed(&report, "ts sse");
    live.stop().await;
}

#[tokio::test]
async fn the_python_sdk_client_works_over_stdio_and_stdout_carries_only_protocol() {
    let python = manifold_testkit::python().unwrap();
    let harness = env!("CARGO_BIN_EXE_manifold-server-harness").to_owned();
    let peer = manifold_testkit::test_peer().unwrap().display().to_string();
    let script = clients_dir().join("py_client.py").display().to_string();
    for (mode, expected) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let message = format!("stdio {mode}");
        // Verbose logging on purpose: every log line must go to stderr, never to the protocol.
        let report = run_client(
            python.clone(),
            vec![
                script.clone(),
                "stdio".into(),
                mode.into(),
                message.clone(),
                harness.clone(),
                "SERVER".into(),
                peer.clone(),
                "stdio".into(),
            ],
            &[("RUST_LOG", "debug")],
        )
        .await;
        assert_eq!(report["protocol"], expected, "{mode}: {report}");
        assert_echoed(&report, &message);
    }
}

#[tokio::test]
async fn the_stdio_harness_writes_nothing_but_messages_even_with_debug_logs() {
    let harness = env!("CARGO_BIN_EXE_manifold-server-harness");
    let peer = manifold_testkit::test_peer().unwrap();
    let mut child = tokio::process::Command::new(harness)
        .args(["SERVER".as_ref(), peer.as_os_str(), "stdio".as_ref()])
        .env("RUST_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncWriteExt as _;
    let mut stdin = child.stdin.take().unwrap();
    let input = format!(
        "{}\n{}\n{}\n",
        init_body("2025-11-25", "{}"),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"SERVER__echo","arguments":{"message":"clean"}}}"#
    );
    stdin.write_all(input.as_bytes()).await.unwrap();
    let stdout = child.stdout.take().unwrap();
    use tokio::io::AsyncBufReadExt as _;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let line = tokio::time::timeout(HANG_GUARD, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout held a non-message ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0");
        seen.push(v);
    }
    assert_eq!(seen[1]["result"]["content"][0]["text"], "clean");
    drop(stdin);
    let out = tokio::time::timeout(HANG_GUARD, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "nothing after the answers: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!out.stderr.is_empty(), "the debug logs went to stderr");
}
