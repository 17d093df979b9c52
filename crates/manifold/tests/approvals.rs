//! Why: a call an ask rule holds must run only on a person's explicit yes, through whichever channel
//! the call has, and end otherwise with an error that says why. These tests put `manifold serve` in
//! front of the Python SDK server (over stdio) with ask rules, drive it with the real Python SDK client
//! (legacy and modern era) and the real TypeScript SDK clients (1.x; 2.x in both eras), answer out-of-band questions with
//! `manifold approvals` in another process, receive the webhook in a test server, cancel a call while
//! its question is open, and restart the gateway while a call is held.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use manifold_testkit::{
    ClientProcess, GatewayProcess, RawHttp, ScratchDir, ServeCommand, node, peers_dir, python,
    workspace_root,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// Bounds one client run, the gateway's start or a wait for a held call; never a performance
/// assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// `py__echo` asks the caller; `py__add` asks someone in group ops or the identity ops;
/// `py__slow` asks the dashboard's operator (authentication is off, so that is whoever is at
/// this machine).
fn config(data: &Path, webhook: Option<&str>) -> String {
    let server = peers_dir().unwrap().join("python_server.py");
    let webhook = webhook
        .map(|u| format!("webhook = {}\n", toml_string(u)))
        .unwrap_or_default();
    format!(
        r#"[gateway]
listen = "127.0.0.1:0"
data_dir = {data}

[servers.py]
command = {python}
args = [{server}, "stdio"]

[approvals]
window = "30s"
{webhook}
[[rules]]
name = "echo-asks-the-caller"
effect = "ask"
tools = ["py__echo"]

[[rules]]
name = "add-asks-ops"
effect = "ask"
tools = ["py__add"]
approvers = ["group:ops", "identity:ops"]

[[rules]]
name = "slow-asks-the-operator"
effect = "ask"
tools = ["py__slow"]
approvers = ["identity:operator"]
"#,
        data = toml_string(&data.to_string_lossy()),
        python = toml_string(&python().unwrap().to_string_lossy()),
        server = toml_string(&server.to_string_lossy()),
    )
}

fn start_gateway(dir: &Path, config: &Path, log: &str) -> GatewayProcess {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .log(log)
        .start()
        .unwrap()
}

fn setup(webhook: Option<&str>) -> (ScratchDir, std::path::PathBuf, GatewayProcess) {
    let dir = ScratchDir::new("approvals").unwrap();
    let config_path = dir.path().join("manifold.toml");
    std::fs::write(&config_path, config(&dir.path().join("data"), webhook)).unwrap();
    let gateway = start_gateway(dir.path(), &config_path, "gateway.log");
    (dir, config_path, gateway)
}

#[derive(Debug, Clone, Copy)]
enum Driver {
    Python,
    /// The TypeScript SDK 1.x client (legacy era only).
    TypeScript,
    /// The TypeScript SDK 2.x client, in the plan's mode.
    TypeScriptV2,
}

/// Starts a client with a plan; its report comes from [`report_of`].
fn spawn_client(driver: Driver, plan: &Value) -> ClientProcess {
    let scripts = workspace_root().join("crates/manifold/tests/clients");
    let mut command = match driver {
        Driver::Python => {
            let mut c = Command::new(python().unwrap());
            c.arg(scripts.join("approval_py_client.py"));
            c
        }
        Driver::TypeScript | Driver::TypeScriptV2 => {
            let mut c = Command::new(node().unwrap());
            c.arg(scripts.join("approval_ts_client.mjs"));
            c
        }
    };
    let sdk = if matches!(driver, Driver::TypeScriptV2) {
        "v2"
    } else {
        "v1"
    };
    let mut plan = plan.clone();
    plan["sdk"] = sdk.into();
    plan["modules"] = peers_dir()
        .unwrap()
        .join("node_modules")
        .to_string_lossy()
        .into();
    command.arg(plan.to_string());
    ClientProcess::spawn(command).unwrap()
}

fn report_of(child: ClientProcess) -> Value {
    let run = child.finish(HANG_GUARD).unwrap();
    run.report().unwrap_or_else(|| {
        panic!(
            "the client reported no JSON: {}\n{}",
            run.stdout, run.stderr
        )
    })
}

/// Whether the client ended without its call succeeding: it reported an error, or it failed
/// outright (its connection died under it).
fn client_failed(child: ClientProcess) -> bool {
    let run = child.finish(HANG_GUARD).unwrap();
    match run.report() {
        Some(report) => report["calls"][0].get("error").is_some(),
        None => !run.status.success(),
    }
}

fn run_client(driver: Driver, plan: &Value) -> Value {
    report_of(spawn_client(driver, plan))
}

fn echo(message: &str) -> Value {
    json!({"name": "py__echo", "arguments": {"message": message}})
}

/// `manifold approvals ARGS --config CONFIG`: exit code and stdout (stderr appended).
fn approvals_cli(config: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(MANIFOLD)
        .arg("approvals")
        .args(args)
        .arg("--config")
        .arg(config)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn ledger_row(config: &Path, id: &str) -> Value {
    let (code, out) = approvals_cli(config, &["show", id, "--json"]);
    assert_eq!(code, 0, "{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Waits for the one pending question in the ledger and returns its id.
fn pending_id(config: &Path) -> String {
    let started = Instant::now();
    loop {
        let (code, out) = approvals_cli(config, &["list", "--json"]);
        assert_eq!(code, 0, "{out}");
        let rows: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        if let Some(id) = rows
            .as_array()
            .and_then(|r| r.first())
            .and_then(|r| r["id"].as_str())
        {
            return id.to_owned();
        }
        assert!(started.elapsed() < HANG_GUARD, "no question was held");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_ran_once(call: &Value, text: &str, channel: &str) -> String {
    assert!(call.get("error").is_none(), "the call was refused: {call}");
    assert_eq!(call["isError"], false, "{call}");
    assert_eq!(call["texts"], json!([text]), "{call}");
    let meta = &call["meta"]["io.manifold/approval"];
    assert_eq!(meta["channel"], channel, "{call}");
    meta["id"].as_str().unwrap().to_owned()
}

fn assert_refused(call: &Value, outcome: &str) -> Value {
    let error = &call["error"];
    assert_eq!(error["code"], -32007, "{call}");
    let data = &error["data"];
    assert_eq!(data["code"], "approval_required", "{call}");
    assert_eq!(data["outcome"], outcome, "{call}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("py__echo") || message.contains("py__add"),
        "the message names the tool: {message}"
    );
    data.clone()
}

async fn inline_outcomes(driver: Driver, mode: &str, channel: &str) {
    let (_dir, config, _gateway) = setup(None);
    let url = _gateway.url().to_owned();
    let plan = |answer: &str, message: &str| json!({"url": url, "mode": mode, "answer": answer, "calls": [echo(message)]});
    let accepted = run_client(driver, &plan("accept", "ship it"));
    let call = &accepted["calls"][0];
    let id = assert_ran_once(call, "ship it", channel);
    let asked = call["asked"][0].as_str().unwrap_or_default();
    for shown in ["py__echo", "\"py\"", "ship it", id.as_str()] {
        assert!(asked.contains(shown), "the question shows {shown}: {asked}");
    }
    let row = ledger_row(&config, &id);
    assert_eq!(row["state"], "used", "{row}");
    assert_eq!(row["channel"], channel, "{row}");

    let declined = run_client(driver, &plan("decline", "not this"));
    let data = assert_refused(&declined["calls"][0], "rejected");
    assert_eq!(data["route"], channel);
    let row = ledger_row(&config, data["approval_id"].as_str().unwrap());
    assert_eq!(row["state"], "rejected", "{row}");

    let dismissed = run_client(driver, &plan("cancel", "maybe"));
    let data = assert_refused(&dismissed["calls"][0], "cancelled");
    let row = ledger_row(&config, data["approval_id"].as_str().unwrap());
    assert_eq!(row["state"], "cancelled", "{row}");
}

#[tokio::test]
async fn a_legacy_python_client_accepts_declines_and_dismisses_the_question_inline() {
    inline_outcomes(Driver::Python, "legacy", "elicitation").await;
}

#[tokio::test]
async fn a_modern_python_client_answers_the_question_through_input_required() {
    inline_outcomes(Driver::Python, "auto", "input_required").await;
}

#[tokio::test]
async fn the_typescript_sdk_client_accepts_declines_and_dismisses_the_question_inline() {
    inline_outcomes(Driver::TypeScript, "legacy", "elicitation").await;
}

#[tokio::test]
async fn the_typescript_sdk_v2_client_answers_the_question_in_both_eras() {
    inline_outcomes(Driver::TypeScriptV2, "legacy", "elicitation").await;
    inline_outcomes(Driver::TypeScriptV2, "auto", "input_required").await;
}

/// One HTTP request received by a throwaway server: its body.
fn receive_one_post(listener: std::net::TcpListener) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .unwrap();
        String::from_utf8(body).unwrap()
    })
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_is_held_until_manifold_approvals_answers_and_the_webhook_hears_of_it()
 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let posted = receive_one_post(listener);
    let (_dir, config, gateway) = setup(Some(&hook));
    let add = json!({"name": "py__add", "arguments": {"a": 2, "b": 3}, "progress": true});
    let client = spawn_client(
        Driver::Python,
        &json!({"url": gateway.url(), "mode": "legacy", "answer": null, "calls": [add]}),
    );
    let id = pending_id(&config);
    let body: Value = serde_json::from_str(&posted.join().unwrap()).unwrap();
    assert_eq!(body["id"], id.as_str());
    assert_eq!(body["tool"], "py__add");
    assert_eq!(body["server"], "py");
    assert_eq!(body["approvers"], json!(["group:ops", "identity:ops"]));
    assert!(
        body.get("arguments").is_none(),
        "the webhook gets a digest only: {body}"
    );
    assert_eq!(body["arguments_sha256"].as_str().unwrap().len(), 64);

    // Only ops may answer, and the anonymous caller's client cannot be asked.
    let (code, out) = approvals_cli(&config, &["approve", &id, "--as", "intern"]);
    assert_eq!(code, 2, "{out}");
    let (code, out) = approvals_cli(&config, &["approve", &id, "--as", "ops"]);
    assert_eq!(code, 0, "{out}");

    let report = report_of(client);
    let call = &report["calls"][0];
    assert_eq!(assert_ran_once(call, "5", "out_of_band"), id);
    assert_eq!(call["meta"]["io.manifold/approval"]["approver"], "ops");
    let progress = call["progress"].as_array().unwrap();
    assert!(
        progress.iter().any(|m| m.as_str().unwrap().contains(&id)
            && m.as_str().unwrap().contains("manifold approvals approve")),
        "progress names the approval and where to answer: {progress:?}"
    );
    assert_eq!(ledger_row(&config, &id)["state"], "used");
    let metrics = RawHttp::new(gateway.url())
        .get("/metrics")
        .unwrap()
        .decoded_body();
    assert!(
        metrics.contains(
            r#"manifold_approvals_total{upstream="py",channel="out_of_band",outcome="approved"} 1"#
        ),
        "{metrics}"
    );
    // The audit trail has the decision on the call's row.
    let on_record = format!("{id} approved by ops via out_of_band");
    ServeCommand::new(MANIFOLD, config.parent().unwrap())
        .config(&config)
        .audit_search_until(&["--tool", "add"], &on_record, HANG_GUARD)
        .unwrap();

    // A question only the caller may answer, from a client that cannot be asked, without
    // authentication: whoever runs manifold approvals answers for the anonymous caller.
    let client = spawn_client(
        Driver::Python,
        &json!({"url": gateway.url(), "mode": "legacy", "answer": null, "calls": [echo("x")]}),
    );
    let id = pending_id(&config);
    let (code, out) = approvals_cli(
        &config,
        &["deny", &id, "--as", "operator", "--reason", "not today"],
    );
    assert_eq!(code, 0, "{out}");
    let report = report_of(client);
    let data = assert_refused(&report["calls"][0], "rejected");
    assert_eq!(data["approval_id"], id.as_str());
    assert_eq!(data["route"], "out_of_band");
    let message = report["calls"][0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("operator rejected it (not today)"),
        "{message}"
    );
}

/// The value of `name="csrf"` in a dashboard page.
fn csrf_of(html: &str) -> String {
    let at = html
        .find(r#"name="csrf" value=""#)
        .expect("the page has a CSRF token");
    let rest = &html[at + r#"name="csrf" value=""#.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn a_url_mode_client_is_sent_the_dashboard_page_of_its_held_call_and_the_page_answers_it() {
    let (_dir, config, gateway) = setup(None);
    let base = gateway.base().to_owned();
    let slow =
        json!({"name": "py__slow", "arguments": {"seconds": 0, "steps": 1}, "progress": true});
    // The Python SDK's client declares form and URL elicitation; the approver is not the caller,
    // so the question goes out of band and the client is sent the page that answers it.
    let client = spawn_client(
        Driver::Python,
        &json!({"url": gateway.url(), "mode": "legacy", "answer": "accept", "calls": [slow]}),
    );
    let id = pending_id(&config);
    let page = format!("{base}/ui/approvals/{id}");
    let http = manifold_testkit::http_client();
    let opened = http.get(&page).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    let cookie = opened
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap()
        .to_owned();
    let html = opened.text().await.unwrap();
    assert!(
        html.contains("py/py__slow") && html.contains("&#34;seconds&#34;: 0"),
        "{html}"
    );
    let approved = http
        .post(format!("{page}/approve"))
        .header("cookie", &cookie)
        .header("origin", &base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={}", csrf_of(&html)))
        .send()
        .await
        .unwrap();
    assert!(approved.status().is_success(), "{}", approved.status());

    let report = report_of(client);
    let call = &report["calls"][0];
    assert_eq!(
        assert_ran_once(call, "slept 0.0s in 1 steps", "out_of_band"),
        id
    );
    assert_eq!(call["meta"]["io.manifold/approval"]["approver"], "operator");
    assert_eq!(call["urls"], json!([page]), "{call}");
    let progress = call["progress"].as_array().unwrap();
    assert!(
        progress.iter().any(|m| m.as_str().unwrap().contains(&page)),
        "progress names the dashboard page: {progress:?}"
    );
    assert_eq!(ledger_row(&config, &id)["answered_by"], "operator");
}

#[tokio::test]
async fn cancelling_a_call_while_its_question_is_open_withdraws_the_question() {
    let (_dir, config, gateway) = setup(None);
    let report = run_client(
        Driver::Python,
        &json!({"url": gateway.url(), "mode": "legacy", "answer": "hang", "cancel": echo("held")}),
    );
    let cancel = &report["cancel"];
    assert_eq!(cancel["questionArrived"], true, "{report}");
    assert_eq!(cancel["callEnded"], "cancelled", "{report}");
    assert_eq!(cancel["questionWithdrawn"], true, "{report}");
    let (code, out) = approvals_cli(&config, &["list", "--all", "--json"]);
    assert_eq!(code, 0, "{out}");
    let started = Instant::now();
    loop {
        let (_, out) = approvals_cli(&config, &["list", "--all", "--json"]);
        let rows: Value = serde_json::from_str(&out).unwrap();
        if rows[0]["state"] == "cancelled" {
            break;
        }
        assert!(
            started.elapsed() < HANG_GUARD,
            "the question is not cancelled: {rows}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test]
async fn a_gateway_restarted_while_a_call_is_held_fails_the_call_and_the_ledger_says_abandoned() {
    let (dir, config, mut gateway) = setup(None);
    let add = json!({"name": "py__add", "arguments": {"a": 1, "b": 1}});
    let client = spawn_client(
        Driver::Python,
        &json!({"url": gateway.url(), "mode": "legacy", "answer": null, "calls": [add]}),
    );
    let id = pending_id(&config);
    gateway.signal(nix::sys::signal::Signal::SIGKILL).unwrap();
    assert!(
        client_failed(client),
        "the held call fails when its gateway dies"
    );
    let _ = gateway.try_wait();
    let _restarted = start_gateway(dir.path(), &config, "gateway-2.log");
    let row = ledger_row(&config, &id);
    assert_eq!(row["state"], "abandoned", "{row}");
    // An abandoned question cannot be approved any more.
    let (code, out) = approvals_cli(&config, &["approve", &id, "--as", "ops"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("abandoned"), "{out}");
}
