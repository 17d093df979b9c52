//! Why: tools that users author at run time must be stored with their history, offered to every
//! session at once, validated before anything is stored or run, and run in the sandbox with no way
//! out: no network, nothing of the host outside the tool's workspace, every process killed when the
//! call ends, however it ends. These tests put the real `manifold serve` in front of the Python SDK
//! server, author tools through it with the real Python SDK client (both eras) and watch another
//! session held by the real TypeScript SDK client; the sandbox cases use a lean JSON-RPC client so
//! that they can cancel a call and look for what it left behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use manifold_testkit::{
    ChildGuard, GatewayProcess, McpSession, ScratchDir, ServeCommand, node, peers_dir, python,
    run_client, workspace_root,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Bounds a client run, the gateway's start or a wait for a process to go; never a performance
/// assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn config(data: &Path) -> String {
    let server = peers_dir().unwrap().join("python_server.py");
    format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = {}\n\n[servers.py]\ncommand = {}\nargs = [{}, \"stdio\"]\n",
        toml_string(&data.to_string_lossy()),
        toml_string(&python().unwrap().to_string_lossy()),
        toml_string(&server.to_string_lossy()),
    )
}

/// `manifold serve` in `dir`, on its `manifold.toml` (written with the default configuration when
/// the test wrote none).
fn start_gateway(dir: &Path) -> GatewayProcess {
    let config = dir.join("manifold.toml");
    if !config.exists() {
        std::fs::write(&config, self::config(&dir.join("data"))).unwrap();
    }
    ServeCommand::new(MANIFOLD, dir)
        .config(&config)
        .log("gateway.log")
        .start()
        .unwrap()
}

fn last_json(out: &str, err: &str) -> Value {
    serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the client reported no JSON ({e}): {out}\n{err}"))
}

/// Runs the Python SDK client through `steps`; its report.
fn python_client(url: &str, mode: &str, steps: Value) -> Value {
    python_client_answering(url, mode, steps, None)
}

/// The same, answering every question the gateway asks (an approval) with `answer`.
fn python_client_answering(url: &str, mode: &str, steps: Value, answer: Option<&str>) -> Value {
    let script = workspace_root().join("crates/manifold/tests/clients/authored_py_client.py");
    let plan = json!({"url": url, "mode": mode, "steps": steps, "answer": answer});
    let mut command = Command::new(python().unwrap());
    command.arg(script).arg(plan.to_string());
    let run = run_client(command, HANG_GUARD).unwrap();
    last_json(&run.stdout, &run.stderr)
}

fn word_count() -> Value {
    json!({
        "name": "word_count",
        "title": "Word count",
        "description": "Counts the words of a text",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "outputSchema": {"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]},
        "annotations": {"readOnlyHint": true},
        "language": "python",
        "code": "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps({\"words\": len(args[\"text\"].split())}))\n",
    })
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"call": name, "arguments": arguments})
}

fn step_text(step: &Value) -> String {
    step["texts"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[test]
fn an_authored_tool_lives_through_create_update_history_rollback_disable_and_delete() {
    let dir = ScratchDir::new("authored-life").unwrap();
    let gateway = start_gateway(dir.path());
    // The other session, held by the TypeScript SDK: it must hear of the new tool and call it.
    let watcher_plan = json!({
        "url": gateway.url(),
        "modules": peers_dir().unwrap().join("node_modules").to_string_lossy(),
        "expect": "word_count",
        "call": {"arguments": {"text": "heard it changed"}},
        "guardMs": 60_000,
    });
    let mut watcher = Command::new(node().unwrap());
    watcher
        .arg(workspace_root().join("crates/manifold/tests/clients/authored_ts_client.mjs"))
        .arg(watcher_plan.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut watcher = ChildGuard::spawn(watcher).unwrap();
    let mut watcher_out = BufReader::new(watcher.child_mut().stdout.take().unwrap());
    let mut ready = String::new();
    watcher_out.read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready");

    let mut update =
        json!({"name": "word_count", "description": "Counts the words of a text, and says so"});
    update["code"] = json!(
        "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps({\"words\": len(args[\"text\"].split()) * 10}))\n"
    );
    let report = python_client(
        gateway.url(),
        "legacy",
        json!([
            {"list": true},
            call("manifold_create_tool", word_count()),
            {"list": true},
            call("word_count", json!({"text": "one two three"})),
        ]),
    );
    // The other session heard of the tool and called it before anything else changes it.
    let (rest, err) = {
        let mut rest = String::new();
        watcher_out.read_to_string(&mut rest).unwrap();
        let mut err = String::new();
        let _ = watcher
            .child_mut()
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err);
        (rest, err)
    };
    let seen = last_json(&rest, &err);
    assert!(seen["changes"].as_u64().unwrap() >= 1, "{seen}");
    assert!(
        seen["after"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "word_count"),
        "{seen}"
    );
    assert_eq!(
        seen["call"]["structured"]["words"], 3,
        "the other session called the new tool: {seen}"
    );
    let rest = python_client(
        gateway.url(),
        "legacy",
        json!([
            call("manifold_create_tool", word_count()),
            call("manifold_update_tool", update),
            call("word_count", json!({"text": "one two three"})),
            call("manifold_tool_history", json!({"name": "word_count"})),
            call("manifold_rollback_tool", json!({"name": "word_count", "version": 1})),
            call("word_count", json!({"text": "one two three"})),
            call("manifold_disable_tool", json!({"name": "word_count"})),
            {"list": true},
            call("word_count", json!({"text": "x"})),
            call("manifold_enable_tool", json!({"name": "word_count"})),
            call("manifold_delete_tool", json!({"name": "word_count"})),
            {"list": true},
            call("manifold_tool_history", json!({"name": "word_count", "limit": 2})),
        ]),
    );
    let steps: Vec<Value> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["steps"].as_array().unwrap())
        .cloned()
        .collect();
    let tools = |i: usize| -> Vec<String> {
        steps[i]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("step {i}: {}", steps[i]))
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    };
    let before = tools(0);
    assert!(
        before.contains(&"manifold_create_tool".to_owned()),
        "{before:?}"
    );
    assert!(!before.contains(&"word_count".to_owned()));
    assert_eq!(steps[1]["structured"]["version"], 1, "{}", steps[1]);
    // Listed after the built-ins and the authoring tools, before the servers' tools.
    let after = tools(2);
    let at = |name: &str| after.iter().position(|t| t == name).unwrap();
    assert!(at("manifold_rollback_tool") < at("word_count"), "{after:?}");
    assert!(at("word_count") < at("py__echo"), "{after:?}");
    assert_eq!(steps[3]["structured"], json!({"words": 3}), "{}", steps[3]);
    assert_eq!(steps[3]["isError"], false);
    assert_eq!(steps[4]["isError"], true, "a second create is refused");
    assert!(step_text(&steps[4]).contains("exists"), "{}", steps[4]);
    assert_eq!(steps[5]["structured"]["version"], 2, "{}", steps[5]);
    assert_eq!(steps[6]["structured"], json!({"words": 30}), "{}", steps[6]);
    let history = &steps[7]["structured"]["versions"];
    assert_eq!(history[0]["version"], 2, "{}", steps[7]);
    assert_eq!(history[0]["action"], "update");
    assert_eq!(history[0]["author"], "local");
    let diff = history[0]["diff"].as_str().unwrap();
    assert!(
        diff.contains("-  \"description\": \"Counts the words of a text\",")
            && diff.contains("+  \"description\": \"Counts the words of a text, and says so\","),
        "{diff}"
    );
    assert_eq!(history[1]["action"], "create");
    assert_eq!(steps[8]["structured"]["version"], 3, "{}", steps[8]);
    assert_eq!(steps[9]["structured"], json!({"words": 3}), "rolled back");
    assert!(!tools(11).contains(&"word_count".to_owned()), "disabled");
    assert!(
        steps[12]["isError"] == true || steps[12].get("error").is_some(),
        "a disabled tool is not called: {}",
        steps[12]
    );
    assert!(!tools(15).contains(&"word_count".to_owned()), "deleted");
    let kept = &steps[16]["structured"]["versions"];
    assert_eq!(kept.as_array().unwrap().len(), 2);
    assert_eq!(kept[0]["action"], "delete");
    assert_eq!(kept[0]["deleted"], true);
    assert_eq!(kept[1]["action"], "enable");

    drop(gateway);
}

#[test]
fn a_modern_client_authors_and_calls_and_every_bad_definition_is_refused_with_its_field() {
    let dir = ScratchDir::new("authored-modern").unwrap();
    let gateway = start_gateway(dir.path());
    let bad = |patch: Value| {
        let mut d = word_count();
        d["name"] = json!("bad_tool");
        for (k, v) in patch.as_object().unwrap() {
            d[k] = v.clone();
        }
        call("manifold_create_tool", d)
    };
    let report = python_client(
        gateway.url(),
        "auto",
        json!([
            bad(json!({"name": "py__echo"})),
            bad(json!({"name": "manifold_health"})),
            bad(json!({"name": "has space"})),
            bad(json!({"inputSchema": {"type": "object", "properties": {"a": {"type": "wat"}}}})),
            bad(json!({"outputSchema": {"type": "string"}})),
            bad(json!({"language": "cobol"})),
            bad(json!({"dependencies": ["requests>=2"]})),
            bad(json!({"timeout": 100000})),
            bad(json!({"annotations": {"readOnlyHint": "no"}})),
            call("manifold_create_tool", word_count()),
            call("word_count", json!({"text": "a b"})),
            call("word_count", json!({"text": 7})),
            call("word_count", json!({})),
            {"list": true},
            call("manifold_search_tools", json!({"query": "count words"})),
        ]),
    );
    assert_eq!(report["protocolVersion"], "2026-07-28", "{report}");
    let found = report["steps"][14]["structured"].to_string();
    assert!(
        found.contains("\"name\":\"word_count\"") && found.contains("\"server\":\"(authored)\""),
        "search finds it: {}",
        report["steps"][14]
    );
    let steps = report["steps"].as_array().unwrap();
    let expected = [
        "taken",
        "taken",
        "name",
        "inputSchema",
        "outputSchema",
        "language",
        "dependencies",
        "timeout",
        "annotations",
    ];
    for (i, words) in expected.iter().enumerate() {
        assert_eq!(steps[i]["isError"], true, "step {i}: {}", steps[i]);
        assert!(
            step_text(&steps[i]).contains(words),
            "step {i}: {}",
            steps[i]
        );
    }
    assert_eq!(steps[9]["isError"], false, "{}", steps[9]);
    assert_eq!(
        steps[10]["structured"],
        json!({"words": 2}),
        "{}",
        steps[10]
    );
    let wrong_type = step_text(&steps[11]);
    assert!(
        steps[11]["isError"] == true && wrong_type.contains("/text") && wrong_type.contains("type"),
        "{}",
        steps[11]
    );
    assert!(step_text(&steps[12]).contains("required"), "{}", steps[12]);
    let listed = steps[13]["tools"].as_array().unwrap();
    assert!(listed.iter().any(|t| t == "word_count"));
    assert!(
        !listed.iter().any(|t| t == "bad_tool"),
        "nothing bad was stored"
    );
}

// ---------------------------------------------------------------------------------------------
// The sandbox cases, with a lean legacy-era JSON-RPC client.

/// A legacy session held by the lean client, with what these tests do through it.
struct Session(McpSession);

impl Session {
    async fn open(url: &str) -> Session {
        Session(
            McpSession::options(url)
                .client_info("authored-test", "1")
                .legacy()
                .await
                .unwrap(),
        )
    }

    fn request(&self, body: &Value) -> reqwest::RequestBuilder {
        self.0.post(body)
    }

    async fn post(&self, body: Value) -> Vec<Value> {
        self.0.send(&body).await.unwrap().messages()
    }

    /// A `tools/call`; the result and the progress messages that came with it.
    async fn call(&self, id: u64, name: &str, arguments: Value) -> (Value, Vec<String>) {
        let messages = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": name, "arguments": arguments, "_meta": {"progressToken": format!("p{id}")}}}))
            .await;
        let progress = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .filter_map(|m| m["params"]["message"].as_str().map(str::to_owned))
            .collect();
        let result = messages
            .into_iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to call {id} ({name})"));
        (result["result"].clone(), progress)
    }

    async fn create(&self, id: u64, definition: Value) {
        let (result, _) = self.call(id, "manifold_create_tool", definition).await;
        assert_eq!(result["isError"], false, "{result}");
    }
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn sh_tool(name: &str, code: &str, timeout: f64) -> Value {
    json!({"name": name, "description": format!("test tool {name}"), "language": "sh",
        "code": code, "timeout": timeout})
}

fn py_tool(name: &str, code: &str) -> Value {
    json!({"name": name, "description": format!("test tool {name}"), "language": "python", "code": code})
}

/// Live processes whose command line has `token` as an argument.
fn processes_with(token: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.split(|b| *b == 0).any(|arg| arg == token.as_bytes()))
                .unwrap_or(false)
        })
        .filter(|pid| manifold_testkit::process_is_running(*pid))
        .collect()
}

async fn until_gone(token: &str) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let left = processes_with(token);
        if left.is_empty() || started.elapsed() > Duration::from_secs(10) {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_sandboxed_bounded_and_leave_no_process() {
    let dir = ScratchDir::new("authored-sandbox").unwrap();
    let gateway = start_gateway(dir.path());
    let s = Session::open(gateway.url()).await;

    s.create(1, sh_tool("quiet", "true", 10.0)).await;
    let (r, _) = s.call(2, "quiet", json!({})).await;
    assert_eq!(text_of(&r), "(no output)");
    assert_eq!(r["isError"], false);

    s.create(
        3,
        sh_tool("fails", "echo partial; echo why >&2; exit 3", 10.0),
    )
    .await;
    let (r, _) = s.call(4, "fails", json!({})).await;
    assert_eq!(text_of(&r), "partial\n\n[stderr]\nwhy\n[exit 3]");
    assert_eq!(r["isError"], true);

    s.create(
        5,
        sh_tool("loud", "head -c 5000000 /dev/zero | tr '\\0' x", 30.0),
    )
    .await;
    let (r, _) = s.call(6, "loud", json!({})).await;
    let text = text_of(&r);
    assert!(
        text.contains("[output truncated at"),
        "{}",
        &text[text.len() - 80..]
    );
    assert!(text.len() < 2 * 1024 * 1024, "capped: {} bytes", text.len());

    s.create(7, sh_tool("hangs", "sleep 987.25", 1.0)).await;
    let (r, _) = s.call(8, "hangs", json!({})).await;
    assert!(text_of(&r).contains("[timeout]"), "{r}");
    assert_eq!(r["isError"], true);
    assert_eq!(
        until_gone("987.25").await,
        Vec::<u32>::new(),
        "the timed-out tool is gone"
    );

    // Arguments arrive on stdin; /workspace is the tool's own and keeps what it wrote.
    s.create(
        9,
        py_tool(
            "counter",
            "import json, os, sys\nargs = json.load(sys.stdin)\npath = '/workspace/count'\nn = int(open(path).read()) if os.path.exists(path) else 0\nopen(path, 'w').write(str(n + args['add']))\nprint(n + args['add'], os.getcwd(), os.environ['MANIFOLD_TOOL_NAME'])",
        ),
    )
    .await;
    s.call(10, "counter", json!({"add": 2})).await;
    let (r, _) = s.call(11, "counter", json!({"add": 3})).await;
    assert_eq!(text_of(&r).trim(), "5 /workspace counter");

    // A file of the host outside the workspace is not there; the test itself can read it.
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "the host's secret").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    s.create(
        12,
        py_tool(
            "snoop",
            &format!("print(open({:?}).read())", secret.display().to_string()),
        ),
    )
    .await;
    let (r, _) = s.call(13, "snoop", json!({})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("No such file"), "{r}");
    assert!(!text_of(&r).contains("the host's secret"));

    // No network while running: a listener on the host's loopback cannot be reached.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    s.create(
        14,
        py_tool(
            "phone_home",
            &format!("import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('connected')"),
        ),
    )
    .await;
    let (r, _) = s.call(15, "phone_home", json!({})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(!text_of(&r).starts_with("connected"), "{r}");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        "the listener is up"
    );

    // A tool that forks and is cancelled: nothing it started is left, and the session goes on.
    s.create(
        16,
        sh_tool(
            "forks",
            "sleep 876.5 & sleep 876.5 & echo started; wait",
            60.0,
        ),
    )
    .await;
    let pending = s.request(&json!({"jsonrpc": "2.0", "id": 17, "method": "tools/call",
        "params": {"name": "forks", "arguments": {}}}));
    let call = tokio::spawn(async move {
        let _ = pending.send().await.map(|r| r.text());
    });
    let started = Instant::now();
    while processes_with("876.5").len() < 2 {
        assert!(
            started.elapsed() < HANG_GUARD,
            "the forking tool never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.post(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 17, "reason": "the test cancels it"}}),
    )
    .await;
    assert_eq!(
        until_gone("876.5").await,
        Vec::<u32>::new(),
        "the cancelled tool's tree is gone"
    );
    call.abort();
    let (r, _) = s.call(18, "quiet", json!({})).await;
    assert_eq!(text_of(&r), "(no output)");
    drop(gateway);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_is_installed_once_with_progress_and_the_tools_survive_a_restart() {
    let dir = ScratchDir::new("authored-deps").unwrap();
    let gateway = start_gateway(dir.path());
    let s = Session::open(gateway.url()).await;
    let uses_six = |name: &str| {
        json!({"name": name, "description": "Says which six it has", "language": "python",
            "dependencies": ["six==1.16.0"], "timeout": 300,
            "code": "import six\nprint(six.__version__, six.__file__.startswith('/'))"})
    };
    s.create(1, uses_six("six_version")).await;
    let (r, progress) = s.call(2, "six_version", json!({})).await;
    assert_eq!(text_of(&r).trim(), "1.16.0 True", "{r}");
    assert!(
        progress
            .iter()
            .any(|p| p.contains("installing six==1.16.0")),
        "{progress:?}"
    );
    s.create(3, uses_six("six_again")).await;
    let (r, progress) = s.call(4, "six_again", json!({})).await;
    assert_eq!(text_of(&r).trim(), "1.16.0 True", "{r}");
    assert!(
        !progress.iter().any(|p| p.contains("installing")),
        "the second tool uses the cache: {progress:?}"
    );
    // A restart keeps every tool (the store) and its installs (the cache).
    drop(s);
    drop(gateway);
    let gateway = start_gateway(dir.path());
    let s = Session::open(gateway.url()).await;
    let (r, progress) = s.call(5, "six_again", json!({})).await;
    assert_eq!(text_of(&r).trim(), "1.16.0 True", "{r}");
    assert!(progress.is_empty(), "{progress:?}");
    // Node: `import` and `require` both work, and an npm dependency is installed the same way.
    s.create(
        8,
        json!({"name": "node_double", "description": "Doubles n", "language": "node",
            "code": "import { readFileSync } from 'node:fs';\nconst a = JSON.parse(readFileSync(0, 'utf8'));\nconsole.log(JSON.stringify({ double: a.n * 2 }));"}),
    )
    .await;
    let (r, _) = s.call(9, "node_double", json!({"n": 3})).await;
    assert_eq!(r["structuredContent"], json!({"double": 6}), "{r}");
    s.create(
        10,
        json!({"name": "node_pad", "description": "Pads with zeros", "language": "node",
            "dependencies": ["left-pad@1.3.0"], "timeout": 300,
            "code": "const leftPad = require('left-pad');\nconsole.log(leftPad('7', 3, '0'));"}),
    )
    .await;
    let (r, progress) = s.call(11, "node_pad", json!({})).await;
    assert_eq!(text_of(&r).trim(), "007", "{r}");
    assert!(
        progress
            .iter()
            .any(|p| p.contains("installing left-pad@1.3.0")),
        "{progress:?}"
    );
    // A dependency that does not exist fails the call with the installer's words.
    s.create(
        6,
        json!({"name": "missing_dep", "description": "d", "language": "python",
            "dependencies": ["manifold-no-such-package-ever==0.0.1"], "code": "print(1)", "timeout": 300}),
    )
    .await;
    let (r, _) = s.call(7, "missing_dep", json!({})).await;
    assert_eq!(r["isError"], true);
    assert!(
        text_of(&r).contains("installing the dependencies failed")
            && text_of(&r).contains("manifold-no-such-package-ever"),
        "{r}"
    );
}

/// One stateless (2026-07-28) request with a bearer key; the JSON-RPC response.
async fn ask_as(url: &str, key: &str, method: &str, params: Value) -> Value {
    let session = modern_session(url, Some(key));
    let reply = session
        .send(&session.message(1, method, params))
        .await
        .unwrap();
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{e}: {}", reply.body))
}

/// A stateless (2026-07-28) request asking for a JSON reply, not yet sent.
fn modern_request(
    url: &str,
    key: Option<&str>,
    method: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    let session = modern_session(url, key);
    session.post(&session.message(1, method, params))
}

/// A stateless (2026-07-28) client asking for JSON replies, as the holder of `key` when given.
fn modern_session(url: &str, key: Option<&str>) -> McpSession {
    let options = McpSession::options(url)
        .client_info("authored-test", "1")
        .accept("application/json");
    match key {
        Some(key) => options.bearer(key).modern(),
        None => options.modern(),
    }
}

fn create_key(dir: &Path, name: &str, groups: &str) -> String {
    let groups: &[&str] = if groups.is_empty() {
        &[]
    } else {
        &["--groups", groups]
    };
    ServeCommand::new(MANIFOLD, dir)
        .config(dir.join("manifold.toml"))
        .create_key(name, groups)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authenticated_callers_author_only_where_a_rule_allows_it_by_name() {
    let dir = ScratchDir::new("authored-auth").unwrap();
    let config = format!(
        "{}\n[auth]\napi_keys = true\n\n[[rules]]\nname = \"authors\"\neffect = \"allow\"\ngroups = [\"authors\"]\ntools = [\"manifold_*_tool\"]\n",
        config(&dir.path().join("data"))
    );
    std::fs::write(dir.path().join("manifold.toml"), config).unwrap();
    let alice = create_key(dir.path(), "alice", "authors");
    let bob = create_key(dir.path(), "bob", "");
    let gateway = start_gateway(dir.path());
    let url = gateway.url();
    let names = |listed: &Value| -> Vec<String> {
        listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let bobs = names(&ask_as(url, &bob, "tools/list", json!({})).await);
    assert!(
        bobs.contains(&"manifold_instructions".to_owned()),
        "{bobs:?}"
    );
    assert!(
        !bobs.contains(&"manifold_create_tool".to_owned()),
        "{bobs:?}"
    );
    let refused = ask_as(
        url,
        &bob,
        "tools/call",
        json!({"name": "manifold_create_tool", "arguments": word_count()}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32007, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unless a rule allows it by name"),
        "{refused}"
    );
    let alices = names(&ask_as(url, &alice, "tools/list", json!({})).await);
    assert!(
        alices.contains(&"manifold_create_tool".to_owned()),
        "{alices:?}"
    );
    let created = ask_as(
        url,
        &alice,
        "tools/call",
        json!({"name": "manifold_create_tool", "arguments": word_count()}),
    )
    .await;
    assert_eq!(created["result"]["isError"], false, "{created}");
    // Anyone the rules let see it may call it; the history names its author.
    let counted = ask_as(
        url,
        &bob,
        "tools/call",
        json!({"name": "word_count", "arguments": {"text": "bob counts too"}}),
    )
    .await;
    assert_eq!(
        counted["result"]["structuredContent"]["words"], 3,
        "{counted}"
    );
    let history = ask_as(
        url,
        &alice,
        "tools/call",
        json!({"name": "manifold_tool_history", "arguments": {"name": "word_count"}}),
    )
    .await;
    assert_eq!(
        history["result"]["structuredContent"]["versions"][0]["author"], "alice",
        "{history}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_authoring_turned_off_no_authoring_tool_is_listed_or_called() {
    let dir = ScratchDir::new("authored-off").unwrap();
    let config = format!(
        "{}\n[authoring]\nenabled = false\n",
        config(&dir.path().join("data"))
    );
    std::fs::write(dir.path().join("manifold.toml"), config).unwrap();
    let gateway = start_gateway(dir.path());
    let s = Session::open(gateway.url()).await;
    let listed = s
        .post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    let names: Vec<&str> = listed[0]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"manifold_health"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("manifold_")
            && n.ends_with("_tool")
            && *n != "manifold_call_tool"
            && *n != "manifold_search_tools"),
        "{names:?}"
    );
    assert!(!names.contains(&"manifold_instructions"), "{names:?}");
    let refused = s
        .post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "manifold_create_tool", "arguments": word_count()}}))
        .await;
    assert!(
        refused[0]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "{refused:?}"
    );
}

/// The documented examples (docs/examples/engineering-tools.toml), as a user would add them.
fn engineering_config(dir: &Path) -> String {
    let examples = workspace_root().join("docs/examples/engineering-tools.toml");
    format!(
        "{}\n{}",
        config(&dir.join("data")),
        std::fs::read_to_string(examples).unwrap()
    )
}

fn tool_names(listed: &[Value]) -> Vec<String> {
    listed[0]["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed:?}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engineering_examples_run_ngspice_and_calculix_from_the_configuration_file() {
    let dir = ScratchDir::new("authored-engineering").unwrap();
    let config_path = dir.path().join("manifold.toml");
    std::fs::write(&config_path, engineering_config(dir.path())).unwrap();
    let gateway = start_gateway(dir.path());
    let s = Session::open(gateway.url()).await;
    let names = tool_names(
        &s.post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .await,
    );
    assert!(
        names.contains(&"rc_transient".to_owned()) && names.contains(&"beam_deflection".to_owned()),
        "{names:?}"
    );

    let (r, _) = s
        .call(
            2,
            "rc_transient",
            json!({"resistance_ohm": 1000, "capacitance_f": 1e-6, "voltage_v": 5}),
        )
        .await;
    assert_eq!(r["isError"], false, "{r}");
    let rc = &r["structuredContent"];
    let expected = 5.0 * (1.0 - (-1.0f64).exp());
    assert!((rc["tau_s"].as_f64().unwrap() - 1e-3).abs() < 1e-12, "{rc}");
    assert!(
        (rc["v_at_tau"].as_f64().unwrap() - expected).abs() < 0.01 * expected,
        "{rc}"
    );
    assert!(
        rc["v_end"].as_f64().unwrap() > 0.99 * 5.0 * (1.0 - (-5.0f64).exp()),
        "{rc}"
    );

    let (r, _) = s
        .call(
            3,
            "beam_deflection",
            json!({"length_mm": 1000, "width_mm": 20, "height_mm": 20, "load_n": 100}),
        )
        .await;
    assert_eq!(r["isError"], false, "{r}");
    let beam = &r["structuredContent"];
    let analytic = 100.0 * 1000f64.powi(3) / (3.0 * 210_000.0 * (20.0 * 20f64.powi(3) / 12.0));
    assert!(
        (beam["euler_bernoulli_mm"].as_f64().unwrap() - analytic).abs() < 1e-9,
        "{beam}"
    );
    let solved = beam["tip_deflection_mm"].as_f64().unwrap();
    assert!(
        (solved - analytic).abs() < 0.03 * analytic,
        "CalculiX {solved} vs {analytic}"
    );

    // The file's tools are changed in the file only, and a reload applies the change.
    let (r, _) = s
        .call(
            4,
            "manifold_update_tool",
            json!({"name": "rc_transient", "description": "x"}),
        )
        .await;
    assert_eq!(r["isError"], true);
    assert!(
        text_of(&r).contains("defined in the configuration file"),
        "{r}"
    );
    let without_beam = engineering_config(dir.path());
    let cut = without_beam.find("[tools.beam_deflection]").unwrap();
    std::fs::write(&config_path, &without_beam[..cut]).unwrap();
    let started = Instant::now();
    loop {
        let names = tool_names(
            &s.post(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}))
                .await,
        );
        if !names.contains(&"beam_deflection".to_owned()) {
            assert!(names.contains(&"rc_transient".to_owned()), "{names:?}");
            break;
        }
        assert!(
            started.elapsed() < HANG_GUARD,
            "the reload never removed beam_deflection"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn an_ask_rule_holds_the_creation_of_a_tool_until_a_person_says_yes() {
    let dir = ScratchDir::new("authored-ask").unwrap();
    let config = format!(
        "{}\n[[rules]]\nname = \"new-code-asks\"\neffect = \"ask\"\ntools = [\"manifold_create_tool\", \"manifold_update_tool\"]\n",
        config(&dir.path().join("data"))
    );
    std::fs::write(dir.path().join("manifold.toml"), config).unwrap();
    let gateway = start_gateway(dir.path());
    for (mode, answer, created) in [("legacy", "decline", false), ("auto", "accept", true)] {
        let report = python_client_answering(
            gateway.url(),
            mode,
            json!([call("manifold_create_tool", word_count()), {"list": true}]),
            Some(answer),
        );
        let steps = report["steps"].as_array().unwrap();
        let asked = report["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{mode}: one question: {report}");
        assert!(
            asked[0].as_str().unwrap().contains("manifold_create_tool"),
            "{report}"
        );
        let listed = steps[1]["tools"].as_array().unwrap();
        assert_eq!(
            listed.iter().any(|t| t == "word_count"),
            created,
            "{mode} answered {answer}: {report}"
        );
        assert_eq!(
            steps[0]["isError"] == true || steps[0].get("error").is_some(),
            !created,
            "{report}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_client_closing_its_request_kills_the_running_tool() {
    let dir = ScratchDir::new("authored-close").unwrap();
    let gateway = start_gateway(dir.path());
    let s = Session::open(gateway.url()).await;
    s.create(
        1,
        sh_tool("lingers", "sleep 765.5 & sleep 765.5; wait", 60.0),
    )
    .await;
    let pending = modern_request(
        gateway.url(),
        None,
        "tools/call",
        json!({"name": "lingers", "arguments": {}}),
    );
    let call = tokio::spawn(async move {
        let _ = pending.send().await.map(|r| r.text());
    });
    let started = Instant::now();
    while processes_with("765.5").len() < 2 {
        assert!(started.elapsed() < HANG_GUARD, "the tool never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Dropping the request closes its connection: for a stateless client that is the cancellation.
    call.abort();
    assert_eq!(
        until_gone("765.5").await,
        Vec::<u32>::new(),
        "the tool's tree is gone"
    );
}
