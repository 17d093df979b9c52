//! Why: Manifold exists to put many real MCP servers behind one endpoint that real MCP clients use as
//! if it were one server. This drives the clients people actually run (the Python SDK in every
//! negotiation mode, the TypeScript SDK v1 and v2, the inspector CLI) through `manifold serve` over
//! Streamable HTTP, and the Python SDK through `manifold stdio`, while one configuration fronts, at
//! once, server-everything over stdio and over Streamable HTTP, server-filesystem, mcp-server-time,
//! mcp-server-git and the Python SDK server. Each client lists, calls one tool of every server,
//! follows progress, cancels, answers elicitation and sampling with its own handler, reads a
//! resource and gets a prompt; every check compares exact content.
//!
//! The gateway and the HTTP servers are started once and shared by the tests that run at the same
//! time (see [`shared_fixture`]); the last test to finish stops them and proves no process is left.
//! Client runs take turns (see [`client_turn`]), except in the one test that runs four clients at
//! once without the tools that ask the client.
//! The client scripts (tests/clients/) only perform steps and report what they saw; the scenario and
//! the expected content live here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures::StreamExt;
use manifold_testkit::{
    ChildGuard, GatewayProcess, ScratchDir, ServeCommand, free_port, loopback_preload, node,
    npm_package_entry, peers_dir, process_is_running, python, spawn_http_peer, venv_bin,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// Bounds one client run that would otherwise hang the suite; never a performance assertion.
const CLIENT_HANG_GUARD: Duration = Duration::from_secs(180);
/// Bounds the gateway's start (it waits up to 30 s for its servers) and its orderly stop.
const GATEWAY_HANG_GUARD: Duration = Duration::from_secs(90);
/// How long processes may take to disappear after the process that started them stopped.
const EXIT_HANG_GUARD: Duration = Duration::from_secs(20);

/// What the clients' elicitation handlers answer for a field called `name`.
const ELICITED_NAME: &str = "Ada Lovelace";
/// What the clients' sampling handlers claim their model said.
const SAMPLED_TEXT: &str = "forty-two, said the client's own model";
/// The model the clients' sampling handlers claim to have used.
const SAMPLING_MODEL: &str = "gateway-test-model";

const KNOWN_FILE_TEXT: &str = "a file the gateway test knows\nsecond line, ünïcode\n";
const COMMIT_MESSAGE: &str = "the one commit of the gateway test";
/// A fixed commit date makes git_log's whole text predictable.
const COMMIT_DATE: &str = "2026-01-02T03:04:05+00:00";

const EVERYTHING_DOC_URI: &str = "demo://resource/static/document/architecture.md";
const PYTHON_RESOURCE_URI: &str = "test://python/hello";

/// The long-running operation the cancellation scenario starts, cancels and runs again: four
/// progress steps, so the first arrives well before the end.
const CANCELLED_OPERATION: (f64, u32) = (2.0, 4);
/// The long-running operation the progress scenario follows to its end.
const FOLLOWED_OPERATION: (f64, u32) = (0.6, 3);

// ---------------------------------------------------------------------------------------------
// Scratch space and processes

/// Live processes (zombies excluded) whose working directory is `dir` or below it, with their
/// command lines. The gateway's stdio servers inherit its working directory, so this finds every
/// process a gateway started there, even after it was orphaned.
fn processes_working_in(dir: &Path) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .filter(|pid| process_is_running(*pid))
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (pid, cmdline.trim().to_owned())
        })
        .collect()
}

/// Waits until no process works in `dir`; returns the ones still there after the hang guard.
fn wait_until_nothing_works_in(dir: &Path) -> Vec<(u32, String)> {
    let deadline = Instant::now() + EXIT_HANG_GUARD;
    loop {
        let left = processes_working_in(dir);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

fn git_repo_with_one_commit(dir: &Path) -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "Manifold Test")
            .env("GIT_AUTHOR_EMAIL", "test@manifold.invalid")
            .env("GIT_COMMITTER_NAME", "Manifold Test")
            .env("GIT_COMMITTER_EMAIL", "test@manifold.invalid")
            .env("GIT_AUTHOR_DATE", COMMIT_DATE)
            .env("GIT_COMMITTER_DATE", COMMIT_DATE)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README.txt"), "a file for mcp-server-git\n").unwrap();
    git(&["add", "README.txt"]);
    git(&["commit", "-q", "-m", COMMIT_MESSAGE]);
    git(&["rev-parse", "HEAD"]).trim().to_owned()
}

/// A string as a TOML basic string (JSON's escapes are a subset TOML accepts).
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn npm_entry(package: &str) -> String {
    npm_package_entry(package)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

// ---------------------------------------------------------------------------------------------
// The gateway's world

/// What the configuration points at; shared by `manifold serve` and `manifold stdio` runs.
struct Upstreams {
    known_file: PathBuf,
    repo: PathBuf,
    commit: String,
    everything_url: String,
    python_url: String,
}

impl Upstreams {
    /// One configuration fronting every server at once.
    fn config(&self, data_dir: &Path) -> String {
        let node = node().unwrap();
        let node = node.to_string_lossy();
        let files_dir = self.known_file.parent().unwrap().to_string_lossy();
        format!(
            r#"[gateway]
listen = "127.0.0.1:0"
data_dir = {data}

[servers.everything]
command = {node}
args = [{everything}, "stdio"]

[servers.everything_http]
url = {everything_url}

[servers.filesystem]
command = {node}
args = [{filesystem}, {files}]

[servers.time]
command = {time}

[servers.git]
command = {git}
args = ["--repository", {repo}]

[servers.python]
url = {python_url}
"#,
            data = toml_string(&data_dir.to_string_lossy()),
            node = toml_string(&node),
            everything = toml_string(&npm_entry("@modelcontextprotocol/server-everything")),
            everything_url = toml_string(&self.everything_url),
            filesystem = toml_string(&npm_entry("@modelcontextprotocol/server-filesystem")),
            files = toml_string(&files_dir),
            time = toml_string(&venv_bin("mcp-server-time").unwrap().to_string_lossy()),
            git = toml_string(&venv_bin("mcp-server-git").unwrap().to_string_lossy()),
            repo = toml_string(&self.repo.to_string_lossy()),
            python_url = toml_string(&self.python_url),
        )
    }
}

/// `manifold serve`, stopped the way an operator stops it (SIGTERM), killed if that hangs.
struct Gateway(GatewayProcess);

impl Gateway {
    /// Starts the gateway in `dir` (its stdio servers inherit that working directory) and returns
    /// it with the URL it printed.
    fn start(dir: &Path, config: &Path) -> (Gateway, String) {
        let process = ServeCommand::new(MANIFOLD, dir)
            .config(config)
            .env("RUST_LOG", "info")
            .log("gateway.log")
            .start_hang_guard(GATEWAY_HANG_GUARD)
            .start()
            .unwrap();
        let url = process.url().to_owned();
        (Gateway(process), url)
    }

    /// SIGTERM, then waits for the orderly exit; SIGKILL if it does not come. Returns whether the
    /// gateway stopped by itself.
    fn stop(mut self) -> bool {
        signal(self.0.pid(), "TERM");
        if self.0.wait_for_exit(GATEWAY_HANG_GUARD).is_ok() {
            return true;
        }
        let _ = self.0.kill();
        false
    }
}

/// The gateway, its HTTP servers and the files its servers serve, shared by concurrent tests.
struct Fixture {
    url: String,
    upstreams: Upstreams,
    gateway: Option<Gateway>,
    everything_http: Option<ChildGuard>,
    python_http: Option<ChildGuard>,
    dir: ScratchDir,
}

impl Fixture {
    async fn start() -> Fixture {
        let dir = scratch("gateway");
        let files = dir.path().join("files");
        std::fs::create_dir_all(&files).unwrap();
        let known_file = files.join("known.txt");
        std::fs::write(&known_file, KNOWN_FILE_TEXT).unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let commit = git_repo_with_one_commit(&repo);

        // server-everything binds every interface unless the preload keeps it on loopback.
        let everything_port = free_port().unwrap();
        let preload = loopback_preload().unwrap();
        let everything_http = spawn_http_peer(
            node().unwrap(),
            [
                "--require".to_owned(),
                preload.to_string_lossy().into_owned(),
                npm_entry("@modelcontextprotocol/server-everything"),
                "streamableHttp".to_owned(),
            ],
            [("PORT", everything_port.to_string())],
            everything_port,
        );
        let python_port = free_port().unwrap();
        let python_http = spawn_http_peer(
            python().unwrap(),
            [
                peers_dir()
                    .unwrap()
                    .join("python_server.py")
                    .to_string_lossy()
                    .into_owned(),
                "http".to_owned(),
                "--port".to_owned(),
                python_port.to_string(),
            ],
            Vec::<(String, String)>::new(),
            python_port,
        );
        let (everything_http, python_http) = tokio::join!(everything_http, python_http);
        let upstreams = Upstreams {
            known_file,
            repo,
            commit,
            everything_url: format!("http://127.0.0.1:{everything_port}/mcp"),
            python_url: format!("http://127.0.0.1:{python_port}/mcp"),
        };
        let config = dir.path().join("manifold.toml");
        std::fs::write(&config, upstreams.config(&dir.path().join("data"))).unwrap();
        let (gateway, url) = Gateway::start(dir.path(), &config);

        // The leftover check at the end finds the gateway's children by working directory; make
        // sure it sees them now (the gateway and its four stdio servers at least).
        let working = processes_working_in(dir.path());
        assert!(
            working.len() >= 5,
            "expected the gateway and its 4 stdio servers working in {}: {working:?}",
            dir.path().display()
        );
        Fixture {
            url,
            upstreams,
            gateway: Some(gateway),
            everything_http: Some(everything_http.unwrap()),
            python_http: Some(python_http.unwrap()),
            dir,
        }
    }

    fn log(&self) -> String {
        self.gateway.as_ref().map(|g| g.0.log()).unwrap_or_default()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let log = self.log();
        let stopped_by_itself = self.gateway.take().map(Gateway::stop);
        drop(self.everything_http.take());
        drop(self.python_http.take());
        let left = wait_until_nothing_works_in(self.dir.path());
        for (pid, _) in &left {
            signal(*pid, "KILL");
        }
        if std::thread::panicking() {
            return;
        }
        assert_eq!(
            stopped_by_itself,
            Some(true),
            "manifold serve did not stop within {GATEWAY_HANG_GUARD:?} of SIGTERM; its log:\n{log}"
        );
        assert!(
            left.is_empty(),
            "processes outlived the gateway that started them: {left:?}"
        );
    }
}

/// The one fixture of this test binary while any test uses it: tests running at the same time share
/// one gateway and one set of HTTP servers, and the last one to finish stops them all (a `static`
/// that owned them would never run their destructors, leaving the processes behind).
async fn shared_fixture() -> Arc<Fixture> {
    static SHARED: tokio::sync::Mutex<Weak<Fixture>> = tokio::sync::Mutex::const_new(Weak::new());
    let mut slot = SHARED.lock().await;
    if let Some(fixture) = slot.upgrade() {
        return fixture;
    }
    let fixture = Arc::new(Fixture::start().await);
    *slot = Arc::downgrade(&fixture);
    fixture
}

/// One client run at a time. A shared stdio server such as server-everything sends its
/// elicitation and sampling requests with nothing tying them to the call that caused them, so the
/// gateway can route them only while that call is the server's one call in flight; with another
/// client's call to the same server in flight it refuses the question ("Manifold cannot tell which
/// client this elicitation/create is for ... give the server scope = \"session\""). Tests hold
/// their fixture while they wait, so the gateway stays up between them.
async fn client_turn() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

// ---------------------------------------------------------------------------------------------
// Scenarios

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
}

impl Era {
    fn revision(self) -> &'static str {
        match self {
            Era::Legacy => "2025-11-25",
            Era::Modern => "2026-07-28",
        }
    }
}

/// Which steps a client run takes, decided by what the client can do.
#[derive(Debug, Clone, Copy)]
struct Scope {
    era: Era,
    /// Tools that ask the client (elicitation, sampling). Only one client may call a shared stdio
    /// server's asking tool at a time: see [`client_turn`].
    questions: bool,
}

impl Scope {
    fn full(era: Era) -> Scope {
        Scope {
            era,
            questions: true,
        }
    }
}

fn exposed_uri(prefix: &str, uri: &str) -> String {
    format!("{prefix}+{uri}")
}

fn echo_message(server: &str) -> String {
    format!("through the gateway to {server}, ünïcode ✓")
}

const SAMPLING_PROMPT: &str = "What is 6 times 7?";
const SUMMARIZED_TEXT: &str = "a long text the client's model summarizes";

fn long_operation(operation: (f64, u32)) -> Value {
    json!({ "duration": operation.0, "steps": operation.1 })
}

/// The steps every full client run takes; the scripts report, `check_full_report` judges.
fn full_plan(upstreams: &Upstreams, scope: Scope) -> Value {
    let mut calls = vec![json!({
        "name": "everything__echo",
        "arguments": { "message": echo_message("everything") }
    })];
    {
        calls.push(json!({
            "name": "everything_http__echo",
            "arguments": { "message": echo_message("everything_http") }
        }));
    }
    calls.extend([
        json!({
            "name": "filesystem__read_text_file",
            "arguments": { "path": upstreams.known_file.to_string_lossy() }
        }),
        json!({ "name": "time__get_current_time", "arguments": { "timezone": "Asia/Tokyo" } }),
        json!({ "name": "git__git_log", "arguments": { "repo_path": upstreams.repo.to_string_lossy() } }),
        json!({ "name": "python__echo", "arguments": { "message": echo_message("python") } }),
    ]);
    let mut reads = vec![exposed_uri("python", PYTHON_RESOURCE_URI)];
    {
        reads.insert(0, exposed_uri("everything", EVERYTHING_DOC_URI));
    }
    let asks = if scope.questions {
        json!([
            { "name": "everything__trigger-elicitation-request", "arguments": {} },
            {
                "name": "everything__trigger-sampling-request",
                "arguments": { "prompt": SAMPLING_PROMPT, "maxTokens": 50 }
            },
            { "name": "python__ask_name", "arguments": {} },
            { "name": "python__summarize", "arguments": { "text": SUMMARIZED_TEXT } }
        ])
    } else {
        json!([])
    };
    json!({
        "mode": match scope.era { Era::Legacy => "legacy", Era::Modern => "auto" },
        "answers": { "name": ELICITED_NAME, "sampled": SAMPLED_TEXT, "model": SAMPLING_MODEL },
        "calls": calls,
        "progress": {
            "name": "everything__trigger-long-running-operation",
            "arguments": long_operation(FOLLOWED_OPERATION)
        },
        "cancel": {
            "name": "everything__trigger-long-running-operation",
            "arguments": long_operation(CANCELLED_OPERATION)
        },
        "asks": asks,
        "reads": reads,
        "prompts": [
            { "name": "everything__args-prompt", "arguments": { "city": "Paris" } },
            { "name": "python__greeting", "arguments": { "name": "Bob" } }
        ]
    })
}

fn set(plan: &mut Value, key: &str, value: Value) {
    plan.as_object_mut().unwrap().insert(key.to_owned(), value);
}

// ---------------------------------------------------------------------------------------------
// Running clients

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("clients")
}

fn node_modules() -> String {
    peers_dir()
        .unwrap()
        .join("node_modules")
        .to_string_lossy()
        .into_owned()
}

/// Output of one client process that ran to its end.
struct ClientRun {
    success: bool,
    stdout: String,
    stderr: String,
}

async fn run_process(program: &Path, args: &[String], cwd: Option<&Path>) -> ClientRun {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let out = tokio::time::timeout(CLIENT_HANG_GUARD, command.output())
        .await
        .unwrap_or_else(|_| panic!("{program:?} {args:?} hung"))
        .unwrap();
    ClientRun {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a client script with a plan and returns the report it printed as its last line.
async fn run_script(label: &str, program: &Path, script: &str, plan: &Value) -> Value {
    let args = vec![
        clients_dir().join(script).to_string_lossy().into_owned(),
        plan.to_string(),
    ];
    let run = run_process(program, &args, None).await;
    assert!(
        run.success,
        "{label}: the client failed\nstdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    let last = run.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "{label}: unreadable report ({e})\nstdout: {}\nstderr: {}",
            run.stdout, run.stderr
        )
    })
}

async fn python_client(label: &str, target: Value, mode: &str, mut plan: Value) -> Value {
    set(&mut plan, "target", target);
    set(&mut plan, "mode", json!(mode));
    run_script(label, &python().unwrap(), "py_client.py", &plan).await
}

async fn ts_client(label: &str, script: &str, url: &str, mode: &str, mut plan: Value) -> Value {
    set(&mut plan, "url", json!(url));
    set(&mut plan, "modules", json!(node_modules()));
    set(&mut plan, "mode", json!(mode));
    run_script(label, &node().unwrap(), script, &plan).await
}

// ---------------------------------------------------------------------------------------------
// Judging reports

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// Progress events as (progress, total), whatever number type the client used.
fn events(v: &Value) -> Vec<(f64, f64)> {
    v.as_array()
        .unwrap_or_else(|| panic!("no progress events: {v}"))
        .iter()
        .map(|e| (e[0].as_f64().unwrap(), e[1].as_f64().unwrap()))
        .collect()
}

fn steps(total: u32) -> Vec<(f64, f64)> {
    (1..=total)
        .map(|i| (f64::from(i), f64::from(total)))
        .collect()
}

/// A call's report must be a successful result with exactly these text blocks.
fn assert_texts(label: &str, what: &str, report: &Value, expected: &[&str]) {
    assert!(
        report.get("error").is_none(),
        "{label}: {what} failed: {report}"
    );
    assert_eq!(report["isError"], false, "{label}: {what}: {report}");
    assert_eq!(strings(&report["texts"]), expected, "{label}: {what}");
}

fn day_of_week(year: i64, month: i64, day: i64) -> &'static str {
    const OFFSETS: [i64; 12] = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4];
    const NAMES: [&str; 7] = [
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
    ];
    let y = if month < 3 { year - 1 } else { year };
    let index = (y + y / 4 - y / 100 + y / 400 + OFFSETS[(month - 1) as usize] + day) % 7;
    NAMES[index as usize]
}

/// mcp-server-time's answer for Asia/Tokyo: the zone, a Tokyo timestamp, the weekday of that date,
/// no DST, and a text block saying the same as the structured content.
fn assert_tokyo_time(label: &str, report: &Value) {
    assert!(
        report.get("error").is_none(),
        "{label}: time failed: {report}"
    );
    assert_eq!(report["isError"], false, "{label}: {report}");
    let structured = &report["structured"];
    assert_eq!(structured["timezone"], "Asia/Tokyo", "{label}: {report}");
    assert_eq!(structured["is_dst"], false, "{label}: {report}");
    let datetime = structured["datetime"].as_str().unwrap();
    let (date, time) = datetime.split_once('T').unwrap();
    assert!(
        time.len() == 14 && time.ends_with("+09:00"),
        "{label}: {datetime}"
    );
    let ymd: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    assert_eq!(ymd.len(), 3, "{label}: {datetime}");
    assert_eq!(
        structured["day_of_week"],
        day_of_week(ymd[0], ymd[1], ymd[2]),
        "{label}: {report}"
    );
    let texts = strings(&report["texts"]);
    assert_eq!(texts.len(), 1, "{label}: {report}");
    let from_text: Value = serde_json::from_str(&texts[0]).unwrap();
    assert_eq!(&from_text, structured, "{label}");
}

fn git_log_text(upstreams: &Upstreams) -> String {
    format!(
        "Commit history:\nCommit: {}\nAuthor: Manifold Test\nDate: 2026-01-02 03:04:05+00:00\nMessage: {COMMIT_MESSAGE}\n\n",
        upstreams.commit
    )
}

fn everything_document() -> String {
    let entry = npm_package_entry("@modelcontextprotocol/server-everything").unwrap();
    std::fs::read_to_string(entry.parent().unwrap().join("docs").join("architecture.md")).unwrap()
}

/// The lists carry the built-in tools first and something of every server.
fn assert_lists(label: &str, report: &Value) {
    let tools = strings(&report["tools"]);
    assert_eq!(
        tools[..3],
        [
            "manifold_health",
            "manifold_search_tools",
            "manifold_call_tool"
        ],
        "{label}"
    );
    for tool in [
        "everything__echo",
        "everything__trigger-long-running-operation",
        "everything__trigger-elicitation-request",
        "everything__trigger-sampling-request",
        "everything_http__echo",
        "filesystem__read_text_file",
        "git__git_log",
        "git__git_status",
    ] {
        assert!(
            tools.iter().any(|t| t == tool),
            "{label}: no {tool} in {tools:?}"
        );
    }
    let of = |prefix: &str| -> Vec<&str> {
        tools
            .iter()
            .filter(|t| t.starts_with(prefix))
            .map(String::as_str)
            .collect()
    };
    assert_eq!(
        of("time__"),
        ["time__get_current_time", "time__convert_time"],
        "{label}"
    );
    assert_eq!(
        of("python__"),
        [
            "python__echo",
            "python__add",
            "python__slow",
            "python__ask_name",
            "python__summarize",
            "python__list_roots",
            "python__open_link"
        ],
        "{label}"
    );

    let resources = strings(&report["resources"]);
    for uri in [
        exposed_uri("everything", EVERYTHING_DOC_URI),
        exposed_uri("everything-http", EVERYTHING_DOC_URI),
        exposed_uri("python", PYTHON_RESOURCE_URI),
    ] {
        assert!(
            resources.contains(&uri),
            "{label}: no {uri} in {resources:?}"
        );
    }
    let prompts = strings(&report["prompts"]);
    for prompt in [
        "everything__args-prompt",
        "everything_http__args-prompt",
        "python__greeting",
    ] {
        assert!(
            prompts.iter().any(|p| p == prompt),
            "{label}: no {prompt} in {prompts:?}"
        );
    }
}

/// One tool of every server, answered with exactly what that server says.
fn assert_calls(label: &str, report: &Value, upstreams: &Upstreams) {
    let calls = &report["calls"];
    assert_texts(
        label,
        "everything__echo",
        &calls["everything__echo"],
        &[&format!("Echo: {}", echo_message("everything"))],
    );
    {
        assert_texts(
            label,
            "everything_http__echo",
            &calls["everything_http__echo"],
            &[&format!("Echo: {}", echo_message("everything_http"))],
        );
    }
    let read = &calls["filesystem__read_text_file"];
    assert_texts(
        label,
        "filesystem__read_text_file",
        read,
        &[KNOWN_FILE_TEXT],
    );
    assert_eq!(
        read["structured"],
        json!({ "content": KNOWN_FILE_TEXT }),
        "{label}"
    );
    assert_tokyo_time(label, &calls["time__get_current_time"]);
    assert_texts(
        label,
        "git__git_log",
        &calls["git__git_log"],
        &[&git_log_text(upstreams)],
    );
    let echoed = &calls["python__echo"];
    assert_texts(label, "python__echo", echoed, &[&echo_message("python")]);
    assert_eq!(
        echoed["structured"],
        json!({ "result": echo_message("python") }),
        "{label}"
    );
}

fn operation_text(operation: (f64, u32)) -> String {
    format!(
        "Long running operation completed. Duration: {} seconds, Steps: {}.",
        operation.0, operation.1
    )
}

/// Progress of a followed call arrived, every step in order, before its result.
fn assert_progress(label: &str, report: &Value) {
    let progress = &report["progress"];
    assert_texts(
        label,
        "the long operation",
        progress,
        &[&operation_text(FOLLOWED_OPERATION)],
    );
    assert_eq!(
        events(&progress["events"]),
        steps(FOLLOWED_OPERATION.1),
        "{label}"
    );
}

/// The cancelled call ended as cancelled after its first progress, no progress of it reached the
/// client afterwards, and the same operation run again on the same connection got its own steps.
fn assert_cancelled(label: &str, report: &Value) {
    let cancel = &report["cancel"];
    assert_eq!(cancel["outcome"], "cancelled", "{label}: {cancel}");
    let before = events(&cancel["before"]);
    assert_eq!(
        before.first(),
        Some(&(1.0, f64::from(CANCELLED_OPERATION.1))),
        "{label}: {cancel}"
    );
    assert!(
        before.len() < CANCELLED_OPERATION.1 as usize,
        "{label}: the cancelled call ran to its end: {cancel}"
    );
    assert_eq!(cancel["stray"], json!([]), "{label}: {cancel}");
    let after = &cancel["after"];
    assert_texts(
        label,
        "the operation after the cancel",
        after,
        &[&operation_text(CANCELLED_OPERATION)],
    );
    assert_eq!(
        events(&after["events"]),
        steps(CANCELLED_OPERATION.1),
        "{label}"
    );
}

fn the_one_question<'a>(label: &str, ask: &'a Value, method: &str) -> &'a Value {
    let asked = ask["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{label}: one {method} expected: {ask}");
    assert_eq!(asked[0]["method"], method, "{label}: {ask}");
    &asked[0]["params"]
}

/// Elicitation and sampling of server-everything (legacy server->client requests) and of the
/// Python server (modern input_required) were put to the client's own handlers, and the results
/// carry the handlers' answers.
fn assert_questions_answered(label: &str, report: &Value) {
    let asks = &report["asks"];

    let elicited = &asks["everything__trigger-elicitation-request"];
    assert!(
        elicited.get("error").is_none(),
        "{label}: elicitation failed: {elicited}"
    );
    assert_eq!(elicited["isError"], false, "{label}: {elicited}");
    let texts = strings(&elicited["texts"]);
    assert_eq!(texts.len(), 3, "{label}: {elicited}");
    assert_eq!(
        texts[..2],
        [
            "✅ User provided the requested information!".to_owned(),
            format!("User inputs:\n- Name: {ELICITED_NAME}\n- Agreed to terms: true"),
        ],
        "{label}"
    );
    // The server echoes the client's answer as JSON, in the order the client wrote its keys.
    let raw: Value = serde_json::from_str(
        texts[2]
            .strip_prefix("\nRaw result: ")
            .unwrap_or_else(|| panic!("{label}: {elicited}")),
    )
    .unwrap();
    assert_eq!(
        raw,
        json!({ "action": "accept", "content": { "name": ELICITED_NAME, "check": true } }),
        "{label}"
    );
    let question = the_one_question(label, elicited, "elicitation/create");
    assert_eq!(
        question["message"], "Please provide inputs for the following fields:",
        "{label}"
    );
    assert_eq!(
        question["requestedSchema"]["required"],
        json!(["name"]),
        "{label}"
    );

    let sampled = &asks["everything__trigger-sampling-request"];
    assert!(
        sampled.get("error").is_none(),
        "{label}: sampling failed: {sampled}"
    );
    assert_eq!(sampled["isError"], false, "{label}: {sampled}");
    let texts = strings(&sampled["texts"]);
    assert_eq!(texts.len(), 1, "{label}: {sampled}");
    let echoed: Value = serde_json::from_str(
        texts[0]
            .strip_prefix("LLM sampling result: \n")
            .unwrap_or_else(|| panic!("{label}: {sampled}")),
    )
    .unwrap();
    assert_eq!(echoed["model"], SAMPLING_MODEL, "{label}: {echoed}");
    assert_eq!(echoed["role"], "assistant", "{label}: {echoed}");
    assert_eq!(
        echoed["content"],
        json!({ "type": "text", "text": SAMPLED_TEXT }),
        "{label}"
    );
    let question = the_one_question(label, sampled, "sampling/createMessage");
    assert_eq!(
        question["messages"][0]["content"]["text"],
        format!("Resource trigger-sampling-request context: {SAMPLING_PROMPT}"),
        "{label}"
    );
    assert_eq!(question["maxTokens"], 50, "{label}");

    let named = &asks["python__ask_name"];
    assert_texts(
        label,
        "python's elicitation",
        named,
        &[&format!("Hello, {ELICITED_NAME}!")],
    );
    let question = the_one_question(label, named, "elicitation/create");
    assert_eq!(question["message"], "What is your name?", "{label}");

    let summarized = &asks["python__summarize"];
    assert_texts(label, "python's sampling", summarized, &[SAMPLED_TEXT]);
    let question = the_one_question(label, summarized, "sampling/createMessage");
    assert_eq!(
        question["messages"][0]["content"]["text"],
        format!("Summarize: {SUMMARIZED_TEXT}"),
        "{label}"
    );
}

fn assert_read(label: &str, reads: &Value, uri: &str, text: &str) {
    let read = &reads[uri];
    assert!(
        read.get("error").is_none(),
        "{label}: reading {uri} failed: {read}"
    );
    assert_eq!(read["uris"], json!([uri]), "{label}");
    assert_eq!(read["texts"], json!([text]), "{label}");
}

fn assert_resources_and_prompts(label: &str, report: &Value) {
    let reads = &report["reads"];
    {
        assert_read(
            label,
            reads,
            &exposed_uri("everything", EVERYTHING_DOC_URI),
            &everything_document(),
        );
    }
    assert_read(
        label,
        reads,
        &exposed_uri("python", PYTHON_RESOURCE_URI),
        "Hello from the Python peer",
    );
    let prompts = &report["prompt_results"];
    assert_eq!(
        prompts["everything__args-prompt"],
        json!({ "messages": ["user: What's weather in Paris?"] }),
        "{label}"
    );
    assert_eq!(
        prompts["python__greeting"],
        json!({ "messages": ["user: Please greet Bob warmly."] }),
        "{label}"
    );
}

fn check_full_report(label: &str, report: &Value, upstreams: &Upstreams, scope: Scope) {
    assert_eq!(
        report["protocol"],
        scope.era.revision(),
        "{label}: {report}"
    );
    assert_lists(label, report);
    assert_calls(label, report, upstreams);
    assert_progress(label, report);
    assert_cancelled(label, report);
    if scope.questions {
        assert_questions_answered(label, report);
    } else {
        assert_eq!(report["asks"], json!({}), "{label}");
    }
    assert_resources_and_prompts(label, report);
}

// ---------------------------------------------------------------------------------------------
// The clients

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_through_manifold_serve_in_every_mode() {
    let fixture = shared_fixture().await;
    let _turn = client_turn().await;
    for (mode, era) in [
        ("auto", Era::Modern),
        ("legacy", Era::Legacy),
        ("2026-07-28", Era::Modern),
    ] {
        let label = format!("Python SDK, mode {mode}");
        let plan = full_plan(&fixture.upstreams, Scope::full(era));
        let target = json!({ "url": fixture.url });
        let report = python_client(&label, target, mode, plan).await;
        check_full_report(&label, &report, &fixture.upstreams, Scope::full(era));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_v1_client_through_manifold_serve() {
    let fixture = shared_fixture().await;
    let _turn = client_turn().await;
    let scope = Scope::full(Era::Legacy);
    let label = "TS SDK v1, Streamable HTTP";
    let report = ts_client(
        label,
        "ts_v1_client.mjs",
        &fixture.url,
        "legacy",
        full_plan(&fixture.upstreams, scope),
    )
    .await;
    check_full_report(label, &report, &fixture.upstreams, scope);
    assert!(
        report["sessionId"].is_string(),
        "{label}: no session: {report}"
    );
    assert_eq!(report["sessionErrors"], json!([]), "{label}: {report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_v2_client_through_manifold_serve_auto_and_legacy() {
    let fixture = shared_fixture().await;
    let _turn = client_turn().await;
    let modern = Scope::full(Era::Modern);
    for (mode, scope) in [("auto", modern), ("legacy", Scope::full(Era::Legacy))] {
        let label = format!("TS SDK v2, negotiation {mode}");
        let plan = full_plan(&fixture.upstreams, scope);
        let report = ts_client(&label, "ts_v2_client.mjs", &fixture.url, mode, plan).await;
        check_full_report(&label, &report, &fixture.upstreams, scope);
        assert_eq!(report["sessionErrors"], json!([]), "{label}: {report}");
    }
}

/// The inspector CLI: one process per method, a fresh legacy session each time. It declares no
/// capabilities and shows no notifications, so progress, cancellation and answering questions are
/// beyond it; what it gets when a tool asks anyway is checked instead.
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_through_manifold_serve() {
    let fixture = shared_fixture().await;
    let _turn = client_turn().await;
    let upstreams = &fixture.upstreams;
    let build = peers_dir()
        .unwrap()
        .join("node_modules/@modelcontextprotocol/inspector-cli/build");
    let node = node().unwrap();
    let label = "inspector CLI";

    let tool = |name: &str, args: &[(&str, String)]| {
        let mut argv = vec![
            "--method".to_owned(),
            "tools/call".to_owned(),
            "--tool-name".to_owned(),
            name.to_owned(),
        ];
        for (k, v) in args {
            argv.extend(["--tool-arg".to_owned(), format!("{k}={v}")]);
        }
        (format!("tools/call {name}"), argv)
    };
    let method = |m: &str, extra: &[&str]| {
        let mut argv = vec!["--method".to_owned(), m.to_owned()];
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        let key = if extra.is_empty() {
            m.to_owned()
        } else {
            format!("{m} {}", extra.join(" "))
        };
        (key, argv)
    };
    let everything_uri = exposed_uri("everything", EVERYTHING_DOC_URI);
    let python_uri = exposed_uri("python", PYTHON_RESOURCE_URI);
    let invocations = vec![
        method("tools/list", &[]),
        method("resources/list", &[]),
        method("prompts/list", &[]),
        tool(
            "everything__echo",
            &[("message", echo_message("everything"))],
        ),
        tool(
            "everything_http__echo",
            &[("message", echo_message("everything_http"))],
        ),
        tool(
            "filesystem__read_text_file",
            &[("path", upstreams.known_file.to_string_lossy().into_owned())],
        ),
        tool(
            "time__get_current_time",
            &[("timezone", "Asia/Tokyo".to_owned())],
        ),
        tool(
            "git__git_log",
            &[("repo_path", upstreams.repo.to_string_lossy().into_owned())],
        ),
        tool("python__echo", &[("message", echo_message("python"))]),
        method("resources/read", &["--uri", &everything_uri]),
        method("resources/read", &["--uri", &python_uri]),
        method(
            "prompts/get",
            &[
                "--prompt-name",
                "everything__args-prompt",
                "--prompt-args",
                "city=Paris",
            ],
        ),
        method(
            "prompts/get",
            &[
                "--prompt-name",
                "python__greeting",
                "--prompt-args",
                "name=Bob",
            ],
        ),
    ];
    // A question from server-everything finds its client only while its call is that server's
    // one call in flight (see `client_turn`): those two run alone, after the others.
    let asking = vec![
        tool("everything__trigger-elicitation-request", &[]),
        tool(
            "everything__trigger-sampling-request",
            &[("prompt", SAMPLING_PROMPT.to_owned())],
        ),
    ];
    let run_all = |invocations: Vec<(String, Vec<String>)>, at_once: usize| {
        let (node, build, url) = (node.clone(), build.clone(), fixture.url.clone());
        futures::stream::iter(invocations.into_iter().map(move |(key, argv)| {
            let mut args = vec!["index.js".to_owned(), url.clone()];
            args.extend(argv);
            let (node, build) = (node.clone(), build.clone());
            async move {
                let run = run_process(&node, &args, Some(&build)).await;
                assert!(
                    run.success,
                    "{label}: {key} failed\nstdout: {}\nstderr: {}",
                    run.stdout, run.stderr
                );
                let value: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
                    panic!("{label}: {key} printed no JSON ({e}): {}", run.stdout)
                });
                (key, value)
            }
        }))
        .buffer_unordered(at_once)
        .collect::<Vec<_>>()
    };
    let mut results: std::collections::HashMap<String, Value> =
        run_all(invocations, 3).await.into_iter().collect();
    results.extend(run_all(asking, 1).await);

    let names = |key: &str, list: &str, field: &str| -> Value {
        json!(
            results[key][list]
                .as_array()
                .unwrap()
                .iter()
                .map(|item| item[field].clone())
                .collect::<Vec<_>>()
        )
    };
    let lists = json!({
        "tools": names("tools/list", "tools", "name"),
        "resources": names("resources/list", "resources", "uri"),
        "prompts": names("prompts/list", "prompts", "name"),
    });
    assert_lists(label, &lists);

    // The inspector prints raw results; shape them like the scripts' reports.
    let call = |name: &str| -> Value {
        let raw = &results[&format!("tools/call {name}")];
        json!({
            "isError": raw.get("isError").cloned().unwrap_or(json!(false)),
            "texts": raw["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "text")
                .map(|b| b["text"].clone())
                .collect::<Vec<_>>(),
            "structured": raw.get("structuredContent").cloned().unwrap_or(Value::Null),
        })
    };
    let calls = json!({
        "everything__echo": call("everything__echo"),
        "everything_http__echo": call("everything_http__echo"),
        "filesystem__read_text_file": call("filesystem__read_text_file"),
        "time__get_current_time": call("time__get_current_time"),
        "git__git_log": call("git__git_log"),
        "python__echo": call("python__echo"),
    });
    assert_calls(label, &json!({ "calls": calls }), upstreams);

    // The gateway offers server-everything's question tools to every client (its shared
    // connection declares elicitation and sampling); a client that declared neither is refused by
    // the gateway with the reason, which the server turns into a tool error.
    for (tool, capability, method) in [
        (
            "everything__trigger-elicitation-request",
            "elicitation",
            "elicitation/create",
        ),
        (
            "everything__trigger-sampling-request",
            "sampling",
            "sampling/createMessage",
        ),
    ] {
        assert_eq!(
            call(tool),
            json!({
                "isError": true,
                "texts": [format!("MCP error -32601: the client did not declare the {capability} capability, so it cannot answer {method}")],
                "structured": null,
            }),
            "{label}: {tool}"
        );
    }

    let read = |uri: &str| -> Value {
        let contents = results[&format!("resources/read --uri {uri}")]["contents"]
            .as_array()
            .unwrap()
            .clone();
        json!({
            "uris": contents.iter().map(|c| c["uri"].clone()).collect::<Vec<_>>(),
            "texts": contents.iter().map(|c| c["text"].clone()).collect::<Vec<_>>(),
        })
    };
    let prompt = |name: &str, args: &str| -> Value {
        let messages =
            results[&format!("prompts/get --prompt-name {name} --prompt-args {args}")]["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    format!(
                        "{}: {}",
                        m["role"].as_str().unwrap(),
                        m["content"]["text"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>();
        json!({ "messages": messages })
    };
    let report = json!({
        "reads": { everything_uri.clone(): read(&everything_uri), python_uri.clone(): read(&python_uri) },
        "prompt_results": {
            "everything__args-prompt": prompt("everything__args-prompt", "city=Paris"),
            "python__greeting": prompt("python__greeting", "name=Bob"),
        },
    });
    assert_resources_and_prompts(label, &report);
}

/// The Python SDK client starts `manifold stdio` itself, as a desktop client would, in a directory
/// of its own, so the test can see every process that gateway started and prove none outlives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_through_manifold_stdio() {
    let fixture = shared_fixture().await;
    let _turn = client_turn().await;
    for (mode, era) in [("auto", Era::Modern), ("legacy", Era::Legacy)] {
        let label = format!("Python SDK over manifold stdio, mode {mode}");
        let own = scratch("stdio");
        let config = own.path().join("manifold.toml");
        std::fs::write(&config, fixture.upstreams.config(&own.path().join("data"))).unwrap();
        let target = json!({
            "command": MANIFOLD,
            "args": ["stdio", "--config", config.to_string_lossy()],
            "cwd": own.path().to_string_lossy(),
        });
        let plan = full_plan(&fixture.upstreams, Scope::full(era));

        // Watch, while the client runs, which processes work in the gateway's directory.
        let watched = own.path().to_owned();
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let watcher = tokio::spawn(async move {
            let mut most = Vec::new();
            loop {
                let now = processes_working_in(&watched);
                if now.len() > most.len() {
                    most = now;
                }
                tokio::select! {
                    _ = &mut stop_rx => return most,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        });
        let report = python_client(&label, target, mode, plan).await;
        let _ = stop_tx.send(());
        let most = watcher.await.unwrap();

        check_full_report(&label, &report, &fixture.upstreams, Scope::full(era));
        assert!(
            most.len() >= 5
                && most
                    .iter()
                    .any(|(_, cmd)| cmd.contains(MANIFOLD) && cmd.contains(" stdio ")),
            "{label}: expected manifold stdio and its 4 stdio servers at work: {most:?}"
        );
        let own_path = own.path().to_owned();
        let left = tokio::task::spawn_blocking(move || wait_until_nothing_works_in(&own_path))
            .await
            .unwrap();
        for (pid, _) in &left {
            signal(*pid, "KILL");
        }
        assert!(
            left.is_empty(),
            "{label}: processes outlived the client that started manifold stdio: {left:?}"
        );
    }
}

/// Four clients of both eras at once on one gateway: each gets its own results, its own progress
/// (the same server's long operation runs for all of them at the same time) and its own
/// cancellation. Tools that ask the client are left out: see [`client_turn`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_at_the_same_time_each_get_their_own_results() {
    let fixture = shared_fixture().await;
    let _turn = client_turn().await;
    let quiet = |era| Scope {
        questions: false,
        ..Scope::full(era)
    };
    let modern_v2 = quiet(Era::Modern);
    let upstreams = &fixture.upstreams;
    let url = json!({ "url": fixture.url });
    let (python_auto, python_legacy, ts_v1, ts_v2) = tokio::join!(
        python_client(
            "concurrent Python SDK auto",
            url.clone(),
            "auto",
            full_plan(upstreams, quiet(Era::Modern)),
        ),
        python_client(
            "concurrent Python SDK legacy",
            url.clone(),
            "legacy",
            full_plan(upstreams, quiet(Era::Legacy)),
        ),
        ts_client(
            "concurrent TS SDK v1",
            "ts_v1_client.mjs",
            &fixture.url,
            "legacy",
            full_plan(upstreams, quiet(Era::Legacy)),
        ),
        ts_client(
            "concurrent TS SDK v2 auto",
            "ts_v2_client.mjs",
            &fixture.url,
            "auto",
            full_plan(upstreams, modern_v2),
        ),
    );
    for (label, report, scope) in [
        (
            "concurrent Python SDK auto",
            python_auto,
            quiet(Era::Modern),
        ),
        (
            "concurrent Python SDK legacy",
            python_legacy,
            quiet(Era::Legacy),
        ),
        ("concurrent TS SDK v1", ts_v1, quiet(Era::Legacy)),
        ("concurrent TS SDK v2 auto", ts_v2, modern_v2),
    ] {
        check_full_report(label, &report, upstreams, scope);
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: behaviours that were once broken for modern clients.

/// Reproduction: any 2026-07-28 client -> `manifold serve` -> a legacy Streamable HTTP server with
/// sessions (server-everything `streamableHttp`): `tools/call everything_http__echo` answers the
/// JSON-RPC error -32000 "Bad Request: Server not initialized" (the same for `resources/read` and
/// `prompts/get`); legacy clients get "Echo: ...". The gateway forwards the modern client's
/// `params._meta` (with `io.modelcontextprotocol/protocolVersion`) to the legacy upstream, and the
/// upstream Streamable HTTP transport picks each message's era from that key, so it posts the
/// request as a modern one: no `Mcp-Session-Id`, which server-everything refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_modern_client_calls_a_legacy_streamable_http_upstream() {
    let fixture = shared_fixture().await;
    let _turn = client_turn().await;
    let message = echo_message("everything_http");
    let uri = exposed_uri("everything-http", EVERYTHING_DOC_URI);
    let plan = json!({
        "answers": { "name": ELICITED_NAME, "sampled": SAMPLED_TEXT, "model": SAMPLING_MODEL },
        "calls": [{ "name": "everything_http__echo", "arguments": { "message": message } }],
        "reads": [uri],
        "prompts": [{ "name": "everything_http__args-prompt", "arguments": { "city": "Paris" } }],
    });
    let python = python_client(
        "Python SDK 2026-07-28",
        json!({ "url": fixture.url }),
        "2026-07-28",
        plan.clone(),
    );
    let ts = ts_client(
        "TS SDK v2 auto",
        "ts_v2_client.mjs",
        &fixture.url,
        "auto",
        plan,
    );
    let (python, ts) = tokio::join!(python, ts);
    for (label, report) in [("Python SDK 2026-07-28", python), ("TS SDK v2 auto", ts)] {
        assert_eq!(report["protocol"], "2026-07-28", "{label}: {report}");
        assert_texts(
            label,
            "everything_http__echo",
            &report["calls"]["everything_http__echo"],
            &[&format!("Echo: {message}")],
        );
        assert_eq!(
            report["prompt_results"]["everything_http__args-prompt"],
            json!({ "messages": ["user: What's weather in Paris?"] }),
            "{label}"
        );
        if label.starts_with("Python") {
            assert_read(label, &report["reads"], &uri, &everything_document());
        }
    }
}

/// Reproduction: the TS SDK v2 client (negotiation auto, so 2026-07-28) -> `manifold serve` ->
/// `resources/read everything+demo://resource/static/document/architecture.md` (a legacy stdio
/// upstream): the client throws "Invalid result for resources/read: ttlMs expected number,
/// cacheScope expected public|private". The 2026-07-28 revision requires `ttlMs` and `cacheScope`
/// on `resources/read` results; the gateway adds `resultType` and `serverInfo` to a legacy
/// upstream's result for a modern client, but not these two. Reads of a modern upstream's resource
/// (the Python server's) carry them and work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_modern_client_reads_a_legacy_upstreams_resource() {
    let fixture = shared_fixture().await;
    let _turn = client_turn().await;
    let uri = exposed_uri("everything", EVERYTHING_DOC_URI);
    let plan = json!({
        "answers": { "name": ELICITED_NAME, "sampled": SAMPLED_TEXT, "model": SAMPLING_MODEL },
        "reads": [uri],
    });
    let label = "TS SDK v2 auto";
    let report = ts_client(label, "ts_v2_client.mjs", &fixture.url, "auto", plan).await;
    assert_eq!(report["protocol"], "2026-07-28", "{label}: {report}");
    assert_read(label, &report["reads"], &uri, &everything_document());
}

/// A scratch directory for one scene, removed when the test ends.
fn scratch(label: &str) -> ScratchDir {
    ScratchDir::new(&format!("clients-{label}")).unwrap()
}
