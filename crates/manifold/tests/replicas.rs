//! Several replicas as one gateway, on real parts: two `manifold serve` processes sharing one
//! PostgreSQL (their store) and one session key, behind HAProxy from Debian in round robin with
//! every request on a connection of its own, so consecutive requests of one client land on
//! different replicas. A real Python SDK client's legacy session continues across them; a call
//! held on one replica is approved from the CLI against the shared store and runs; a key revoked
//! once is refused by every replica. Under load: a replica killed with SIGKILL fails only the calls
//! it held, and the session goes on; a rolling restart (SIGTERM, drain, start again, one replica
//! at a time) fails no call; PostgreSQL stopped and started again fails only calls that needed it,
//! saying so, and both replicas recover without a restart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use manifold_testkit::{
    ChildGuard, GatewayProcess, Postgres, ScratchDir, ServeCommand, free_port, peers_dir, python,
    wait_for_port, workspace_root,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Bounds each wait (a client run, a held call, a revocation reaching a replica); never a
/// performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);
/// The replicas' shared session key (64 hex digits), as an operator deploys one.
const SESSION_KEY: &str = "4d616e69666f6c64207265706c69636173207368617265206f6e65206b657921";

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A replica's configuration, with `extra` TOML at its end.
fn config(data: &Path, store: &str, listen: &str, extra: &str) -> String {
    let server = toml_string(
        &peers_dir()
            .unwrap()
            .join("python_server.py")
            .to_string_lossy(),
    );
    let python = toml_string(&python().unwrap().to_string_lossy());
    format!(
        r#"[gateway]
listen = "{listen}"
data_dir = {data}
session_key = "{SESSION_KEY}"

[store]
url = {store}

[auth]
api_keys = true

[approvals]
window = "60s"

[servers.py]
command = {python}
args = [{server}, "stdio"]

[[rules]]
name = "add-asks-ops"
effect = "ask"
tools = ["py__add"]
approvers = ["identity:ops"]
{extra}"#,
        data = toml_string(&data.to_string_lossy()),
        store = toml_string(store),
    )
}

struct Replica {
    process: GatewayProcess,
    addr: String,
}

fn replica(dir: &Path, name: &str, store: &str) -> Replica {
    replica_at(dir, name, store, "127.0.0.1:0")
}

/// A replica listening on `listen` (a fixed port, so a restarted replica is found again).
fn replica_at(dir: &Path, name: &str, store: &str, listen: &str) -> Replica {
    replica_with(dir, name, store, listen, "")
}

/// A replica with `extra` configuration.
fn replica_with(dir: &Path, name: &str, store: &str, listen: &str, extra: &str) -> Replica {
    let here = dir.join(name);
    std::fs::create_dir_all(&here).unwrap();
    let process = ServeCommand::new(MANIFOLD, &here)
        .config_text(config(&here.join("data"), store, listen, extra))
        .append_log()
        .start()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    Replica {
        addr: process.authority().to_owned(),
        process,
    }
}

/// HAProxy in round robin over `backends`, closing every connection after its request, checking
/// each backend every 200 ms, and sending a request a backend refused (connection refused, or a
/// draining replica's 503, which it answers before doing anything) to another one.
async fn haproxy(dir: &Path, backends: &[&str]) -> (ChildGuard, u16) {
    let port = free_port().unwrap();
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, b)| format!("    server r{i} {b} check inter 200ms fall 1 rise 1\n"))
        .collect();
    let cfg = format!(
        "global\n    maxconn 256\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 120s\n    timeout server 120s\n    option httpclose\n    option redispatch\n    retries 3\n    retry-on conn-failure 503\nfrontend mcp\n    bind 127.0.0.1:{port}\n    default_backend replicas\nbackend replicas\n    balance roundrobin\n{servers}"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, cfg).unwrap();
    let program = std::env::var("MANIFOLD_HAPROXY").unwrap_or_else(|_| "haproxy".to_owned());
    let mut command = Command::new(&program);
    command
        .args(["-db", "-f"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("haproxy.log")).unwrap());
    let guard = ChildGuard::spawn(command).unwrap_or_else(|e| {
        panic!("could not start {program} ({e}); run scripts/install-peers, which installs Debian's haproxy")
    });
    wait_for_port(port, HANG_GUARD).await.unwrap();
    (guard, port)
}

fn cli(config: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(MANIFOLD)
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// How many `tools/call` requests a replica has answered, from its own `/metrics`.
async fn requests_answered(http: &reqwest::Client, addr: &str) -> u64 {
    let text = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("manifold_requests_total{") && l.contains("method=\"tools/call\"")
        })
        .filter_map(|l| l.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()))
        .sum::<f64>() as u64
}

/// The Python SDK client with `key`, in the legacy era (a session), calling `calls` in order.
fn python_client(url: &str, key: &str, calls: Value) -> std::process::Child {
    python_client_over(url, key, calls, "streamable-http")
}

/// The same over `transport` ("sse": the deprecated HTTP+SSE transport, `url` its `/sse`).
fn python_client_over(url: &str, key: &str, calls: Value, transport: &str) -> std::process::Child {
    let script = workspace_root().join("crates/manifold/tests/clients/replica_py_client.py");
    Command::new(python().unwrap())
        .arg(script)
        .arg(json!({"url": url, "key": key, "calls": calls, "transport": transport}).to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn report_of(child: std::process::Child) -> Value {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let out = finished
        .recv_timeout(HANG_GUARD)
        .expect("the client hung")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test]
async fn two_replicas_behind_haproxy_are_one_gateway() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas").unwrap();
    let a = replica(dir.path(), "a", &store);
    let b = replica(dir.path(), "b", &store);
    let (_lb, port) = haproxy(dir.path(), &[&a.addr, &b.addr]).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let config = dir.path().join("a/manifold.toml");
    let made = Command::new(MANIFOLD)
        .args(["keys", "create", "alice", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    // stdout has the key alone.
    let key = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let before = (
        requests_answered(&http, &a.addr).await,
        requests_answered(&http, &b.addr).await,
    );

    // One legacy session, every request on its own connection: it continues on both replicas.
    let echoes: Vec<Value> = (0..6)
        .map(|i| json!({"name": "py__echo", "arguments": {"message": format!("m{i}")}}))
        .collect();
    let report = report_of(python_client(&url, &key, json!(echoes)));
    let texts: Vec<String> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["texts"][0].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        texts,
        (0..6).map(|i| format!("m{i}")).collect::<Vec<_>>(),
        "{report}"
    );
    let after = (
        requests_answered(&http, &a.addr).await,
        requests_answered(&http, &b.addr).await,
    );
    assert!(
        after.0 > before.0 && after.1 > before.1,
        "both replicas served the session: {before:?} -> {after:?}"
    );

    // A call held on whichever replica took it is approved from the CLI on the shared store.
    let held = python_client(
        &url,
        &key,
        json!([{"name": "py__add", "arguments": {"a": 2, "b": 3}}]),
    );
    let started = Instant::now();
    let id = loop {
        let (ok, out) = cli(&config, &["approvals", "list", "--json"]);
        assert!(ok, "{out}");
        let rows: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        if let Some(id) = rows.get(0).and_then(|r| r["id"].as_str()) {
            break id.to_owned();
        }
        assert!(started.elapsed() < HANG_GUARD, "no question was held");
        std::thread::sleep(Duration::from_millis(100));
    };
    let (ok, out) = cli(
        &dir.path().join("b/manifold.toml"),
        &["approvals", "approve", &id, "--as", "ops"],
    );
    assert!(ok, "{out}");
    let report = report_of(held);
    assert_eq!(report["calls"][0]["texts"], json!(["5"]), "{report}");

    // A key revoked once is refused by every replica.
    let (ok, out) = cli(&config, &["keys", "revoke", "alice"]);
    assert!(ok, "{out}");
    for replica in [&a, &b] {
        let started = Instant::now();
        loop {
            let status = http
                .post(format!("http://{}/mcp", replica.addr))
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string())
                .send()
                .await
                .unwrap()
                .status();
            if status == 401 {
                break;
            }
            assert!(
                started.elapsed() < HANG_GUARD,
                "{} still accepts a revoked key ({status})",
                replica.addr
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A raw legacy session through the balancer (a lean client: the faults below are about what
/// each call's answer is, which this sees exactly).
#[derive(Clone)]
struct Session {
    http: reqwest::Client,
    url: String,
    key: String,
    id: String,
}

/// What one request got: its JSON-RPC message, or why there was none.
async fn answer_of(response: reqwest::Response, id: &Value) -> Result<Value, String> {
    let status = response.status();
    let sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let text = response
        .text()
        .await
        .map_err(|e| format!("the body broke off: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "HTTP {status}: {}",
            text.chars().take(200).collect::<String>()
        ));
    }
    let messages: Vec<Value> = if sse {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    } else {
        serde_json::from_str(&text)
            .map(|v| vec![v])
            .map_err(|e| format!("{e}: {text}"))?
    };
    messages
        .into_iter()
        .find(|m| m.get("id") == Some(id))
        .ok_or_else(|| format!("no answer to {id} in {text}"))
}

impl Session {
    async fn open(url: &str, key: &str) -> Session {
        Session::open_declaring(url, key, json!({})).await
    }

    /// A session whose client declares `capabilities` (elicitation, sampling, roots).
    async fn open_declaring(url: &str, key: &str, capabilities: Value) -> Session {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "replicas-test", "version": "1"}}});
        let response = http
            .post(url)
            .header("authorization", format!("Bearer {key}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init.to_string())
            .send()
            .await
            .unwrap();
        let Some(id) = response.headers().get("mcp-session-id").cloned() else {
            let status = response.status();
            panic!(
                "{url} opened no session: {status} {}",
                response.text().await.unwrap_or_default()
            );
        };
        let id = id.to_str().unwrap().to_owned();
        answer_of(response, &json!(0)).await.unwrap();
        let session = Session {
            http,
            url: url.to_owned(),
            key: key.to_owned(),
            id,
        };
        session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .unwrap();
        session
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.key))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_string())
    }

    /// The same session, its requests sent to `url` (another replica).
    fn at(&self, url: &str) -> Session {
        Session {
            url: url.to_owned(),
            ..self.clone()
        }
    }

    /// One `tools/call` of `name`: the JSON-RPC answer.
    async fn call(&self, n: u64, name: &str, arguments: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}});
        let response = self.post(&body).send().await.unwrap();
        answer_of(response, &json!(n)).await.unwrap()
    }

    /// One `py__slow` call: the call id Manifold gave it (`io.manifold/callId`), or why it
    /// failed.
    async fn slow_call(&self, n: u64) -> Result<String, String> {
        let id = json!(n);
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "py__slow", "arguments": {"seconds": 0.3, "steps": 1}}});
        let response = self
            .post(&body)
            .send()
            .await
            .map_err(|e| format!("the request failed: {e}"))?;
        let answer = answer_of(response, &id).await?;
        match answer["result"]["_meta"]["io.manifold/callId"].as_str() {
            Some(id) if answer["result"]["isError"] != true => Ok(id.to_owned()),
            _ => Err(format!("{answer}")),
        }
    }
}

/// One call made under load: when it started (since the load began), and what it got.
struct Made {
    started: Duration,
    outcome: Result<String, String>,
}

/// `workers` loops of sequential calls on one session until `length` has passed.
async fn load(session: &Session, workers: u64, length: Duration) -> Vec<Made> {
    let began = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            let mut made = Vec::new();
            let mut n = 1000 * (w + 1);
            while began.elapsed() < length {
                n += 1;
                let started = began.elapsed();
                let outcome = tokio::time::timeout(HANG_GUARD, session.slow_call(n))
                    .await
                    .unwrap_or_else(|_| Err("the call hung".to_owned()));
                made.push(Made { started, outcome });
            }
            made
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// Four workers calling on `session` for 5 s while `victim` is SIGKILLed at `kill_at`.
async fn load_killing(session: &Session, victim: Replica, kill_at: Duration) -> Vec<Made> {
    let loaded = tokio::spawn({
        let session = session.clone();
        async move { load(&session, 4, Duration::from_secs(5)).await }
    });
    tokio::time::sleep(kill_at).await;
    victim.process.kill().unwrap();
    loaded.await.unwrap()
}

fn new_key(config: &Path, name: &str) -> String {
    ServeCommand::new(MANIFOLD, config.parent().unwrap())
        .config(config)
        .create_key(name, &[])
        .unwrap()
}

fn failures(made: &[Made]) -> Vec<String> {
    made.iter()
        .filter_map(|m| {
            m.outcome
                .as_ref()
                .err()
                .map(|e| format!("at {:?}: {e}", m.started))
        })
        .collect()
}

#[tokio::test]
async fn a_replica_killed_under_load_fails_only_the_calls_it_held_and_the_session_goes_on() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-kill").unwrap();
    let a = replica(dir.path(), "a", &store);
    let b = replica(dir.path(), "b", &store);
    let (_lb, port) = haproxy(dir.path(), &[&a.addr, &b.addr]).await;
    let key = new_key(&dir.path().join("a/manifold.toml"), "loader");
    let session = Session::open(&format!("http://127.0.0.1:{port}/mcp"), &key).await;

    let kill_at = Duration::from_millis(1500);
    let made = load_killing(&session, a, kill_at).await;

    let failed = failures(&made);
    // Only calls in flight on the killed replica fail: at most one per worker, all started
    // before the kill.
    assert!(
        failed.len() <= 4,
        "{} calls failed: {failed:#?}",
        failed.len()
    );
    for m in made.iter().filter(|m| m.outcome.is_err()) {
        assert!(
            m.started < kill_at,
            "a call started after the kill failed: {failed:#?}"
        );
    }
    let after = made
        .iter()
        .filter(|m| m.started > kill_at + Duration::from_millis(500))
        .count();
    assert!(
        after >= 4,
        "the session went on after the kill ({after} calls)"
    );
    assert!(made.iter().filter(|m| m.outcome.is_ok()).count() > after);
    drop(b);
}

#[tokio::test]
async fn a_rolling_restart_under_load_fails_no_call() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-rolling").unwrap();
    let ports = [free_port().unwrap(), free_port().unwrap()];
    let at = |p: u16| format!("127.0.0.1:{p}");
    let mut replicas = [
        Some(replica_at(dir.path(), "a", &store, &at(ports[0]))),
        Some(replica_at(dir.path(), "b", &store, &at(ports[1]))),
    ];
    let (_lb, port) = haproxy(dir.path(), &[&at(ports[0]), &at(ports[1])]).await;
    let key = new_key(&dir.path().join("a/manifold.toml"), "roller");
    let session = Session::open(&format!("http://127.0.0.1:{port}/mcp"), &key).await;
    let loaded = tokio::spawn({
        let session = session.clone();
        async move { load(&session, 3, Duration::from_secs(12)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (i, name) in ["a", "b"].iter().enumerate() {
        // SIGTERM: the replica drains (new requests 503, which HAProxy sends elsewhere), then exits.
        let Some(Replica {
            process: mut gateway,
            ..
        }) = replicas[i].take()
        else {
            unreachable!()
        };
        gateway.signal(nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = gateway.wait_for_exit(HANG_GUARD).unwrap();
        assert!(status.success(), "{name} exited with {status}");
        replicas[i] = Some(replica_at(dir.path(), name, &store, &at(ports[i])));
        // Back in the pool once HAProxy's check sees it.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let made = loaded.await.unwrap();
    let failed = failures(&made);
    assert!(
        failed.is_empty(),
        "{} of {} calls failed: {failed:#?}",
        failed.len(),
        made.len()
    );
    assert!(made.len() > 20, "only {} calls were made", made.len());
}

#[tokio::test]
async fn postgresql_restarted_under_load_fails_only_what_needs_it_and_both_replicas_recover() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-pg").unwrap();
    let a = replica(dir.path(), "a", &store);
    let b = replica(dir.path(), "b", &store);
    // A replica that has checked no key yet: checking any key there needs the store.
    let c = replica(dir.path(), "c", &store);
    let (_lb, port) = haproxy(dir.path(), &[&a.addr, &b.addr]).await;
    let key = new_key(&dir.path().join("a/manifold.toml"), "steady");
    let session = Session::open(&format!("http://127.0.0.1:{port}/mcp"), &key).await;

    let down_at = Duration::from_secs(1);
    let up_at = Duration::from_secs(4);
    let loaded = tokio::spawn({
        let session = session.clone();
        async move { load(&session, 2, Duration::from_secs(15)).await }
    });
    let unseen = new_key(&dir.path().join("a/manifold.toml"), "unseen");
    tokio::time::sleep(down_at).await;
    pg.stop().unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let refused = http
        .post(format!("http://{}/mcp", c.addr))
        .header("authorization", format!("Bearer {unseen}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        503,
        "what needs the store is refused, saying why"
    );
    let why = refused.text().await.unwrap();
    assert!(why.contains("cannot read its API keys"), "{why}");
    tokio::time::sleep(up_at - down_at).await;
    pg.start_again().unwrap();
    let made = loaded.await.unwrap();

    // The key works there once the store is back.
    let accepted = http
        .post(format!("http://{}/mcp", c.addr))
        .header("authorization", format!("Bearer {unseen}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string())
        .send()
        .await
        .unwrap();
    assert_ne!(accepted.status(), 503);
    assert_ne!(accepted.status(), 401);
    eprintln!(
        "{} calls, {} refused while the store was down: {:#?}",
        made.len(),
        failures(&made).len(),
        failures(&made)
    );
    // While the store is down, a call either runs (the keys read a moment ago still vouch for
    // the caller; the audit trail queues its row) or is refused saying the store is unreachable:
    // nothing hangs, nothing else goes wrong.
    for m in made.iter().filter(|m| m.outcome.is_err()) {
        let why = m.outcome.as_ref().unwrap_err();
        assert!(
            m.started >= down_at && m.started < up_at + Duration::from_secs(6),
            "a call failed outside the outage: at {:?}: {why}",
            m.started
        );
        assert!(
            why.contains("503") || why.contains("unreachable") || why.contains("store"),
            "a failure that does not name the store: at {:?}: {why}",
            m.started
        );
    }
    // Both replicas recover without a restart: the last calls all succeed, on both.
    let late: Vec<&Made> = made
        .iter()
        .filter(|m| m.started > up_at + Duration::from_secs(6))
        .collect();
    assert!(
        late.len() >= 4,
        "only {} calls after the recovery",
        late.len()
    );
    assert!(
        late.iter().all(|m| m.outcome.is_ok()),
        "{:#?}",
        failures(&made)
    );
    // Each replica, asked directly, serves a new session's call.
    for r in [&a, &b] {
        let direct = Session::open(&format!("http://{}/mcp", r.addr), &key).await;
        let answered = direct.slow_call(1).await;
        assert!(
            answered.is_ok(),
            "{} after the recovery: {answered:?}",
            r.addr
        );
    }
}

/// Whether an answer is the refusal of a rate limit (-32006 naming `rate_limits.tools[0]`).
fn rate_limited(answer: &Value) -> bool {
    answer["error"]["code"] == -32006
        && answer["error"]["data"]["limit"] == "rate_limits.tools[0]"
        && answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("4 calls of \"py__echo\" per minute"))
}

/// A rate limit counts every replica's calls: what one replica spent, the other refuses (after a
/// sharing round), and calls racing on both replicas stay within the documented error.
#[tokio::test]
async fn a_rate_limit_is_shared_by_the_replicas() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-rate-limits").unwrap();
    let limit = "\n[[rate_limits.tools]]\nmatch = [\"py__echo\"]\nrate = \"4/minute\"\n";
    let a = replica_with(dir.path(), "a", &store, "127.0.0.1:0", limit);
    let b = replica_with(dir.path(), "b", &store, "127.0.0.1:0", limit);
    let key = new_key(&dir.path().join("a/manifold.toml"), "alice");
    let on_a = Session::open(&format!("http://{}/mcp", a.addr), &key).await;
    let on_b = Session::open(&format!("http://{}/mcp", b.addr), &key).await;
    let echo = |n: u64, on: &Session| {
        let on = on.clone();
        async move {
            on.call(n, "py__echo", json!({"message": format!("m{n}")}))
                .await
        }
    };
    // b has called once (as a replica in service would have), then a spends the rest.
    let first = echo(1, &on_b).await;
    assert!(
        first["result"]["isError"] != true && first.get("error").is_none(),
        "{first}"
    );
    for n in 2..=4 {
        let answer = echo(n, &on_a).await;
        assert!(answer.get("error").is_none(), "call {n} on a: {answer}");
    }
    // Four sharing rounds later, b knows: the fifth call is refused wherever it lands.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let refused_b = echo(5, &on_b).await;
    assert!(
        rate_limited(&refused_b),
        "b admitted a fifth call: {refused_b}"
    );
    let refused_a = echo(6, &on_a).await;
    assert!(
        rate_limited(&refused_a),
        "a admitted a fifth call: {refused_a}"
    );

    // Bob races on both replicas at once, 10 calls each, faster than a round: the stated error
    // is (replicas - 1) x burst above the limit, so at most 8 of the 20 pass, and at least 4.
    let bob = new_key(&dir.path().join("a/manifold.toml"), "bob");
    let bob_a = Session::open(&format!("http://{}/mcp", a.addr), &bob).await;
    let bob_b = Session::open(&format!("http://{}/mcp", b.addr), &bob).await;
    let mut racing = Vec::new();
    for n in 0..10 {
        racing.push(tokio::spawn(echo(100 + n, &bob_a)));
        racing.push(tokio::spawn(echo(200 + n, &bob_b)));
    }
    let mut passed = 0;
    for r in racing {
        let answer = r.await.unwrap();
        if answer.get("error").is_none() {
            passed += 1;
        } else {
            assert!(rate_limited(&answer), "{answer}");
        }
    }
    assert!(
        (4..=8).contains(&passed),
        "{passed} of 20 racing calls passed"
    );
    // Once shared, the excess is owed: neither replica admits bob now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(rate_limited(&echo(300, &bob_a).await));
    assert!(rate_limited(&echo(301, &bob_b).await));
}

/// In `required` mode a replica killed under load loses no row of a call whose answer reached
/// the client, and writes none twice: every answered call's id is on the trail exactly once, the
/// one chain both replicas append to still verifies, and the killed replica's unanswered calls
/// leave at most a row each (written before the kill; their answers never left).
#[tokio::test]
async fn in_required_mode_a_killed_replica_loses_no_answered_calls_row_and_doubles_none() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-audit-kill").unwrap();
    let required = "\n[audit]\nmode = \"required\"\n";
    let a = replica_with(dir.path(), "a", &store, "127.0.0.1:0", required);
    let b = replica_with(dir.path(), "b", &store, "127.0.0.1:0", required);
    let (_lb, port) = haproxy(dir.path(), &[&a.addr, &b.addr]).await;
    let config_b = dir.path().join("b/manifold.toml");
    let key = new_key(&config_b, "loader");
    let session = Session::open(&format!("http://127.0.0.1:{port}/mcp"), &key).await;

    let kill_at = Duration::from_millis(1500);
    let made = load_killing(&session, a, kill_at).await;
    let answered: Vec<&String> = made
        .iter()
        .filter_map(|m| m.outcome.as_ref().ok())
        .collect();
    let failed = failures(&made);
    assert!(answered.len() > 8, "too few calls to judge: {failed:#?}");
    assert!(failed.len() <= 4, "{failed:#?}");

    // Let b's writer commit what it queued, then read the whole trail as an operator would.
    drop(b);
    let (ok, verified) = cli(&config_b, &["audit", "verify"]);
    assert!(ok, "{verified}");
    let (ok, exported) = cli(&config_b, &["audit", "export", "--jsonl"]);
    assert!(ok, "{exported}");
    let mut rows_per_call: std::collections::HashMap<String, usize> = Default::default();
    for line in exported.lines().filter(|l| l.starts_with('{')) {
        let row: Value = serde_json::from_str(line).unwrap();
        let record: Value = serde_json::from_str(row["record_json"].as_str().unwrap()).unwrap();
        if record["target"] == "slow" {
            let id = record["call_id"].as_str().unwrap().to_owned();
            *rows_per_call.entry(id).or_default() += 1;
        }
    }
    for id in &answered {
        assert_eq!(
            rows_per_call.get(id.as_str()),
            Some(&1),
            "answered call {id} has {:?} rows",
            rows_per_call.get(id.as_str())
        );
    }
    let doubled: Vec<_> = rows_per_call.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "rows written twice: {doubled:?}");
    // Rows without an answer: calls the kill cut off after their row was durable.
    let unanswered = rows_per_call.len() - answered.len();
    assert!(
        unanswered <= failed.len(),
        "{unanswered} rows of unanswered calls, {} failed",
        failed.len()
    );
}

/// An SSE reply read as it arrives: one JSON-RPC message at a time.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if let Ok(message) = serde_json::from_str(&data) {
                    return Some(message);
                }
                continue;
            }
            let chunk = tokio::time::timeout(HANG_GUARD, self.response.chunk())
                .await
                .expect("the stream went silent")
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Reads until a message `wanted` accepts.
    async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        while let Some(m) = self.next().await {
            if wanted(&m) {
                return m;
            }
        }
        panic!("the stream ended first");
    }
}

/// A call whose reply streams from one replica, asking the client a question mid-call.
async fn call_streaming(on: &Session, id: u64, tool: &str, arguments: Value) -> Events {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    let response = on
        .post(&body)
        .header("accept", "text/event-stream, application/json")
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    Events {
        response,
        buffer: String::new(),
    }
}

/// A question an upstream asks mid-call reaches the client on the replica holding the call, and
/// the client's answer, sent to the other replica, reaches the holder; so does a cancellation,
/// which withdraws the question. Each request goes to the replica the test chooses.
#[tokio::test]
async fn an_answer_or_a_cancellation_sent_to_another_replica_reaches_the_call() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-relay").unwrap();
    let a = replica(dir.path(), "a", &store);
    let b = replica(dir.path(), "b", &store);
    let key = new_key(&dir.path().join("a/manifold.toml"), "alice");
    let (url_a, url_b) = (
        format!("http://{}/mcp", a.addr),
        format!("http://{}/mcp", b.addr),
    );
    let on_a = Session::open_declaring(&url_a, &key, json!({"elicitation": {"form": {}}})).await;
    let on_b = on_a.at(&url_b);

    let mut reply = call_streaming(&on_a, 7, "py__ask_name", json!({})).await;
    let question = reply.until(|m| m["method"] == "elicitation/create").await;
    let asked = question["id"].as_str().unwrap().to_owned();
    assert!(asked.starts_with("mf-"), "{question}");
    let answer = json!({"jsonrpc": "2.0", "id": asked,
        "result": {"action": "accept", "content": {"name": "Ada"}}});
    let relayed = on_b.post(&answer).send().await.unwrap();
    assert_eq!(relayed.status(), 202);
    let result = reply.until(|m| m["id"] == 7).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "Hello, Ada!",
        "{result}"
    );

    // A cancellation sent to b ends the call held by a and withdraws its open question.
    let mut reply = call_streaming(&on_a, 8, "py__ask_name", json!({})).await;
    let question = reply.until(|m| m["method"] == "elicitation/create").await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 8, "reason": "changed my mind"}});
    assert_eq!(on_b.post(&cancel).send().await.unwrap().status(), 202);
    let withdrawn = reply
        .until(|m| m["method"] == "notifications/cancelled")
        .await;
    assert_eq!(
        withdrawn["params"]["requestId"], question["id"],
        "{withdrawn}"
    );
    // The session goes on, on either replica.
    let echoed = on_b
        .call(9, "py__echo", json!({"message": "still here"}))
        .await;
    assert_eq!(
        echoed["result"]["content"][0]["text"], "still here",
        "{echoed}"
    );
}

/// The Python SDK client, whose every request HAProxy sends to the next replica, gets its
/// elicitation, sampling and roots questions answered through two replicas, call after call.
#[tokio::test]
async fn questions_asked_mid_call_are_answered_through_a_round_robin_balancer() {
    let calls: Vec<Value> = (0..3)
        .flat_map(|i| {
            [
                json!({"name": "py__ask_name", "arguments": {}}),
                json!({"name": "py__summarize", "arguments": {"text": format!("t{i}")}}),
                json!({"name": "py__list_roots", "arguments": {}}),
            ]
        })
        .collect();
    let texts = balanced_client_texts("replicas-questions", "streamable-http", calls).await;
    for chunk in texts.chunks(3) {
        assert_eq!(
            chunk,
            ["Hello, Ada!", "a short summary", "file:///srv/project"]
        );
    }
}

/// Two replicas on one PostgreSQL behind HAProxy in round robin, and the Python SDK client over
/// `transport` (its `/mcp`, or `/sse` for "sse") making `calls` as alice: the first text of each
/// call, every call having succeeded.
async fn balanced_client_texts(scratch: &str, transport: &str, calls: Vec<Value>) -> Vec<String> {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new(scratch).unwrap();
    let a = replica(dir.path(), "a", &store);
    let b = replica(dir.path(), "b", &store);
    let (_lb, port) = haproxy(dir.path(), &[&a.addr, &b.addr]).await;
    let key = new_key(&dir.path().join("a/manifold.toml"), "alice");
    let path = if transport == "sse" { "sse" } else { "mcp" };
    let report = report_of(python_client_over(
        &format!("http://127.0.0.1:{port}/{path}"),
        &key,
        json!(calls),
        transport,
    ));
    report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert!(c.get("error").is_none() && c["isError"] == false, "{c}");
            c["texts"][0].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The Python SDK client over the deprecated HTTP+SSE transport, behind a round-robin balancer:
/// its stream stays on the replica that opened it, its POSTs land on either replica, and the one
/// that does not hold the stream hands them over through the relay. Calls, and a question asked
/// mid-call (its answer POSTed too), all succeed.
#[tokio::test]
async fn a_legacy_sse_session_is_served_whichever_replica_its_posts_reach() {
    let calls: Vec<Value> = (0..4)
        .flat_map(|i| {
            [
                json!({"name": "py__echo", "arguments": {"message": format!("m{i}")}}),
                json!({"name": "py__ask_name", "arguments": {}}),
            ]
        })
        .collect();
    let texts = balanced_client_texts("replicas-sse", "sse", calls).await;
    for (i, pair) in texts.chunks(2).enumerate() {
        assert_eq!(pair, [format!("m{i}"), "Hello, Ada!".to_owned()]);
    }
}

/// A legacy client's GET stream, opened on one replica, resumes on another with the event id it
/// last saw: the new stream first says every list may have changed (the other replica's events
/// are not here), then carries what comes next.
#[tokio::test]
async fn a_get_stream_resumes_on_another_replica_telling_every_list_may_have_changed() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-get-stream").unwrap();
    let a = replica(dir.path(), "a", &store);
    let b = replica(dir.path(), "b", &store);
    let key = new_key(&dir.path().join("a/manifold.toml"), "alice");
    let on_a = Session::open(&format!("http://{}/mcp", a.addr), &key).await;
    let get = |on: &Session, last: Option<&str>| {
        let mut request = on
            .http
            .get(&on.url)
            .header("authorization", format!("Bearer {}", on.key))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &on.id)
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        request.send()
    };
    let mut stream_a = get(&on_a, None).await.unwrap();
    assert_eq!(stream_a.status(), 200);
    let mut seen = String::new();
    let last = loop {
        let chunk = tokio::time::timeout(HANG_GUARD, stream_a.chunk())
            .await
            .unwrap()
            .unwrap()
            .expect("the GET stream ended");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(id) = seen.lines().find_map(|l| l.strip_prefix("id:")) {
            break id.trim().to_owned();
        }
    };
    drop(stream_a);
    drop(a);
    let on_b = on_a.at(&format!("http://{}/mcp", b.addr));
    let resumed = get(&on_b, Some(&last)).await.unwrap();
    assert_eq!(resumed.status(), 200, "resuming {last:?} on b");
    let mut events = Events {
        response: resumed,
        buffer: String::new(),
    };
    let first = events.next().await.unwrap();
    assert_eq!(
        first["method"], "notifications/tools/list_changed",
        "{first}"
    );
}

/// The replicas' extra server: the conformance fixture (legacy era, so subscriptions reach it),
/// whose `test_trigger_resource_update` makes it announce an update of `test://watched-resource`.
fn fixture_server() -> String {
    let fixture = manifold_testkit::workspace_binary(
        "manifold-conformance-fixture",
        "manifold-conformance-fixture",
    )
    .unwrap();
    format!(
        "\n[servers.fx]\ncommand = {}\nargs = [\"stdio\"]\nera = \"legacy\"\n",
        toml_string(&fixture.to_string_lossy())
    )
}

/// A legacy session's GET stream on `on`'s replica.
async fn get_stream(on: &Session) -> Events {
    let response = on
        .http
        .get(&on.url)
        .header("authorization", format!("Bearer {}", on.key))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &on.id)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "GET stream on {}", on.url);
    Events {
        response,
        buffer: String::new(),
    }
}

/// Triggers an update of the watched resource on `on`'s replica until `stream` hears it; `false`
/// when it was not heard within a bound (the update went to nobody).
async fn update_heard(on: &Session, stream: &mut Events, first_id: u64) -> bool {
    const WATCHED: &str = "fx+test://watched-resource";
    let heard = async {
        loop {
            let m = stream.next().await?;
            if m["method"] == "notifications/resources/updated" && m["params"]["uri"] == WATCHED {
                return Some(m);
            }
        }
    };
    let trigger = async {
        for n in 0.. {
            on.call(first_id + n, "fx__test_trigger_resource_update", json!({}))
                .await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    tokio::select! {
        m = tokio::time::timeout(Duration::from_secs(15), heard) => matches!(m, Ok(Some(_))),
        () = trigger => false,
    }
}

/// Sends one request of the session and returns its JSON-RPC answer.
async fn request(on: &Session, id: u64, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let response = on.post(&body).send().await.unwrap();
    answer_of(response, &json!(id)).await.unwrap()
}

/// What a legacy session asked for follows it to the other replica: a subscription made on `a`
/// is heard on `b`, both when `b` first meets the session afterwards and when `b` already held
/// it; a log level chosen on `a` filters `b`'s log lines; a DELETE on `a` ends the session on
/// `b`, closing its GET stream there and refusing its next request.
#[tokio::test]
async fn what_a_session_asked_for_follows_it_to_another_replica() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-shared-session").unwrap();
    let extra = fixture_server();
    let a = replica_with(dir.path(), "a", &store, "127.0.0.1:0", &extra);
    let b = replica_with(dir.path(), "b", &store, "127.0.0.1:0", &extra);
    let key = new_key(&dir.path().join("a/manifold.toml"), "alice");
    let (url_a, url_b) = (
        format!("http://{}/mcp", a.addr),
        format!("http://{}/mcp", b.addr),
    );
    let watched = json!({"uri": "fx+test://watched-resource"});

    // b meets the session only after the subscription was made on a.
    let on_a = Session::open(&url_a, &key).await;
    let subscribed = request(&on_a, 1, "resources/subscribe", watched.clone()).await;
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    let on_b = on_a.at(&url_b);
    let mut stream_b = get_stream(&on_b).await;
    assert!(
        update_heard(&on_b, &mut stream_b, 100).await,
        "a subscription made on a is heard on b, which met the session afterwards"
    );

    // b already holds the session (its GET stream is open there) when a subscribes.
    let other_a = Session::open(&url_a, &key).await;
    let other_b = other_a.at(&url_b);
    let mut other_stream = get_stream(&other_b).await;
    let subscribed = request(&other_a, 2, "resources/subscribe", watched.clone()).await;
    assert!(subscribed.get("result").is_some(), "{subscribed}");
    assert!(
        update_heard(&other_b, &mut other_stream, 200).await,
        "a subscription made on a reaches b, which held the session already"
    );

    // A log level chosen on a filters the info lines of a call on b.
    let level = request(&other_a, 3, "logging/setLevel", json!({"level": "error"})).await;
    assert!(level.get("result").is_some(), "{level}");
    let mut seen = Vec::new();
    for attempt in 0..40 {
        let body = json!({"jsonrpc": "2.0", "id": 300 + attempt, "method": "tools/call",
            "params": {"name": "fx__test_tool_with_logging", "arguments": {}}});
        let response = other_b.post(&body).send().await.unwrap();
        let text = response.text().await.unwrap();
        // A reply with nothing before its answer may come as plain JSON rather than SSE.
        seen = match serde_json::from_str::<Value>(&text) {
            Ok(answer) => vec![answer],
            Err(_) => text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect(),
        };
        if !seen.iter().any(|m| m["method"] == "notifications/message") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        !seen.iter().any(|m| m["method"] == "notifications/message"),
        "b still sends info lines to a session that chose error on a: {seen:?}"
    );
    assert!(
        seen.last().is_some_and(|m| m.get("result").is_some()),
        "{seen:?}"
    );

    // A DELETE on a ends the session on b: its GET stream there closes, its next request is 404.
    let deleted = other_a
        .http
        .delete(&other_a.url)
        .header("authorization", format!("Bearer {key}"))
        .header("mcp-session-id", &other_a.id)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let closed = tokio::time::timeout(Duration::from_secs(15), async {
        while other_stream.next().await.is_some() {}
    })
    .await;
    assert!(closed.is_ok(), "the GET stream on b closed");
    let refused = other_b
        .post(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404, "the ended session is refused on b");
    // The first session was not touched by the other's end.
    let listed = request(&on_b, 5, "tools/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
}

/// The names `on` sees in `tools/list`.
async fn tool_names(on: &Session, id: u64) -> Vec<String> {
    let listed = request(on, id, "tools/list", json!({})).await;
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Lists on `on` until `wanted` holds; how long that took (printed by the caller, never asserted).
async fn listed_until(on: &Session, what: &str, wanted: impl Fn(&[String]) -> bool) -> Duration {
    let began = Instant::now();
    for n in 0.. {
        if wanted(&tool_names(on, 10_000 + n).await) {
            return began.elapsed();
        }
        assert!(
            began.elapsed() < HANG_GUARD,
            "{what}: never listed on {}",
            on.url
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unreachable!()
}

/// A pin approval given once (`manifold pins approve` against the shared store) lets every
/// replica serve the approved definition again, and a tool authored through one replica is
/// listed and runs on the other; neither needs a restart. The time each took to reach the other
/// replica is printed (each replica re-reads pins and authored tools every second).
#[tokio::test]
async fn a_pin_approval_and_an_authored_tool_reach_every_replica() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-pins-authored").unwrap();
    let peer = manifold_testkit::test_peer().unwrap();
    // Authored tools run in the sandbox, whose launcher lies beside `manifold`.
    manifold_testkit::workspace_binary("manifold-sandbox", "manifold-sandbox-exec").unwrap();
    let extra = format!(
        "\n[servers.peer]\ncommand = {}\nargs = [\"stdio\", \"--era\", \"legacy\", \"--behaviour\", \"rug-pull\"]\non_change = \"block\"\n\n[[rules]]\nname = \"authors\"\neffect = \"allow\"\ntools = [\"manifold_create_tool\"]\n",
        toml_string(&peer.to_string_lossy())
    );
    let a = replica_with(dir.path(), "a", &store, "127.0.0.1:0", &extra);
    let b = replica_with(dir.path(), "b", &store, "127.0.0.1:0", &extra);
    let config_a = dir.path().join("a/manifold.toml");
    let key = new_key(&config_a, "alice");
    let on_a = Session::open(&format!("http://{}/mcp", a.addr), &key).await;
    let on_b = on_a.at(&format!("http://{}/mcp", b.addr));

    // Each replica's own peer pulls the rug at its first call: echo is withheld on both.
    for (n, on) in [(1, &on_a), (2, &on_b)] {
        let echoed = on.call(n, "peer__echo", json!({"message": "hi"})).await;
        assert_eq!(echoed["result"]["content"][0]["text"], "hi", "{echoed}");
        listed_until(on, "echo withheld after the rug pull", |names| {
            names.iter().any(|t| t == "peer__added_later")
                && !names.iter().any(|t| t == "peer__echo")
        })
        .await;
    }
    let (approved, out) = cli(&config_a, &["pins", "approve", "peer"]);
    assert!(approved, "{out}");
    for on in [&on_a, &on_b] {
        let took = listed_until(on, "echo approved", |names| {
            names.iter().any(|t| t == "peer__echo")
        })
        .await;
        println!("the pin approval reached {} in {took:?}", on.url);
    }
    let echoed = on_b
        .call(3, "peer__echo", json!({"message": "again"}))
        .await;
    assert!(echoed.get("result").is_some(), "{echoed}");

    // A tool authored through a is listed, and runs, on b.
    let definition = json!({
        "name": "word_count",
        "description": "Counts the words of a text",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "language": "python",
        "code": "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps({\"words\": len(args[\"text\"].split())}))\n",
    });
    let created = on_a.call(4, "manifold_create_tool", definition).await;
    assert!(
        created.get("result").is_some() && created["result"]["isError"] != true,
        "{created}"
    );
    let took = listed_until(&on_b, "the authored tool", |names| {
        names.iter().any(|t| t == "word_count")
    })
    .await;
    println!("the authored tool reached b in {took:?}");
    let counted = on_b
        .call(5, "word_count", json!({"text": "one two three"}))
        .await;
    assert_eq!(
        counted["result"]["structuredContent"]["words"], 3,
        "{counted}"
    );
}

/// A dashboard sign-in on one replica is honoured by the other (a balancer may send each click
/// anywhere), the line an action leaves shows on the next page whichever replica serves it, and a
/// sign-out on one ends the session on both.
#[tokio::test]
async fn a_dashboard_session_opened_on_one_replica_works_and_ends_on_the_other() {
    let pg = Postgres::start().unwrap();
    let store = pg.url_with_password("unused");
    let dir = ScratchDir::new("replicas-dashboard").unwrap();
    let a = replica(dir.path(), "a", &store);
    let b = replica(dir.path(), "b", &store);
    let made = Command::new(MANIFOLD)
        .args(["keys", "create", "ops", "--scopes", "admin", "--config"])
        .arg(dir.path().join("a/manifold.toml"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let admin_key = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    new_key(&dir.path().join("a/manifold.toml"), "spare");
    let (ui_a, ui_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let form = |base: &str, path: &str, cookie: Option<&str>, body: String| {
        let mut request = http
            .post(format!("{base}{path}"))
            .header("origin", base)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send()
    };
    let signed_in = form(
        &ui_a,
        "/ui/login",
        None,
        format!("credential={admin_key}&next=%2Fui%2F"),
    )
    .await
    .unwrap();
    assert_eq!(signed_in.status(), 303, "{:?}", signed_in.text().await);
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = |base: String, path: &'static str| {
        let request = http.get(format!("{base}{path}")).header("cookie", &cookie);
        async move { request.send().await.unwrap() }
    };
    let on_b = page(ui_b.clone(), "/ui/keys").await;
    assert_eq!(
        on_b.status(),
        200,
        "b sent the signed-in operator to {:?}",
        on_b.headers().get("location")
    );
    let html = on_b.text().await.unwrap();
    // An action on b (a key revoked), its line shown by a.
    let revoked = form(
        &ui_b,
        "/ui/keys/spare/revoke",
        Some(&cookie),
        format!("csrf={}", csrf_of(&html)),
    )
    .await
    .unwrap();
    assert_eq!(revoked.status(), 303);
    let shown = page(ui_a.clone(), "/ui/keys").await.text().await.unwrap();
    assert!(shown.contains("revoked 1 key(s) named spare"), "{shown}");
    let again = page(ui_a.clone(), "/ui/keys").await.text().await.unwrap();
    assert!(!again.contains("revoked 1 key(s)"), "the line shows once");
    // Signed out on a: b sends the browser back to the sign-in page.
    let html = page(ui_a.clone(), "/ui/").await.text().await.unwrap();
    let out = form(
        &ui_a,
        "/ui/logout",
        Some(&cookie),
        format!("csrf={}", csrf_of(&html)),
    )
    .await
    .unwrap();
    assert_eq!(out.status(), 303);
    let after = page(ui_b.clone(), "/ui/").await;
    assert_eq!(after.status(), 303);
    assert!(
        after.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/ui/login")
    );
}

/// The value of `name="csrf"` in a dashboard page.
fn csrf_of(html: &str) -> String {
    let at = html
        .find(r#"name="csrf" value=""#)
        .expect("a form with a csrf field");
    let rest = &html[at + r#"name="csrf" value=""#.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}
