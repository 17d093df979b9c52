//! The audit trail end to end: `manifold serve` in front of the test peer, driven over
//! Streamable HTTP, then the store read back: one row per call and per refusal with what the
//! issue asks for, and each mode's promise under `kill -9` during load.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use manifold_store::{AuditFilter, AuditRow, Store, StoreLocation};
use manifold_testkit::{GatewayProcess, McpSession, ServeCommand};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// A configured secret: recorded arguments must never hold it.
const SECRET: &str = "audit-secret-value-9137";
/// Hang guard for the gateway's exit after SIGTERM (not a timing assertion).
const EXIT_GUARD: Duration = Duration::from_secs(60);
/// Answered calls before the gateway is killed in the kill -9 tests.
const CALLS_BEFORE_KILL: usize = 150;
/// Concurrent callers in the kill -9 tests.
const CALLERS: usize = 8;

struct Serving {
    gateway: GatewayProcess,
    data: PathBuf,
}

/// `manifold keys create NAME --groups GROUPS --config CONFIG`: the key, printed once.
fn create_key(config: &Path, name: &str, groups: &str) -> String {
    ServeCommand::new(MANIFOLD, config.parent().unwrap())
        .config(config)
        .env("AUDIT_TEST_SECRET", SECRET)
        .create_key(name, &["--groups", groups])
        .unwrap()
}

fn write_config(name: &str, extra: &str) -> PathBuf {
    let dir = manifold_testkit::fresh_dir(&format!("audit-trail-{name}")).unwrap();
    let data = dir.join("data");
    let peer = manifold_testkit::test_peer().unwrap();
    let config = dir.join("manifold.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n[servers.peer]\ncommand = \"{}\"\nargs = [\"stdio\"]\nenv = {{ PEER_TOKEN = \"${{AUDIT_TEST_SECRET}}\" }}\n\n{extra}",
            data.display(),
            peer.display()
        ),
    )
    .unwrap();
    config
}

fn serve(name: &str, extra: &str) -> Serving {
    serve_config(&write_config(name, extra))
}

fn serve_config(config: &Path) -> Serving {
    let dir = config.parent().unwrap().to_path_buf();
    let gateway = ServeCommand::new(MANIFOLD, &dir)
        .config(config)
        .env("AUDIT_TEST_SECRET", SECRET)
        .log("stderr.log")
        .start()
        .unwrap();
    Serving {
        gateway,
        data: dir.join("data"),
    }
}

impl Serving {
    fn url(&self) -> &str {
        self.gateway.url()
    }

    async fn stop(mut self) -> PathBuf {
        self.gateway.signal(Signal::SIGTERM).unwrap();
        let deadline = tokio::time::Instant::now() + EXIT_GUARD;
        while self.gateway.try_wait().unwrap().is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no exit after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.data.clone()
    }

    fn kill_hard(self) -> PathBuf {
        self.gateway.kill().unwrap();
        self.data.clone()
    }
}

fn http() -> reqwest::Client {
    manifold_testkit::http_client()
}

/// A stateless (2026-07-28) client named `audit-test` 7.1, with `Authorization: Bearer KEY` when
/// a key is given.
fn session(http: &reqwest::Client, url: &str, key: Option<&str>) -> McpSession {
    let options = McpSession::options(url)
        .http(http.clone())
        .client_info("audit-test", "7.1");
    match key {
        Some(key) => options.bearer(key).modern(),
        None => options.modern(),
    }
}

/// One request with id `id`; the JSON-RPC response, or `None` when the gateway went away before
/// answering.
async fn request(mcp: &McpSession, id: u64, method: &str, params: Value) -> Option<Value> {
    let reply = mcp.send(&mcp.message(id, method, params)).await.ok()?;
    serde_json::from_str(&reply.body).ok()
}

async fn rows(data: &Path) -> Vec<AuditRow> {
    let store = Store::open_for_command(&StoreLocation::sqlite(data))
        .await
        .unwrap();
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let page = store.audit().page(after, 1000).await.unwrap();
        let Some(last) = page.last() else { break };
        after = last.seq;
        all.extend(page);
    }
    let report = store.audit().verify().await.unwrap();
    assert!(report.is_intact(), "the chain holds: {report:?}");
    store.close().await;
    all
}

fn record(row: &AuditRow) -> Value {
    serde_json::from_str(&row.entry.record_json).unwrap()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn call_id(response: &Value) -> String {
    response["result"]["_meta"]["io.manifold/callId"]
        .as_str()
        .unwrap_or_else(|| panic!("no call id in {response}"))
        .to_owned()
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_and_refusal_is_on_the_record_with_caller_target_digests_and_outcome() {
    let gw = serve(
        "record",
        r#"[audit]
record_arguments = true

[[rules]]
name = "no-add"
effect = "deny"
anonymous = true
tools = ["peer__add"]

[[rules]]
name = "no-failures"
effect = "deny"
explain = true
anonymous = true
tools = ["peer__fail"]

[[rules]]
name = "private-items"
effect = "deny"
anonymous = true
resources = ["peer+test://item/*"]

[[rate_limits.tools]]
match = ["peer__echo"]
rate = "2/day"
"#,
    );
    let mcp = session(&http(), gw.url(), None);
    let echo = |id, message: &str| {
        request(
            &mcp,
            id,
            "tools/call",
            json!({"name": "peer__echo", "arguments": {"message": message}}),
        )
    };
    let first = echo(1, "hello").await.unwrap();
    let second = echo(2, &format!("the secret is {SECRET}")).await.unwrap();
    let limited = echo(3, "again").await.unwrap();
    assert_eq!(limited["error"]["code"], -32006, "{limited}");
    let hidden = request(
        &mcp,
        4,
        "tools/call",
        json!({"name": "peer__add", "arguments": {"a": 1, "b": 2}}),
    )
    .await
    .unwrap();
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
    let explained = request(
        &mcp,
        5,
        "tools/call",
        json!({"name": "peer__fail", "arguments": {}}),
    )
    .await
    .unwrap();
    assert_eq!(explained["error"]["code"], -32007, "{explained}");
    let read = request(
        &mcp,
        6,
        "resources/read",
        json!({"uri": "peer+test://static"}),
    )
    .await
    .unwrap();
    assert!(read["result"]["contents"].is_array(), "{read}");
    let private = request(
        &mcp,
        7,
        "resources/read",
        json!({"uri": "peer+test://item/1"}),
    )
    .await
    .unwrap();
    assert!(private["error"].is_object(), "{private}");
    let prompt = request(
        &mcp,
        8,
        "prompts/get",
        json!({"name": "peer__greet", "arguments": {"name": "Ada"}}),
    )
    .await
    .unwrap();
    assert!(prompt["result"]["messages"].is_array(), "{prompt}");
    let listed = request(&mcp, 9, "tools/list", json!({})).await.unwrap();
    assert!(listed["result"]["tools"].is_array());

    let data = gw.stop().await;
    let rows = rows(&data).await;
    let records: Vec<Value> = rows.iter().map(record).collect();
    let outcomes: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap(),
                r["target"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("tools/call", "echo", "ok"),
            ("tools/call", "echo", "ok"),
            ("tools/call", "echo", "rate_limited"),
            ("tools/call", "add", "refused_by_policy"),
            ("tools/call", "fail", "refused_by_policy"),
            ("resources/read", "test://static", "ok"),
            ("resources/read", "peer+test://item/1", "refused_by_policy"),
            ("prompts/get", "greet", "ok"),
        ],
        "one row per call and refusal, in order; tools/list has none"
    );
    let ok = &records[0];
    assert_eq!(
        ok["call_id"],
        call_id(&first),
        "the row has the result's call id"
    );
    assert_eq!(records[1]["call_id"], call_id(&second));
    assert_eq!(ok["principal"], "anonymous");
    assert_eq!(ok["server"], "peer");
    assert_eq!(ok["client_name"], "audit-test");
    assert_eq!(ok["client_version"], "7.1");
    assert_eq!(ok["args_sha256"], sha256_hex(r#"{"message":"hello"}"#));
    assert_eq!(ok["result_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(ok["arguments"], r#"{"message":"hello"}"#);
    assert!(ok["bytes_in"].as_u64().unwrap() > 0 && ok["bytes_out"].as_u64().unwrap() > 0);
    assert!(ok["duration_us"].is_u64());
    let secret_row = &records[1]["arguments"];
    assert_eq!(secret_row, r#"{"message":"the secret is <redacted>"}"#);
    assert!(!rows.iter().any(|r| r.entry.record_json.contains(SECRET)));
    assert_eq!(records[4]["error_code"], -32007);
    assert!(
        records[4]["error"]
            .as_str()
            .unwrap()
            .contains("no-failures")
    );
    assert_eq!(rows[0].entry.principal, "anonymous");
    assert_eq!(rows[2].entry.outcome, "rate_limited");
}

/// Calls `peer__echo` from [`CALLERS`] tasks until the gateway stops answering; returns the
/// call ids of every answered call. The gateway is killed with SIGKILL once [`CALLS_BEFORE_KILL`]
/// calls were answered and the load has lasted at least `min_load`, while others are in flight.
async fn answered_calls_until_killed(gw: Serving, min_load: Duration) -> (Vec<String>, PathBuf) {
    let started = std::time::Instant::now();
    let http = http();
    let answered = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for caller in 0..CALLERS {
        let mcp = session(&http, gw.url(), None);
        let answered = Arc::clone(&answered);
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in 0u64.. {
                let id = (caller as u64) * 1_000_000 + n;
                let params =
                    json!({"name": "peer__echo", "arguments": {"message": format!("m{id}")}});
                match request(&mcp, id, "tools/call", params).await {
                    Some(response) if response["result"].is_object() => {
                        ids.push(call_id(&response));
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(response) => panic!("a call failed before the kill: {response}"),
                    None => break,
                }
            }
            ids
        }));
    }
    while answered.load(Ordering::Relaxed) < CALLS_BEFORE_KILL || started.elapsed() < min_load {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let data = gw.kill_hard();
    let mut ids = Vec::new();
    for task in tasks {
        ids.extend(task.await.unwrap());
    }
    (ids, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_required_mode_no_answered_call_is_missing_after_kill_9() {
    let gw = serve("required-kill", "[audit]\nmode = \"required\"\n");
    let (answered, data) = answered_calls_until_killed(gw, Duration::ZERO).await;
    assert!(answered.len() >= CALLS_BEFORE_KILL);
    let rows = rows(&data).await;
    let recorded: std::collections::HashSet<&str> =
        rows.iter().map(|r| r.entry.call_id.as_str()).collect();
    let missing: Vec<&String> = answered
        .iter()
        .filter(|id| !recorded.contains(id.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} answered calls have no row: {missing:?}",
        missing.len(),
        answered.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_best_effort_mode_kill_9_loses_at_most_the_queue_and_the_chain_holds() {
    let gw = serve("best-effort-kill", "");
    // Long enough for the writer to have written batches (each waits up to its linger to fill)
    // before the kill, so the trail holds rows to search.
    let (answered, data) =
        answered_calls_until_killed(gw, manifold_audit::BEST_EFFORT_BATCH_LINGER * 5).await;
    let rows = rows(&data).await;
    let answered: std::collections::HashSet<&str> = answered.iter().map(String::as_str).collect();
    // Every row written is a real call (answered or cut off by the kill); rows may be missing.
    let unknown = rows
        .iter()
        .filter(|r| !answered.contains(r.entry.call_id.as_str()) && r.entry.outcome == "ok")
        .count();
    assert!(
        unknown <= CALLERS,
        "rows for calls never answered: {unknown}"
    );
    eprintln!(
        "best effort: {} answered, {} rows after kill -9",
        answered.len(),
        rows.len()
    );
    assert!(
        answered.len() - rows.len().min(answered.len()) <= manifold_audit::AUDIT_QUEUE_CAPACITY
    );
    let search = Store::open_for_command(&StoreLocation::sqlite(&data))
        .await
        .unwrap();
    let found = search
        .audit()
        .search(
            &AuditFilter {
                outcome: Some("ok".to_owned()),
                ..AuditFilter::default()
            },
            10,
        )
        .await
        .unwrap();
    assert!(!found.is_empty());
    search.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_credential_and_a_keyed_caller_are_both_on_the_record() {
    let config = write_config("keys", "[auth]\napi_keys = true\n");
    let key = create_key(&config, "alice", "ops,dev");
    let gw = serve_config(&config);
    let http = http();
    let answered = request(
        &session(&http, gw.url(), Some(&key)),
        1,
        "tools/call",
        json!({"name": "peer__echo", "arguments": {"message": "keyed"}}),
    )
    .await
    .unwrap();
    assert!(answered["result"].is_object(), "{answered}");
    let refused = http
        .post(gw.url())
        .header("content-type", "application/json")
        .header("authorization", "Bearer mfk_not-a-real-key")
        .body(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let data = gw.stop().await;
    let records: Vec<Value> = rows(&data).await.iter().map(record).collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["principal"], "alice");
    assert_eq!(records[0]["groups"], json!(["ops", "dev"]));
    assert_eq!(records[0]["outcome"], "ok");
    assert_eq!(records[1]["outcome"], "unauthenticated");
    assert_eq!(records[1]["principal"], "-");
    assert_eq!(records[1]["target"], "POST /mcp");
    assert!(!records[1].to_string().contains("not-a-real-key"));
}

/// `manifold stdio` keeps the same trail as `serve`: a client on stdin makes a call, closes its
/// end, and the row is in the store when the process has exited (the writer drains its queue on
/// the way out).
#[tokio::test]
async fn manifold_stdio_puts_its_calls_on_the_record_and_flushes_them_at_exit() {
    use std::io::Write;
    let config = write_config("stdio", "");
    let dir = config.parent().unwrap().to_path_buf();
    let mut child = Command::new(MANIFOLD)
        .args(["stdio", "--config"])
        .arg(&config)
        .current_dir(&dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .env("AUDIT_TEST_SECRET", SECRET)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answer = |id: i64| -> Value {
        loop {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "stdout ended");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "stdio-audit-client", "version": "3.1"}}});
    writeln!(stdin, "{initialize}").unwrap();
    assert!(answer(1)["result"]["protocolVersion"].is_string());
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "peer__echo", "arguments": {"message": "over stdio"}}});
    writeln!(stdin, "{call}").unwrap();
    let answered = answer(2);
    assert!(answered["result"]["content"].is_array(), "{answered}");
    drop(stdin);
    let deadline = tokio::time::Instant::now() + EXIT_GUARD;
    while child.try_wait().unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no exit after stdin closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rows = rows(&dir.join("data")).await;
    let calls: Vec<Value> = rows
        .iter()
        .map(record)
        .filter(|r| r["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 1, "{rows:?}");
    let call = &calls[0];
    assert_eq!(call["target"], "echo", "the upstream's own name: {call}");
    assert_eq!(call["server"], "peer", "{call}");
    assert_eq!(call["outcome"], "ok", "{call}");
    assert_eq!(call["client_name"], "stdio-audit-client", "{call}");
    assert_eq!(call["client_version"], "3.1", "{call}");
}
