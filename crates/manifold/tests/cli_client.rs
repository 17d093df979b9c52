//! Why: `manifold inspect|list|call|read|prompt` is what a person types, so its exact command shapes,
//! its stdout (results only), its stderr (what went wrong and what to try) and its exit status
//! (0 success, 2 tool error, 1 anything else) are a contract. These tests run the built binary
//! against real peers over stdio, Streamable HTTP and HTTP+SSE.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use manifold_testkit::{
    ChildGuard, free_port, node, npm_package_entry, peers_dir, process_is_running, python,
    spawn_http_peer, venv_bin,
};
use serde_json::Value;

/// Bounds a CLI run that would otherwise hang the suite; never a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// What one run of the binary produced.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `manifold ARGS...` with stdin closed, returning its exit code and output.
fn manifold<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    manifold_with_input(args, None)
}

/// Runs `manifold ARGS...` with `input` on stdin (closed after it), or stdin closed at once.
fn manifold_with_input<I, S>(args: I, input: Option<&str>) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_manifold"));
    command
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The guard kills the CLI's process group if the run hangs or the test fails.
    let mut guard = ChildGuard::spawn(command).unwrap();
    if let Some(text) = input {
        let mut stdin = guard.child_mut().stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        // Dropping stdin closes it: a question the input does not answer sees end of file.
    }
    let mut out = guard.child_mut().stdout.take().unwrap();
    let mut err = guard.child_mut().stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = guard.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < HANG_GUARD,
            "manifold did not exit within {HANG_GUARD:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code().expect("manifold was killed by a signal"),
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

fn path_str(p: PathBuf) -> String {
    p.to_string_lossy().into_owned()
}

fn node_bin() -> String {
    path_str(node().unwrap())
}

fn everything_entry() -> String {
    path_str(npm_package_entry("@modelcontextprotocol/server-everything").unwrap())
}

fn time_bin() -> String {
    path_str(venv_bin("mcp-server-time").unwrap())
}

/// A line of a `list` table: the name column, then the rest (spacing is the renderer's).
fn row<'a>(stdout: &'a str, name: &str) -> Option<&'a str> {
    stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
}

/// The TS SDK v2 peer over Streamable HTTP; returns its guard and /mcp URL.
async fn ts_v2_http() -> (ChildGuard, String) {
    let port = free_port().unwrap();
    let script = path_str(peers_dir().unwrap().join("ts_v2_server.mjs"));
    let guard = spawn_http_peer(
        node().unwrap(),
        [
            script,
            "http".to_owned(),
            "--port".to_owned(),
            port.to_string(),
        ],
        Vec::<(String, String)>::new(),
        port,
    )
    .await
    .unwrap();
    (guard, format!("http://127.0.0.1:{port}/mcp"))
}

/// The Python SDK peer over HTTP+SSE; returns its guard and /sse URL.
async fn python_sse() -> (ChildGuard, String) {
    let port = free_port().unwrap();
    let script = path_str(peers_dir().unwrap().join("python_server.py"));
    let guard = spawn_http_peer(
        python().unwrap(),
        [
            script,
            "sse".to_owned(),
            "--port".to_owned(),
            port.to_string(),
        ],
        Vec::<(String, String)>::new(),
        port,
    )
    .await
    .unwrap();
    (guard, format!("http://127.0.0.1:{port}/sse"))
}

// ---------------------------------------------------------------------------------------------
// The documented command shapes

#[test]
fn list_tools_of_a_stdio_server() {
    let run = manifold([
        "list",
        "tools",
        "--",
        &node_bin(),
        &everything_entry(),
        "stdio",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let header = run.stdout.lines().next().unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAME", "DESCRIPTION"]
    );
    let echo = row(&run.stdout, "echo").unwrap_or_else(|| panic!("{run:?}"));
    assert!(echo.ends_with("Echoes back the input string"), "{echo}");
    assert!(
        row(&run.stdout, "trigger-long-running-operation").is_some(),
        "{run:?}"
    );
}

#[tokio::test]
async fn list_tools_of_a_url() {
    let (_peer, url) = ts_v2_http().await;
    let run = manifold(["list", "tools", &url]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        row(&run.stdout, "echo").is_some_and(|r| r.ends_with("Return the message unchanged.")),
        "{run:?}"
    );
    assert!(
        row(&run.stdout, "add").is_some_and(|r| r.ends_with("Add two numbers.")),
        "{run:?}"
    );
    // The peer's tools (tests/peers/ts_v2_server.mjs): echo, add and its five question tools.
    let names: Vec<&str> = run
        .stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        [
            "echo",
            "add",
            "summarize",
            "ask_name",
            "open_link",
            "list_roots",
            "push_summarize"
        ],
        "a header, then one row per tool in the server's order: {run:?}"
    );
}

#[tokio::test]
async fn call_a_tool_at_a_url() {
    let (_peer, url) = ts_v2_http().await;
    let run = manifold(["call", &url, "echo", "--arg", "message=hi"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "hi\n");
}

#[test]
fn call_a_tool_of_a_stdio_server() {
    let run = manifold([
        "call",
        "echo",
        "--arg",
        "message=hi",
        "--",
        &node_bin(),
        &everything_entry(),
        "stdio",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Echo: hi\n");
}

#[test]
fn arguments_are_typed_by_the_tool_schema() {
    let run = manifold([
        "call",
        "get-sum",
        "--arg",
        "a=2",
        "--arg",
        "b=3.5",
        "--",
        &node_bin(),
        &everything_entry(),
        "stdio",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "The sum of 2 and 3.5 is 5.5.\n");
}

#[test]
fn inspect_in_the_modern_era_of_mcp_server_time() {
    let run = manifold(["inspect", "--era", "modern", "--", &time_bin()]);
    assert_eq!(run.code, 0, "{run:?}");
    let field = |key: &str| {
        run.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .map(|l| l[key.len()..].trim().to_owned())
            .unwrap_or_else(|| panic!("no {key} line in {run:?}"))
    };
    assert_eq!(field("era"), "modern (revision 2026-07-28)");
    assert_eq!(field("tools"), "2");
    assert!(field("transport").starts_with("stdio "), "{run:?}");
}

#[test]
fn inspect_in_the_legacy_era_of_mcp_server_time() {
    let run = manifold(["inspect", "--era", "legacy", "--", &time_bin()]);
    assert_eq!(run.code, 0, "{run:?}");
    let era = run
        .stdout
        .lines()
        .find(|l| l.starts_with("era"))
        .unwrap_or_else(|| panic!("{run:?}"));
    assert!(era.ends_with("legacy (revision 2025-11-25)"), "{era}");
    let server = run
        .stdout
        .lines()
        .find(|l| l.starts_with("server"))
        .unwrap();
    assert!(server.ends_with("mcp-time 2026.10.19"), "{server}");
}

#[tokio::test]
async fn read_and_prompt_at_a_url() {
    let (_peer, url) = ts_v2_http().await;
    let read = manifold(["read", &url, "test://ts/hello"]);
    assert_eq!(read.code, 0, "{read:?}");
    assert_eq!(read.stdout, "Hello from the TS v2 peer\n");
    let prompt = manifold(["prompt", &url, "greeting", "--arg", "name=Bob"]);
    assert_eq!(prompt.code, 0, "{prompt:?}");
    assert_eq!(prompt.stdout, "user: Please greet Bob warmly.\n");
}

#[tokio::test]
async fn legacy_sse_transport_on_request() {
    let (_peer, url) = python_sse().await;
    let run = manifold([
        "call",
        "--transport",
        "sse",
        &url,
        "add",
        "--arg",
        "a=2",
        "--arg",
        "b=3",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "5\n");
    let inspect = manifold(["inspect", "--transport", "sse", &url]);
    assert_eq!(inspect.code, 0, "{inspect:?}");
    let transport = inspect
        .stdout
        .lines()
        .find(|l| l.starts_with("transport"))
        .unwrap();
    assert!(transport.contains("HTTP+SSE"), "{transport}");
}

fn python_stdio_command() -> [String; 3] {
    [
        path_str(python().unwrap()),
        path_str(peers_dir().unwrap().join("python_server.py")),
        "stdio".to_owned(),
    ]
}

/// `--interactive` answers elicitation and sampling from stdin: a server->client request in the
/// legacy era, an `input_required` round in the modern era.
fn interactive_answers(era: &str) {
    let [py, script, mode] = python_stdio_command();
    let named = manifold_with_input(
        [
            "call",
            "ask_name",
            "--interactive",
            "--era",
            era,
            "--",
            &py,
            &script,
            &mode,
        ],
        Some("Grace Hopper\n"),
    );
    assert_eq!(named.code, 0, "{named:?}");
    assert_eq!(named.stdout, "Hello, Grace Hopper!\n");
    assert!(
        named.stderr.contains("The server asks: What is your name?"),
        "{named:?}"
    );

    let summary = manifold_with_input(
        [
            "call",
            "summarize",
            "--arg",
            "text=a long story",
            "--interactive",
            "--era",
            era,
            "--",
            &py,
            &script,
            &mode,
        ],
        Some("a short story\n"),
    );
    assert_eq!(summary.code, 0, "{summary:?}");
    assert_eq!(summary.stdout, "a short story\n");
    assert!(
        summary.stderr.contains("user: Summarize: a long story"),
        "{summary:?}"
    );
}

#[test]
fn interactive_answers_in_the_modern_era() {
    interactive_answers("modern");
}

#[test]
fn interactive_answers_in_the_legacy_era() {
    interactive_answers("legacy");
}

#[test]
fn without_interactive_an_elicitation_is_refused_with_exit_1() {
    let [py, script, mode] = python_stdio_command();
    let run = manifold([
        "call", "ask_name", "--era", "legacy", "--", &py, &script, &mode,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(run.stderr.contains("elicitation"), "{run:?}");
}

// ---------------------------------------------------------------------------------------------
// Exit status and error messages

#[test]
fn a_tool_that_reports_an_error_exits_2() {
    // Cargo's scratch directory for integration tests exists and does not contain /etc/hostname.
    let allowed = env!("CARGO_TARGET_TMPDIR");
    let run = manifold([
        "call",
        "read_text_file",
        "--arg",
        "path=/etc/hostname",
        "--",
        &node_bin(),
        &path_str(npm_package_entry("@modelcontextprotocol/server-filesystem").unwrap()),
        allowed,
    ]);
    // server-filesystem refuses paths outside its allowed directory with isError, not a JSON-RPC error.
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.starts_with("the tool reported an error:\n"),
        "{run:?}"
    );
    assert!(run.stdout.contains("Access denied"), "{run:?}");
}

#[test]
fn an_unknown_tool_exits_1_and_suggests_the_near_name() {
    let run = manifold([
        "call",
        "ecoh",
        "--arg",
        "message=hi",
        "--",
        &node_bin(),
        &everything_entry(),
        "stdio",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "errors go to stderr only");
    assert!(
        run.stderr
            .contains("error: the server has no tool named \"ecoh\""),
        "{run:?}"
    );
    assert!(run.stderr.contains("did you mean \"echo\"?"), "{run:?}");
}

#[test]
fn an_unreachable_url_exits_1_with_a_hint() {
    // A port just released by the kernel: nothing listens there.
    let port = free_port().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let run = manifold(["list", "tools", &url]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("error: could not reach server \"{url}\"")),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("hint: check that the server is running and the URL is right"),
        "{run:?}"
    );
}

#[test]
fn a_command_that_does_not_exist_exits_1_with_a_hint() {
    let run = manifold(["list", "tools", "--", "/nonexistent/mcp-server"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(run.stderr.contains("/nonexistent/mcp-server"), "{run:?}");
    assert!(
        run.stderr
            .contains("hint: check that the command exists and runs on its own"),
        "{run:?}"
    );
}

#[test]
fn no_target_is_a_usage_error() {
    let run = manifold(["list", "tools"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("no server given"), "{run:?}");
    assert!(run.stderr.contains("usage: manifold list"), "{run:?}");
}

// ---------------------------------------------------------------------------------------------
// --json

#[test]
fn list_json_is_the_server_list() {
    let run = manifold([
        "list",
        "tools",
        "--json",
        "--",
        &node_bin(),
        &everything_entry(),
        "stdio",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let parsed: Value = serde_json::from_str(&run.stdout).unwrap();
    let tools = parsed["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "echo").unwrap();
    assert_eq!(echo["description"], "Echoes back the input string");
    assert_eq!(echo["inputSchema"]["type"], "object");
}

#[tokio::test]
async fn call_json_is_the_raw_result() {
    let (_peer, url) = ts_v2_http().await;
    let run = manifold([
        "call", "--json", &url, "add", "--arg", "a=2", "--arg", "b=40",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let parsed: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(parsed["content"][0]["type"], "text");
    assert_eq!(parsed["content"][0]["text"], "42");
}

#[test]
fn inspect_json_describes_the_connection_and_leaves_no_child_behind() {
    let run = manifold(["inspect", "--json", "--era", "modern", "--", &time_bin()]);
    assert_eq!(run.code, 0, "{run:?}");
    let parsed: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(parsed["era"], "modern");
    assert_eq!(parsed["revision"], "2026-07-28");
    assert_eq!(parsed["result"]["supportedVersions"][0], "2026-07-28");
    assert_eq!(parsed["counts"]["tools"], 2);
    assert_eq!(parsed["counts"]["prompts"], 0);
    let transport = parsed["transport"].as_str().unwrap();
    let pid: u32 = transport
        .rsplit_once("(pid ")
        .and_then(|(_, rest)| rest.trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no pid in {transport:?}"));
    assert!(
        !process_is_running(pid),
        "the stdio server (pid {pid}) outlived the manifold command"
    );
}

/// A stdio server's teardown after a missed deadline: 2 s after stdin closes, 2 s after SIGTERM
/// (`STDIN_CLOSE_GRACE` + `SIGTERM_GRACE`); the stated margin of `--timeout`.
const TEARDOWN_MARGIN: Duration = Duration::from_secs(4);
/// Room for a loaded machine on top of that; still far below the 37 s the set-up took unbounded.
const LOADED_MACHINE_SLACK: Duration = Duration::from_secs(8);

#[test]
fn timeout_bounds_the_set_up_of_a_server_that_prints_non_json_then_stays_silent() {
    let timeout = Duration::from_secs(2);
    let started = Instant::now();
    let run = manifold([
        "list",
        "tools",
        "--timeout",
        "2",
        "--",
        "sh",
        "-c",
        "echo 'starting up'; echo 'not JSON either'; exec sleep 1000",
    ]);
    let took = started.elapsed();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(
        run.stderr.contains("took longer than --timeout 2s")
            && run
                .stderr
                .contains("the era probe got no answer to server/discover"),
        "{run:?}"
    );
    assert!(
        took < timeout + TEARDOWN_MARGIN + LOADED_MACHINE_SLACK,
        "the set-up deadline did not hold: {took:?}"
    );
}
