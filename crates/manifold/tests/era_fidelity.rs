//! Why: a server's mid-call question (sampling, form and URL elicitation, roots) must reach the client
//! through Manifold whenever it would reach the client directly, whatever era each side speaks. This
//! drives `manifold serve` in front of every dual-era SDK server of tests/peers (TS SDK 1.x, TS SDK 2.x
//! and Python SDK 2.x, each over stdio and Streamable HTTP) with the real Python SDK client in the
//! legacy era and in the modern era and the TS SDK 1.x client (legacy only), and checks every question's answer in the tool's result. Where
//! an SDK cannot carry a question even directly, the expected outcome is the same failure.
//!
//! Then, for every server, a call is cancelled while its question is open: the client must see the
//! question withdrawn, as it does directly.
//!
//! One gateway and its HTTP servers per test; each test runs the whole matrix for one client era.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use manifold_testkit::{
    ChildGuard, ScratchDir, ServeCommand, free_port, node, peers_dir, python, spawn_http_peer,
    workspace_root,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// Bounds one client run or the gateway's start; never a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(180);

const ELICITED_NAME: &str = "Ada";
const SAMPLED_TEXT: &str = "sampled by the client's own model";
const ROOT_URI: &str = "file:///work/era-fidelity-root";

/// What a tool's result must say.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// The question reached the client and its answer reached the tool: the result's text.
    Answered(&'static str),
    /// The SDK cannot carry this question in this era, directly or not: an error result or error
    /// response whose text contains this.
    Fails(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientEra {
    Legacy,
    Modern,
}

/// Every dual-era server of the matrix, by its name in the configuration.
const SERVERS: [&str; 6] = ["v1", "v1_http", "v2", "v2_http", "py", "py_http"];

/// The question tools every server has, with the answer they report.
fn common_questions() -> Vec<(&'static str, Value, Outcome)> {
    vec![
        (
            "summarize",
            json!({"text": "x"}),
            Outcome::Answered(SAMPLED_TEXT),
        ),
        ("ask_name", json!({}), Outcome::Answered("Hello, Ada!")),
        ("list_roots", json!({}), Outcome::Answered(ROOT_URI)),
    ]
}

/// The matrix for one client era: (server, tool, arguments, outcome).
fn matrix(era: ClientEra) -> Vec<(&'static str, &'static str, Value, Outcome)> {
    let mut rows = Vec::new();
    for server in SERVERS {
        for (tool, args, outcome) in common_questions() {
            rows.push((server, tool, args, outcome));
        }
        let url = match (server, era) {
            // Python SDK 2.x offers URL elicitation only as a server->client request, which the
            // modern era cannot carry: directly it fails the same way.
            ("py" | "py_http", ClientEra::Modern) => Outcome::Fails("back-channel"),
            _ => Outcome::Answered("url elicitation accept"),
        };
        rows.push((server, "open_link", json!({}), url));
    }
    // A TS SDK 2.x tool written push-style asks only the legacy way (the issue's case). Its HTTP
    // server serves the legacy era statelessly, so there it cannot ask even directly.
    let push = match era {
        ClientEra::Legacy => Outcome::Answered(SAMPLED_TEXT),
        ClientEra::Modern => Outcome::Fails("not available on protocol revision 2026-07-28"),
    };
    rows.push(("v2", "push_summarize", json!({"text": "x"}), push));
    rows.push((
        "v2_http",
        "push_summarize",
        json!({"text": "x"}),
        Outcome::Fails("not available on protocol revision 2026-07-28"),
    ));
    rows
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn peer(name: &str) -> String {
    peers_dir()
        .unwrap()
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The HTTP servers of the matrix, stopped when dropped.
struct HttpPeers {
    _guards: Vec<ChildGuard>,
    urls: [String; 3],
}

async fn start_http_peers() -> HttpPeers {
    let ports = [
        free_port().unwrap(),
        free_port().unwrap(),
        free_port().unwrap(),
    ];
    let args = |script: &str, port: u16| {
        vec![
            peer(script),
            "http".to_owned(),
            "--port".to_owned(),
            port.to_string(),
        ]
    };
    let none = Vec::<(String, String)>::new;
    let (v1, v2, py) = tokio::join!(
        spawn_http_peer(
            node().unwrap(),
            args("ts_v1_server.mjs", ports[0]),
            none(),
            ports[0]
        ),
        spawn_http_peer(
            node().unwrap(),
            args("ts_v2_server.mjs", ports[1]),
            none(),
            ports[1]
        ),
        spawn_http_peer(
            python().unwrap(),
            args("python_server.py", ports[2]),
            none(),
            ports[2]
        ),
    );
    HttpPeers {
        _guards: vec![v1.unwrap(), v2.unwrap(), py.unwrap()],
        urls: ports.map(|p| format!("http://127.0.0.1:{p}/mcp")),
    }
}

fn config(data: &Path, http: &HttpPeers) -> String {
    let node = toml_string(&node().unwrap().to_string_lossy());
    let python = toml_string(&python().unwrap().to_string_lossy());
    format!(
        r#"[gateway]
listen = "127.0.0.1:0"
data_dir = {data}

[servers.v1]
command = {node}
args = [{v1}, "stdio"]

[servers.v1_http]
url = {v1_url}

[servers.v2]
command = {node}
args = [{v2}, "stdio"]

[servers.v2_http]
url = {v2_url}

[servers.py]
command = {python}
args = [{py}, "stdio"]

[servers.py_http]
url = {py_url}
"#,
        data = toml_string(&data.to_string_lossy()),
        v1 = toml_string(&peer("ts_v1_server.mjs")),
        v2 = toml_string(&peer("ts_v2_server.mjs")),
        py = toml_string(&peer("python_server.py")),
        v1_url = toml_string(&http.urls[0]),
        v2_url = toml_string(&http.urls[1]),
        py_url = toml_string(&http.urls[2]),
    )
}

/// Which real client drives the gateway.
#[derive(Debug, Clone, Copy)]
enum Driver {
    /// The Python SDK 2.x client, in either era.
    PythonSdk,
    /// The TypeScript SDK 1.x client, legacy era only.
    TsSdkV1,
}

/// Runs a client with a plan and returns its report.
fn run_client(driver: Driver, plan: &Value) -> Value {
    let scripts = workspace_root().join("crates/manifold/tests/clients");
    let mut command = match driver {
        Driver::PythonSdk => {
            let mut c = Command::new(python().unwrap());
            c.arg(scripts.join("era_py_client.py"));
            c
        }
        Driver::TsSdkV1 => {
            let mut c = Command::new(node().unwrap());
            c.arg(scripts.join("era_ts_v1_client.mjs"));
            c
        }
    };
    command.arg(plan.to_string());
    let run = manifold_testkit::run_client(command, HANG_GUARD)
        .unwrap_or_else(|e| panic!("the client hung on {plan}: {e}"));
    run.report().unwrap_or_else(|| {
        panic!(
            "the client reported no JSON: {}\n{}",
            run.stdout, run.stderr
        )
    })
}

/// Every row of the matrix for one client era, then a call cancelled while its question is open.
async fn run_matrix(era: ClientEra, driver: Driver) {
    let dir = ScratchDir::new("era-fidelity").unwrap();
    let http = start_http_peers().await;
    let gateway = ServeCommand::new(MANIFOLD, dir.path())
        .config_text(config(&dir.path().join("data"), &http))
        .log("gateway.log")
        .start()
        .unwrap();
    let url = gateway.url();
    let rows = matrix(era);
    let calls: Vec<Value> = rows
        .iter()
        .map(|(server, tool, args, _)| json!({"name": format!("{server}__{tool}"), "arguments": args}))
        .collect();
    let plan = json!({
        "url": url,
        "mode": match era { ClientEra::Legacy => "legacy", ClientEra::Modern => "auto" },
        "answers": {"name": ELICITED_NAME, "sampled": SAMPLED_TEXT, "model": "m", "root": ROOT_URI},
        "calls": calls,
        "modules": peers_dir().unwrap().join("node_modules").to_string_lossy(),
        "cancels": SERVERS
            .iter()
            .map(|server| json!({"name": format!("{server}__summarize"), "arguments": {"text": "never answered"}}))
            .collect::<Vec<_>>(),
    });
    let report = run_client(driver, &plan);
    let expected_revision = match era {
        ClientEra::Legacy => "2025-11-25",
        ClientEra::Modern => "2026-07-28",
    };
    assert_eq!(report["protocolVersion"], expected_revision, "{report}");
    let mut wrong = Vec::new();
    for ((server, tool, _, outcome), seen) in rows.iter().zip(report["calls"].as_array().unwrap()) {
        let texts = seen["texts"].as_array().map(|t| {
            t.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        });
        let ok = match outcome {
            Outcome::Answered(text) => seen["isError"] == false && texts.as_deref() == Some(*text),
            Outcome::Fails(part) => {
                let said = texts.unwrap_or_default() + seen["error"].as_str().unwrap_or_default();
                (seen["isError"] == true || seen["error"].is_string()) && said.contains(part)
            }
        };
        if !ok {
            wrong.push(format!(
                "{server}__{tool}: expected {outcome:?}, saw {seen}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows differ:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
    // Cancelling a call while its question is open withdraws the question, as directly: the
    // client's handler is cancelled (a legacy client by the notifications/cancelled Manifold
    // relays once the upstream withdraws its request).
    let cancels = report["cancels"].as_array().unwrap();
    assert_eq!(cancels.len(), SERVERS.len(), "{report}");
    for cancel in cancels {
        assert_eq!(cancel["questionArrived"], true, "{cancel}");
        assert_eq!(cancel["callEnded"], "cancelled", "{cancel}");
        assert_eq!(cancel["questionWithdrawn"], true, "{cancel}");
    }
    drop(gateway);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_client_gets_every_question_of_every_dual_era_server_through_the_gateway() {
    run_matrix(ClientEra::Legacy, Driver::PythonSdk).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ts_sdk_v1_client_gets_every_question_of_every_dual_era_server_through_the_gateway() {
    run_matrix(ClientEra::Legacy, Driver::TsSdkV1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modern_client_gets_every_question_of_every_dual_era_server_through_the_gateway() {
    run_matrix(ClientEra::Modern, Driver::PythonSdk).await;
}

/// The rows the matrix expects to fail (an SDK that cannot carry the question in that era) are
/// run with the same client straight against the same server, over HTTP: each fails there too,
/// so the gateway is never the reason. (The stdio rows serve the same script's tools.) Directly,
/// the legacy client's push-style question on the stateless legacy path fails only when the
/// server's own 60 s request timeout ends it ("Request timed out"); through the gateway, which
/// speaks the modern era to that server, it fails at once and says why.
#[tokio::test(flavor = "multi_thread")]
async fn what_fails_through_the_gateway_fails_the_same_way_directly() {
    let http = start_http_peers().await;
    let direct_url = |server: &str| match server {
        "v1_http" => Some(&http.urls[0]),
        "v2_http" => Some(&http.urls[1]),
        "py_http" => Some(&http.urls[2]),
        _ => None,
    };
    let mut checked = 0;
    for era in [ClientEra::Legacy, ClientEra::Modern] {
        for (server, tool, args, outcome) in matrix(era) {
            let (Outcome::Fails(_), Some(url)) = (outcome, direct_url(server)) else {
                continue;
            };
            let plan = json!({
                "url": url,
                "mode": match era { ClientEra::Legacy => "legacy", ClientEra::Modern => "auto" },
                "answers": {"name": ELICITED_NAME, "sampled": SAMPLED_TEXT, "model": "m", "root": ROOT_URI},
                "calls": [{"name": tool, "arguments": args}],
                "modules": peers_dir().unwrap().join("node_modules").to_string_lossy(),
            });
            let report = run_client(Driver::PythonSdk, &plan);
            let seen = &report["calls"][0];
            assert!(
                seen["isError"] == true || seen["error"].is_string(),
                "{server} {tool} ({era:?}) was expected to fail directly as through the gateway: {seen}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3, "the HTTP rows expected to fail");
}
