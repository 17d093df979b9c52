//! Why: the end-to-end tests of every crate start `manifold serve`, talk MCP to it in both eras and
//! send it raw bytes through the test kit's three fixtures; these tests pin what the fixtures
//! promise (the command line and environment, the URL read back, nothing left running, the exact
//! headers of each era, answers read from JSON and SSE) against stand-ins, so they need no product
//! binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use manifold_testkit::{
    McpSession, RawHttp, ScratchDir, ServeCommand, SessionEra, TestkitError, process_group_members,
    process_is_running,
};
use serde_json::{Value, json};

/// A stand-in for `manifold`: records its arguments, environment and working directory, starts a
/// grandchild in its process group, writes to stderr, then prints `url` and waits.
fn fake_manifold(dir: &Path, url: &str) -> PathBuf {
    let script = dir.join("fake-manifold");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             printf '%s\\n' \"$@\" > \"$PWD/args.txt\"\n\
             printf 'XDG=%s NO_COLOR=%s RUST_LOG=%s EXTRA=%s\\n' \"$XDG_DATA_HOME\" \"$NO_COLOR\" \"${{RUST_LOG-unset}}\" \"$EXTRA\" > \"$PWD/env.txt\"\n\
             if [ \"$3\" = refused ]; then echo 'no key for you' >&2; exit 2; fi\n\
             if [ \"$1\" = keys ]; then echo \"mfk_made-for-$3\"; exit 0; fi\n\
             if [ \"$1\" = fail ]; then echo 'no such command' >&2; exit 2; fi\n\
             sleep 300 &\n\
             echo 'starting up' >&2\n\
             echo '{url}'\n\
             exec sleep 300\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[test]
fn serve_writes_the_config_passes_its_arguments_and_reads_the_url_back() {
    let dir = ScratchDir::new("testkit-serve").unwrap();
    let fake = fake_manifold(dir.path(), "http://127.0.0.1:4242/mcp");
    let gateway = ServeCommand::new(&fake, dir.path())
        .global_args(["-v"])
        .config_text("[gateway]\n")
        .args(["--listen", "127.0.0.1:0"])
        .env("EXTRA", "yes")
        .env("RUST_LOG", "debug")
        .log("gateway.log")
        .start()
        .unwrap();
    assert_eq!(gateway.url(), "http://127.0.0.1:4242/mcp");
    assert_eq!(gateway.base(), "http://127.0.0.1:4242");
    assert_eq!(gateway.authority(), "127.0.0.1:4242");
    assert_eq!(
        gateway.endpoint("/metrics"),
        "http://127.0.0.1:4242/metrics"
    );
    let config = dir.path().join("manifold.toml");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "[gateway]\n");
    let args = std::fs::read_to_string(dir.path().join("args.txt")).unwrap();
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        [
            "-v",
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0"
        ]
    );
    let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    let xdg = dir.path().join("xdg");
    assert_eq!(
        env.trim(),
        format!("XDG={} NO_COLOR=1 RUST_LOG=debug EXTRA=yes", xdg.display())
    );
    gateway
        .wait_for_log("starting up", 1, Duration::from_secs(30))
        .unwrap();
    assert!(gateway.log_path().ends_with("gateway.log"));
}

#[test]
fn commands_beside_the_gateway_share_its_directory_environment_and_configuration() {
    let dir = ScratchDir::new("testkit-serve-run").unwrap();
    let fake = fake_manifold(dir.path(), "http://127.0.0.1:4242/mcp");
    let serve = ServeCommand::new(&fake, dir.path())
        .config_text("[auth]\n")
        .env("EXTRA", "key");
    let key = serve.create_key("alice", &["--groups", "ops"]).unwrap();
    assert_eq!(key, "mfk_made-for-alice");
    let config = dir.path().join("manifold.toml");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "[auth]\n");
    let args = std::fs::read_to_string(dir.path().join("args.txt")).unwrap();
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        [
            "keys",
            "create",
            "alice",
            "--groups",
            "ops",
            "--config",
            config.to_str().unwrap()
        ]
    );
    let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    assert!(
        env.contains("EXTRA=key") && env.contains("RUST_LOG=unset"),
        "{env}"
    );
    let failed = serve.run(["fail"]).unwrap();
    assert_eq!(failed.status.code(), Some(2));
    let err = serve.create_key("refused", &[]).unwrap_err();
    assert!(
        matches!(&err, TestkitError::CommandFailed { stderr, .. } if stderr.contains("no key for you")),
        "{err}"
    );
}

#[test]
fn a_dropped_gateway_leaves_no_process_of_its_group() {
    let dir = ScratchDir::new("testkit-serve-drop").unwrap();
    let fake = fake_manifold(dir.path(), "http://127.0.0.1:4242/mcp");
    let gateway = ServeCommand::new(&fake, dir.path()).start().unwrap();
    let pid = gateway.pid();
    assert!(
        process_group_members(pid).len() >= 2,
        "the fake and its sleep"
    );
    let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    assert!(env.contains("RUST_LOG=unset"), "{env}");
    drop(gateway);
    assert!(!process_is_running(pid));
    assert!(process_group_members(pid).is_empty());
}

#[test]
fn a_gateway_that_prints_no_url_is_an_error_with_its_log() {
    let dir = ScratchDir::new("testkit-serve-bad").unwrap();
    let fake = fake_manifold(dir.path(), "error: no such file");
    let err = ServeCommand::new(&fake, dir.path()).start().unwrap_err();
    let TestkitError::GatewayStart { printed, log } = &err else {
        panic!("{err}");
    };
    assert_eq!(printed, "error: no such file");
    assert!(log.contains("starting up"), "{log}");

    let silent = dir.path().join("silent");
    std::fs::write(&silent, "#!/bin/sh\necho 'waiting' >&2\nexec sleep 300\n").unwrap();
    std::fs::set_permissions(&silent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = ServeCommand::new(&silent, dir.path())
        .start_hang_guard(Duration::from_millis(500))
        .start()
        .unwrap_err();
    assert!(
        matches!(&err, TestkitError::GatewayStart { printed, .. } if printed.starts_with("nothing within")),
        "{err}"
    );
}

/// One request as a stand-in server saw it: its head (lower-cased header names) and body.
#[derive(Debug, Clone)]
struct Seen {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A stand-in MCP endpoint on 127.0.0.1:0: answers `initialize` with a session id, notifications
/// with 202, `tools/call` with an SSE stream (a progress notification, then the answer) and
/// anything else with JSON; records every request.
fn stand_in_endpoint() -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let request = read_request(&stream);
            let reply = answer(&request);
            record.lock().unwrap().push(request);
            let _ = (&stream).write_all(reply.as_bytes());
        }
    });
    (url, seen)
}

fn read_request(stream: &TcpStream) -> Seen {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Seen {
        request_line: request_line.trim_end().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    }
}

fn answer(request: &Seen) -> String {
    let reply = |status: &str, extra: &str, content_type: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\nconnection: close\r\ncontent-type: {content_type}\r\n{extra}content-length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let message = &request.body;
    if request.request_line.starts_with("DELETE") {
        return reply("204 No Content", "", "text/plain", "");
    }
    let Some(id) = message.get("id") else {
        return reply("202 Accepted", "", "text/plain", "");
    };
    match message["method"].as_str().unwrap_or_default() {
        "initialize" => {
            let body =
                json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-11-25"}});
            reply(
                "200 OK",
                "mcp-session-id: s-1\r\n",
                "application/json",
                &body.to_string(),
            )
        }
        "tools/call" => {
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p", "progress": 1}});
            let result = json!({"jsonrpc": "2.0", "id": id,
                "result": {"content": [{"type": "text", "text": message["params"]["arguments"]["message"]}]}});
            let body = format!(
                "id: a.0\nretry: 1000\ndata: \n\nevent: message\ndata: {progress}\n\nevent: message\ndata: {result}\n\n"
            );
            reply("200 OK", "", "text/event-stream", &body)
        }
        _ => {
            let body = json!({"jsonrpc": "2.0", "id": id, "result": {"tools": []}});
            reply("200 OK", "", "application/json", &body.to_string())
        }
    }
}

#[tokio::test]
async fn a_legacy_session_opens_with_the_handshake_and_sends_its_session_id_after() {
    let (url, seen) = stand_in_endpoint();
    let session = McpSession::options(&url)
        .client_info("fixture-test", "3")
        .bearer("k-1")
        .legacy()
        .await
        .unwrap();
    assert_eq!(session.era(), SessionEra::Legacy);
    assert_eq!(session.session_id(), Some("s-1"));
    let answer = session
        .call_tool("echo", json!({"message": "over sse"}))
        .await
        .unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "over sse");
    assert_eq!(session.delete().await.unwrap(), 204);

    let seen = seen.lock().unwrap().clone();
    let [initialize, initialized, call, delete] = seen.as_slice() else {
        panic!("{seen:?}");
    };
    assert_eq!(initialize.body["method"], "initialize");
    assert_eq!(initialize.body["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        initialize.body["params"]["clientInfo"],
        json!({"name": "fixture-test", "version": "3"})
    );
    assert_eq!(initialize.header("mcp-session-id"), None);
    assert_eq!(initialize.header("authorization"), Some("Bearer k-1"));
    assert_eq!(
        initialize.header("accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(initialized.body["method"], "notifications/initialized");
    for later in [initialized, call, delete] {
        assert_eq!(later.header("mcp-session-id"), Some("s-1"));
        assert_eq!(later.header("mcp-protocol-version"), Some("2025-11-25"));
    }
    assert!(
        call.body["params"].get("_meta").is_none(),
        "{:?}",
        call.body
    );
    assert_eq!(call.header("mcp-method"), None);
    assert!(delete.request_line.starts_with("DELETE /mcp "));
}

#[tokio::test]
async fn a_modern_request_carries_its_meta_and_mirrored_headers() {
    let (url, seen) = stand_in_endpoint();
    let session = McpSession::options(&url)
        .client_info("fixture-test", "3")
        .accept("application/json")
        .modern();
    let listed = session.list_tools().await.unwrap();
    assert_eq!(listed["result"]["tools"], json!([]));
    let read = session
        .request("resources/read", json!({"uri": "test://x"}))
        .await
        .unwrap();
    assert_eq!(read["id"], 2);
    let reply = session
        .send(&session.message(
            9,
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "m"}}),
        ))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.messages().len(), 2, "{}", reply.body);
    assert_eq!(
        reply.answer(9).unwrap()["result"]["content"][0]["text"],
        "m"
    );

    let seen = seen.lock().unwrap().clone();
    let [list, read, call] = seen.as_slice() else {
        panic!("{seen:?}");
    };
    for request in [list, read, call] {
        assert_eq!(request.header("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(request.header("accept"), Some("application/json"));
        assert_eq!(request.header("mcp-session-id"), None);
        let meta = &request.body["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({})
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"],
            json!({"name": "fixture-test", "version": "3"})
        );
    }
    assert_eq!(list.header("mcp-method"), Some("tools/list"));
    assert_eq!(list.header("mcp-name"), None);
    assert_eq!(read.header("mcp-name"), Some("test://x"));
    assert_eq!(call.header("mcp-method"), Some("tools/call"));
    assert_eq!(call.header("mcp-name"), Some("echo"));
    assert_eq!(call.body["id"], 9);
}

#[test]
fn the_raw_driver_sends_exact_bytes_and_reads_status_headers_and_body() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    let received = std::thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..2 {
            let (stream, _) = listener.accept().unwrap();
            let request = read_request(&stream);
            (&stream)
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 7\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nnot\r\n6\r\n ready\r\n0\r\n\r\n")
                .unwrap();
            got.push(request);
        }
        got
    });
    let raw = RawHttp::new(&format!("http://{authority}/mcp"));
    let response = raw
        .request(
            "POST",
            "/mcp",
            &[("Mcp-Method", "tools/call")],
            r#"{"x":1}"#,
        )
        .unwrap();
    assert_eq!(response.status, 503);
    assert_eq!(response.status_line, "HTTP/1.1 503 Service Unavailable");
    assert_eq!(response.header("retry-after"), Some("7"));
    assert_eq!(response.decoded_body(), "not ready");
    let response = raw.get("/readyz").unwrap();
    assert_eq!(response.status, 503);
    let got = received.join().unwrap();
    assert_eq!(got[0].request_line, "POST /mcp HTTP/1.1");
    assert_eq!(got[0].header("host"), Some(authority.as_str()));
    assert_eq!(got[0].header("connection"), Some("close"));
    assert_eq!(got[0].header("mcp-method"), Some("tools/call"));
    assert_eq!(got[0].header("content-length"), Some("7"));
    assert_eq!(got[0].body, json!({"x": 1}));
    assert_eq!(got[1].request_line, "GET /readyz HTTP/1.1");
    assert_eq!(got[1].header("content-length"), None);
}
