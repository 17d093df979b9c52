//! Several replicas as one gateway, on real parts: two `manifold serve` processes sharing one
//! PostgreSQL (their store) and one session key, behind HAProxy from Debian in round robin with
//! every request on a connection of its own, so consecutive requests of one client land on
//! different replicas. A real Python SDK client's legacy session continues across them; a call
//! held on one replica is approved from the CLI against the shared store and runs; a key revoked
//! once is refused by every replica.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use manifold_testkit::{
    ChildGuard, Postgres, ScratchDir, free_port, peers_dir, python, wait_for_port, workspace_root,
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

fn config(data: &Path, store: &str) -> String {
    let server = toml_string(
        &peers_dir()
            .unwrap()
            .join("python_server.py")
            .to_string_lossy(),
    );
    let python = toml_string(&python().unwrap().to_string_lossy());
    format!(
        r#"[gateway]
listen = "127.0.0.1:0"
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
"#,
        data = toml_string(&data.to_string_lossy()),
        store = toml_string(store),
    )
}

struct Replica {
    _guard: ChildGuard,
    _stdout: BufReader<std::process::ChildStdout>,
    addr: String,
}

fn replica(dir: &Path, name: &str, store: &str) -> Replica {
    let here = dir.join(name);
    std::fs::create_dir_all(&here).unwrap();
    let config = here.join("manifold.toml");
    std::fs::write(&config, self::config(&here.join("data"), store)).unwrap();
    let mut command = Command::new(MANIFOLD);
    command
        .args(["serve", "--config"])
        .arg(&config)
        .current_dir(&here)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(here.join("serve.log")).unwrap());
    let mut guard = ChildGuard::spawn(command).unwrap();
    let mut stdout = BufReader::new(guard.child_mut().stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let url = line.trim();
    assert!(
        url.ends_with("/mcp"),
        "{name} printed {url:?}: {}",
        std::fs::read_to_string(here.join("serve.log")).unwrap_or_default()
    );
    Replica {
        _guard: guard,
        _stdout: stdout,
        addr: url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned(),
    }
}

/// HAProxy in round robin over `backends`, closing every connection after its request.
async fn haproxy(dir: &Path, backends: &[&str]) -> (ChildGuard, u16) {
    let port = free_port().unwrap();
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, b)| format!("    server r{i} {b}\n"))
        .collect();
    let cfg = format!(
        "global\n    maxconn 256\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 120s\n    timeout server 120s\n    option httpclose\nfrontend mcp\n    bind 127.0.0.1:{port}\n    default_backend replicas\nbackend replicas\n    balance roundrobin\n{servers}"
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
    let script = workspace_root().join("crates/manifold/tests/clients/replica_py_client.py");
    Command::new(python().unwrap())
        .arg(script)
        .arg(json!({"url": url, "key": key, "calls": calls}).to_string())
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
