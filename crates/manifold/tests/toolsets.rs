//! Tool sets end to end (`[toolsets.NAME]`): a real `manifold serve` in front of two real Python
//! SDK servers, and the real Python SDK client at `/mcp/NAME` in both eras and through
//! `manifold stdio --toolset NAME`, seeing only the set's tools and the meta-tools; the legacy SSE
//! transport's set endpoint; an unknown set refused with a clear error at every door.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use manifold_testkit::{
    GatewayProcess, McpSession, ScratchDir, ServeCommand, peers_dir, python, run_client,
    workspace_root,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Bounds one client run; never a performance assertion.
const CLIENT_HANG_GUARD: Duration = Duration::from_secs(120);
const CORE: [&str; 3] = [
    "manifold_health",
    "manifold_search_tools",
    "manifold_call_tool",
];

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn config(data: &Path) -> String {
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

[servers.a]
command = {python}
args = [{server}, "stdio"]

[servers.b]
command = {python}
args = [{server}, "stdio"]

[toolsets.only-a]
servers = ["a"]

[toolsets.echo]
tools = ["b__echo"]
"#,
        data = toml_string(&data.to_string_lossy()),
    )
}

fn serve(dir: &Path, config: &Path) -> GatewayProcess {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .start()
        .unwrap()
}

/// The Python SDK client's report for `target` in `mode` (listing only).
fn python_client(label: &str, target: Value, mode: &str) -> Value {
    let script = workspace_root().join("crates/manifold/tests/clients/py_client.py");
    let plan = json!({"target": target, "mode": mode, "calls": [], "answers": {"name": "-", "sampled": "-", "model": "-"}});
    let mut command = Command::new(python().unwrap());
    command.arg(script).arg(plan.to_string());
    let run = run_client(command, CLIENT_HANG_GUARD)
        .unwrap_or_else(|e| panic!("{label}: the client hung: {e}"));
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert!(run.status.success(), "{label}: {stdout}\n{stderr}");
    run.report()
        .unwrap_or_else(|| panic!("{label}: no JSON report: {stdout}\n{stderr}"))
}

fn tools(report: &Value) -> Vec<String> {
    report["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {report}"))
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

fn assert_only(label: &str, seen: &[String], prefix: &str, others: &[&str]) {
    for core in CORE {
        assert!(
            seen.contains(&core.to_owned()),
            "{label}: no {core} in {seen:?}"
        );
    }
    for name in seen {
        assert!(
            CORE.contains(&name.as_str())
                || name.starts_with(prefix)
                || others.contains(&name.as_str()),
            "{label}: {name} is outside the set: {seen:?}"
        );
    }
}

#[test]
fn a_client_at_a_sets_endpoint_sees_only_the_set_in_both_eras_and_over_stdio() {
    let dir = ScratchDir::new("toolsets").unwrap();
    let config_path = dir.path().join("manifold.toml");
    std::fs::write(&config_path, config(&dir.path().join("data"))).unwrap();
    let served = serve(dir.path(), &config_path);

    let everything = tools(&python_client(
        "all",
        json!({"url": format!("{}/mcp", served.base())}),
        "legacy",
    ));
    assert!(
        everything.iter().any(|t| t.starts_with("a__"))
            && everything.iter().any(|t| t.starts_with("b__"))
    );

    for mode in ["legacy", "auto"] {
        let only_a = tools(&python_client(
            mode,
            json!({"url": format!("{}/mcp/only-a", served.base())}),
            mode,
        ));
        assert_only(mode, &only_a, "a__", &[]);
        let a_tools = everything.iter().filter(|t| t.starts_with("a__")).count();
        assert_eq!(only_a.len(), a_tools + CORE.len(), "{mode}: {only_a:?}");

        let echo = tools(&python_client(
            mode,
            json!({"url": format!("{}/mcp/echo", served.base())}),
            mode,
        ));
        assert_only(mode, &echo, "-", &["b__echo"]);
        assert!(echo.contains(&"b__echo".to_owned()), "{mode}: {echo:?}");
    }

    // The same set over stdio, as a client that launches Manifold would see it.
    let stdio = python_client(
        "stdio",
        json!({"command": MANIFOLD, "args": ["stdio", "--toolset", "echo", "--config", config_path.to_string_lossy()], "cwd": dir.path().to_string_lossy()}),
        "legacy",
    );
    let over_stdio = tools(&stdio);
    assert_only("stdio", &over_stdio, "-", &["b__echo"]);
    assert!(over_stdio.contains(&"b__echo".to_owned()), "{over_stdio:?}");
}

#[tokio::test]
async fn an_unknown_set_is_refused_at_every_door_and_sse_posts_stay_in_the_set() {
    let dir = ScratchDir::new("toolsets-doors").unwrap();
    let config_path = dir.path().join("manifold.toml");
    std::fs::write(&config_path, config(&dir.path().join("data"))).unwrap();
    let served = serve(dir.path(), &config_path);
    let http = manifold_testkit::http_client();

    let refused = McpSession::options(format!("{}/mcp/nope", served.base()))
        .client_info("t", "1")
        .initialize()
        .await
        .unwrap();
    assert_eq!(refused.status, 404);
    let body = refused.body;
    assert!(body.contains("there is no tool set \\\"nope\\\""), "{body}");

    // The legacy SSE stream of a set names the set's message endpoint.
    let mut stream = http
        .get(format!("{}/sse/echo", served.base()))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut first = String::new();
    while !first.contains("\n\n") {
        let chunk = tokio::time::timeout(CLIENT_HANG_GUARD, stream.chunk())
            .await
            .unwrap()
            .unwrap()
            .expect("the stream ended before its endpoint event");
        first.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        first.contains("event: endpoint") && first.contains("data: /message/echo?sessionId="),
        "{first}"
    );

    let out = Command::new(MANIFOLD)
        .args(["stdio", "--toolset", "nope", "--config"])
        .arg(&config_path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("there is no tool set \"nope\"")
            && (said.contains("echo, only-a") || said.contains("only-a, echo")),
        "{said}"
    );
}
