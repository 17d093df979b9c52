//! `manifold serve` with stdio servers under `profile = "strict"`: real Node and Python peers
//! still list and answer through the gateway, and a server that reads a file outside its
//! workspace is refused sandboxed while the same server unsandboxed reads it. With the probe's
//! answer forced weaker (`MANIFOLD_SANDBOX_FORCE_PROBE`, a debug build), the fallback tier shows
//! in `manifold_health`, `/metrics` and `/readyz`, and a server that requires namespaces is
//! refused with the kernel's answer. Under the default profile, npm bin links run as configured,
//! and a server that dies on a path the sandbox hides says so in its health.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use manifold_testkit::{GatewayProcess, RawHttp, ServeCommand};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// A stdio MCP server with one tool, `read`, that returns the text of the file it is given.
const READER_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method, r = m.get("method"), None
    if method == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "reader", "version": "1"}}
    elif method == "tools/list":
        r = {"tools": [{"name": "read", "inputSchema": {"type": "object",
             "properties": {"path": {"type": "string"}}, "required": ["path"]}}]}
    elif method == "tools/call":
        try:
            text, err = open(m["params"]["arguments"]["path"]).read(), False
        except OSError as e:
            text, err = "refused: %s" % e.strerror, True
        r = {"content": [{"type": "text", "text": text}], "isError": err}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Starts `manifold serve` with `config`, the launcher built beside the binary.
fn serve(dir: &Path, config: &str) -> GatewayProcess {
    serve_forced(dir, config, None)
}

/// As `serve`, with the sandbox probe's answer forced to `forced` when given.
fn serve_forced(dir: &Path, config: &str, forced: Option<&str>) -> GatewayProcess {
    let launcher =
        manifold_testkit::workspace_binary("manifold-sandbox", "manifold-sandbox-exec").unwrap();
    assert_eq!(
        launcher.parent(),
        Path::new(MANIFOLD).parent(),
        "the launcher must sit beside manifold"
    );
    serve_binary(Path::new(MANIFOLD), dir, config, forced)
}

/// `manifold serve` from `binary` (a copy without the launcher beside it, for one test).
fn serve_binary(binary: &Path, dir: &Path, config: &str, forced: Option<&str>) -> GatewayProcess {
    let mut serve = ServeCommand::new(binary, dir)
        .config_text(config)
        .env("RUST_LOG", "warn,manifold_upstream=info")
        .env_remove("MANIFOLD_SANDBOX_FORCE_PROBE");
    if let Some(forced) = forced {
        serve = serve.env("MANIFOLD_SANDBOX_FORCE_PROBE", forced);
    }
    serve.start().unwrap()
}

fn client(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(MANIFOLD).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// server-filesystem's `write_file` (as `fs__write_file`) through the gateway at `url`.
fn write_file(url: &str, path: &Path, content: &str) -> (i32, String, String) {
    let path = format!("path={}", path_str(path));
    let content = format!("content={content}");
    client(&[
        "call",
        url,
        "fs__write_file",
        "--arg",
        &path,
        "--arg",
        &content,
    ])
}

/// A world-searchable scratch dir: a sandboxed server run by root runs as nobody, and binds are
/// made as it.
fn scratch(label: &str) -> PathBuf {
    let dir = manifold_testkit::fresh_dir(label).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn node_and_python_peers_list_and_answer_under_strict_from_their_own_entry_points() {
    let dir = scratch("sandboxed-peers");
    let node = manifold_testkit::node().unwrap();
    // No read_only for memory: the exposure rule makes node, its install and the package's
    // node_modules tree visible by itself.
    let memory =
        manifold_testkit::npm_package_entry("@modelcontextprotocol/server-memory").unwrap();
    // The venv's entry point as a user would configure it, no read_only either. Its python
    // links into an interpreter install that may sit under /root (0700): a root gateway's
    // launcher clones each mount tree before it becomes nobody, so no path has to be searched.
    let time = manifold_testkit::venv_bin("mcp-server-time").unwrap();
    let git = manifold_testkit::venv_bin("mcp-server-git").unwrap();
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("notes.txt"), "inside the sandbox\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "notes.txt"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "sandboxed commit",
        ],
    ] {
        let done = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(done.success(), "git {args:?}");
    }
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.memory]\ncommand = \"{node}\"\nargs = [\"{memory}\"]\n\
         env = {{ MEMORY_FILE_PATH = \"/workspace/memory.jsonl\" }}\n\
         [servers.memory.sandbox]\nprofile = \"strict\"\n\n\
         [servers.time]\ncommand = \"{time}\"\nargs = [\"--local-timezone\", \"UTC\"]\n\
         [servers.time.sandbox]\nprofile = \"strict\"\n\n\
         [servers.git]\ncommand = \"{git}\"\nargs = [\"--repository\", \"{repo}\"]\n\
         [servers.git.sandbox]\nprofile = \"strict\"\n",
        data = path_str(&dir.join("data")),
        node = path_str(&node),
        memory = path_str(&memory),
        time = path_str(&time),
        git = path_str(&git),
        repo = path_str(&repo),
    );
    let s = serve(&dir, &config);
    let (code, out, err) = client(&["list", "tools", s.url()]);
    assert_eq!(code, 0, "{err}");
    for tool in [
        "memory__create_entities",
        "memory__read_graph",
        "time__get_current_time",
        "git__git_log",
    ] {
        assert!(out.contains(tool), "{tool} missing from:\n{out}\n{err}");
    }
    let (code, out, err) = client(&[
        "call",
        s.url(),
        "memory__create_entities",
        "--json",
        r#"{"entities":[{"name":"sandbox","entityType":"test","observations":["inside"]}]}"#,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let written = dir.join("data/sandbox/memory/workspace/memory.jsonl");
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(text.contains("\"inside\""), "{text}");
    let (code, out, err) = client(&[
        "call",
        s.url(),
        "time__get_current_time",
        "--arg",
        "timezone=UTC",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("UTC"), "{out}");
    // The repository named on the command line is readable inside.
    let repo_arg = format!("repo_path={}", path_str(&repo));
    let (code, out, err) = client(&["call", s.url(), "git__git_log", "--arg", &repo_arg]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("sandboxed commit"), "{out}");
}

/// The SDK servers (Python, TypeScript v2, rmcp) and the other reference servers of peers.md,
/// each as a user would configure it, under strict set once in `[sandbox]`: all list their tools
/// and answer a call.
#[test]
fn sdk_and_reference_servers_list_and_answer_under_strict_from_the_defaults_table() {
    let dir = scratch("sandboxed-sdk-peers");
    let node = path_str(&manifold_testkit::node().unwrap());
    let peers = manifold_testkit::peers_dir().unwrap();
    let entry = |name: &str| path_str(&manifold_testkit::npm_package_entry(name).unwrap());
    let rmcp =
        manifold_testkit::workspace_binary("manifold-rmcp-peer", "manifold-rmcp-peer").unwrap();
    let allowed = dir.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [sandbox]\nprofile = \"strict\"\n\n\
         [servers.pysdk]\ncommand = \"{python}\"\nargs = [\"{py_server}\", \"stdio\"]\n\n\
         [servers.tsv2]\ncommand = \"{node}\"\nargs = [\"{ts_server}\", \"stdio\"]\n\n\
         [servers.rmcp]\ncommand = \"{rmcp}\"\nargs = [\"stdio\"]\n\n\
         [servers.everything]\ncommand = \"{node}\"\nargs = [\"{everything}\", \"stdio\"]\n\n\
         [servers.thinking]\ncommand = \"{node}\"\nargs = [\"{thinking}\"]\n\n\
         [servers.fs]\ncommand = \"{node}\"\nargs = [\"{filesystem}\", \"{allowed}\"]\n",
        data = path_str(&dir.join("data")),
        python = path_str(&manifold_testkit::python().unwrap()),
        py_server = path_str(&peers.join("python_server.py")),
        ts_server = path_str(&peers.join("ts_v2_server.mjs")),
        rmcp = path_str(&rmcp),
        everything = entry("@modelcontextprotocol/server-everything"),
        thinking = entry("@modelcontextprotocol/server-sequential-thinking"),
        filesystem = entry("@modelcontextprotocol/server-filesystem"),
        allowed = path_str(&allowed),
    );
    let s = serve(&dir, &config);
    let calls: [(&str, &[&str], &str); 6] = [
        (
            "pysdk__echo",
            &["--arg", "message=from-pysdk"],
            "from-pysdk",
        ),
        ("tsv2__echo", &["--arg", "message=from-tsv2"], "from-tsv2"),
        ("rmcp__echo", &["--arg", "message=from-rmcp"], "from-rmcp"),
        (
            "everything__echo",
            &["--arg", "message=from-everything"],
            "from-everything",
        ),
        (
            "thinking__sequentialthinking",
            &[
                "--json",
                r#"{"thought":"inside","nextThoughtNeeded":false,"thoughtNumber":1,"totalThoughts":1}"#,
            ],
            "thoughtNumber",
        ),
        ("fs__list_allowed_directories", &[], "allowed"),
    ];
    for (tool, args, expected) in calls {
        let mut argv = vec!["call", s.url(), tool];
        argv.extend_from_slice(args);
        let (code, out, err) = client(&argv);
        assert_eq!(code, 0, "{tool}: {out}\n{err}");
        assert!(out.contains(expected), "{tool}: {out}");
    }
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    for server in ["pysdk", "tsv2", "rmcp", "everything", "thinking", "fs"] {
        assert!(
            log.lines()
                .any(|l| l.contains("sandbox control") && l.contains(server)),
            "{server} started sandboxed: {log}"
        );
    }
}

#[test]
fn a_file_outside_the_workspace_is_refused_by_strict_and_by_the_default_and_read_with_off() {
    let dir = scratch("sandboxed-secret");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "the-secret-value").unwrap();
    let scripts = dir.join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("reader.py");
    std::fs::write(&script, READER_SERVER).unwrap();
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.boxed]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.boxed.sandbox]\nprofile = \"strict\"\nread_only = [\"{scripts}\"]\n\n\
         [servers.plain]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\n\
         [servers.loud]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.loud.sandbox]\nprofile = \"off\"\n",
        data = path_str(&dir.join("data")),
        script = path_str(&script),
        scripts = path_str(&scripts),
    );
    let s = serve(&dir, &config);
    let path_arg = format!("path={}", path_str(&secret));
    let (code, out, err) = client(&["call", s.url(), "loud__read", "--arg", &path_arg]);
    assert_eq!((code, out.trim()), (0, "the-secret-value"), "{err}");
    for name in ["boxed", "plain"] {
        let tool = format!("{name}__read");
        let (code, out, err) = client(&["call", s.url(), &tool, "--arg", &path_arg]);
        assert_eq!(code, 2, "{name}: {out}\n{err}");
        assert!(!out.contains("the-secret-value") && !err.contains("the-secret-value"));
        assert!(
            format!("{out}{err}").contains("refused: No such file or directory"),
            "{name}: {out}\n{err}"
        );
    }
    // Each control's enforcement is logged at each sandboxed server's start (the written strict
    // one and the one left to the default), and an explicit off is a warning that logs none.
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    let controls: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sandbox control"))
        .collect();
    assert!(!controls.iter().any(|l| l.contains("loud")), "{log}");
    for name in ["boxed", "plain"] {
        let own: Vec<&&str> = controls.iter().filter(|l| l.contains(name)).collect();
        assert!(own.len() >= 11, "{name}: {log}");
        for control in ["Namespaces", "Filesystem", "Network", "Seccomp", "Landlock"] {
            assert!(
                own.iter()
                    .any(|l| l.contains(control) && l.contains("Enforced")),
                "{name} {control}: {log}"
            );
        }
    }
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sandbox profile is \"off\""))
        .collect();
    assert!(
        !warnings.is_empty()
            && warnings
                .iter()
                .all(|l| l.contains("loud") && l.contains("WARN")),
        "{log}"
    );
}

/// Polls for this long at most for a server to reach the state a test waits for.
const SETTLE_ATTEMPTS: usize = 200;
const SETTLE_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// `manifold_health`'s structured content.
fn health(url: &str) -> serde_json::Value {
    let (code, out, err) = client(&["call", url, "manifold_health", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    serde_json::from_str(&out).unwrap()
}

fn upstream<'a>(health: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    health["structuredContent"]["upstreams"]
        .as_array()
        .and_then(|all| all.iter().find(|u| u["name"] == name))
        .unwrap_or_else(|| panic!("{name} missing from {health}"))
}

/// Health once `name` is in one of `states` (bounded polling: the server starts after `serve`
/// prints its URL).
fn health_when(url: &str, name: &str, states: &[&str]) -> serde_json::Value {
    for _ in 0..SETTLE_ATTEMPTS {
        let h = health(url);
        if states.iter().any(|s| upstream(&h, name)["state"] == *s) {
            return h;
        }
        std::thread::sleep(SETTLE_PAUSE);
    }
    panic!("{name} never reached {states:?}: {}", health(url));
}

/// A plain GET on the gateway's listener: status line and body.
fn get(url: &str, path: &str) -> (String, String) {
    let response = RawHttp::new(url).get(path).unwrap();
    (response.status_line.clone(), response.decoded_body())
}

/// A stateless (2026-07-28) `tools/call` of `tool` over a raw connection; the response body.
fn call_raw(url: &str, tool: &str) -> String {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    RawHttp::new(url)
        .request(
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", tool),
            ],
            &body,
        )
        .unwrap()
        .body
}

fn reader_script(dir: &Path) -> (PathBuf, PathBuf) {
    let scripts = dir.join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("reader.py");
    std::fs::write(&script, READER_SERVER).unwrap();
    (scripts, script)
}

#[test]
fn a_forced_fallback_tier_is_reported_degraded_in_health_metrics_and_readyz_but_stays_ready() {
    let dir = scratch("sandboxed-fallback");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "the-secret-value").unwrap();
    let (scripts, script) = reader_script(&dir);
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.fallback]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.fallback.sandbox]\nprofile = \"strict\"\nread_only = [\"{scripts}\"]\nrequire = []\n",
        data = path_str(&dir.join("data")),
        script = path_str(&script),
        scripts = path_str(&scripts),
    );
    let s = serve_forced(&dir, &config, Some("no-userns,landlock-abi=1"));
    let h = health_when(s.url(), "fallback", &["up"]);
    let sandbox = &upstream(&h, "fallback")["sandbox"];
    assert_eq!(sandbox["profile"], "strict", "{h}");
    assert_eq!(sandbox["degraded"], true, "{h}");
    let controls = &sandbox["controls"];
    assert_eq!(controls["namespaces"]["state"], "missing", "{h}");
    let why = controls["namespaces"]["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("EPERM") && why.contains("allow unprivileged user namespaces"),
        "errno and fix: {why}"
    );
    assert_eq!(controls["landlock"]["state"], "partial", "{h}");
    assert_eq!(controls["filesystem"]["state"], "partial", "{h}");
    assert_eq!(controls["network"]["state"], "partial", "{h}");
    for enforced in [
        "seccomp",
        "no_new_privs",
        "memory",
        "pids",
        "rlimits",
        "tree_kill",
    ] {
        assert_eq!(controls[enforced]["state"], "enforced", "{enforced}: {h}");
    }
    assert_eq!(h["structuredContent"]["status"], "degraded", "{h}");
    let text = h["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("fallback: sandbox DEGRADED (profile strict): namespaces=missing (")
            && text.contains("filesystem=partial")
            && text.contains("enforced: "),
        "{text}"
    );

    // The server still answers, and Landlock (ABI 1 is enough for this) still hides the secret.
    let path_arg = format!("path={}", path_str(&secret));
    let (_, out, err) = client(&["call", s.url(), "fallback__read", "--arg", &path_arg]);
    assert!(
        format!("{out}{err}").contains("refused: Permission denied")
            && !out.contains("the-secret-value"),
        "{out}\n{err}"
    );

    let (status, metrics) = get(s.url(), "/metrics");
    assert!(status.contains("200"), "{status}");
    for (series, value) in [
        (
            r#"manifold_sandbox_enforced{upstream="fallback",control="namespaces",state="missing"}"#,
            "0",
        ),
        (
            r#"manifold_sandbox_enforced{upstream="fallback",control="filesystem",state="partial"}"#,
            "0",
        ),
        (
            r#"manifold_sandbox_enforced{upstream="fallback",control="seccomp",state="enforced"}"#,
            "1",
        ),
    ] {
        assert!(
            metrics.lines().any(|l| l == format!("{series} {value}")),
            "{series} {value} missing from:\n{metrics}"
        );
    }

    let (status, body) = get(s.url(), "/readyz");
    assert!(
        status.contains("200"),
        "a degraded sandbox is still ready: {status}\n{body}"
    );
    let ready: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        ready["sandboxDegraded"],
        serde_json::json!(["fallback"]),
        "{body}"
    );
    assert_eq!(ready["upstreams"][0]["sandbox"], "degraded", "{body}");
}

#[test]
fn a_server_requiring_namespaces_is_refused_with_the_kernels_answer_when_they_are_missing() {
    let dir = scratch("sandboxed-required");
    let (scripts, script) = reader_script(&dir);
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.needs-ns]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.needs-ns.sandbox]\nprofile = \"strict\"\nread_only = [\"{scripts}\"]\nrequire = [\"namespaces\"]\n",
        data = path_str(&dir.join("data")),
        script = path_str(&script),
        scripts = path_str(&scripts),
    );
    let s = serve_forced(&dir, &config, Some("no-userns"));
    let h = health_when(s.url(), "needs-ns", &["down", "crash-loop"]);
    let u = upstream(&h, "needs-ns");
    let last = u["lastError"].as_str().unwrap_or_default();
    assert!(
        last.contains("sandbox refused the server: required control Namespaces is not enforced")
            && last.contains("EPERM")
            && last.contains("allow unprivileged user namespaces"),
        "{h}"
    );
    assert_eq!(u["sandbox"]["controls"], serde_json::Value::Null, "{h}");
    let text = h["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("needs-ns: ") && text.contains("Namespaces is not enforced"),
        "{text}"
    );
    // It never ran, so it never listed its tool: a call is refused as unknown, and the log
    // says why the server is down.
    let (code, out, err) = client(&[
        "call",
        s.url(),
        "needs-ns__read",
        "--arg",
        "path=/etc/hostname",
    ]);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("no tool named \"needs-ns__read\""),
        "{out}\n{err}"
    );
    // Through the gateway directly, the refusal says which server is not running, and why.
    let answer = call_raw(s.url(), "needs-ns__read");
    assert!(
        answer.contains("unknown tool \\\"needs-ns__read\\\"")
            && answer.contains("the server \\\"needs-ns\\\" that would offer it is not running")
            && answer.contains("Namespaces is not enforced"),
        "{answer}"
    );
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("needs-ns") && l.contains("Namespaces is not enforced")),
        "{log}"
    );
    let (status, body) = get(s.url(), "/readyz");
    assert!(status.contains("503"), "{status}\n{body}");
    assert!(body.contains("Namespaces is not enforced"), "{body}");
}

#[test]
fn a_directory_named_on_the_command_line_is_readable_but_not_writable_under_strict() {
    let dir = scratch("sandboxed-fs-arg");
    let shared = dir.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("note.txt"), "from-the-host").unwrap();
    let node = manifold_testkit::node().unwrap();
    let fs =
        manifold_testkit::npm_package_entry("@modelcontextprotocol/server-filesystem").unwrap();
    // No read_only: the exposure rule exposes node, the package tree and the directory argument.
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.fs]\ncommand = \"{node}\"\nargs = [\"{fs}\", \"{shared}\"]\n\
         [servers.fs.sandbox]\nprofile = \"strict\"\n",
        data = path_str(&dir.join("data")),
        node = path_str(&node),
        fs = path_str(&fs),
        shared = path_str(&shared),
    );
    let s = serve(&dir, &config);
    let note = format!("path={}", path_str(&shared.join("note.txt")));
    let (code, out, err) = client(&["call", s.url(), "fs__read_text_file", "--arg", &note]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("from-the-host"), "{out}");
    let written = shared.join("new.txt");
    let (code, out, err) = write_file(s.url(), &written, "x");
    assert_ne!(
        code, 0,
        "a write to a read-only argument dir succeeded:\n{out}\n{err}"
    );
    let said = format!("{out}{err}");
    assert!(
        said.contains("EROFS") || said.contains("read-only"),
        "refused for another reason:\n{said}"
    );
    assert!(!written.exists(), "the write reached the host");
}

/// The same server with its directory in `read_write`: the write lands on the host. Under a root
/// gateway a listed dir the server's uid cannot write is named in a warning at start.
#[test]
fn a_read_write_directory_takes_the_servers_writes() {
    let dir = scratch("sandboxed-fs-rw");
    let shared = dir.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    // Left as created: 0755, owned by the gateway's user.
    let locked = dir.join("locked");
    std::fs::create_dir_all(&locked).unwrap();
    if nix::unistd::geteuid().is_root() {
        // A root gateway runs the server as nobody: the dir is handed to it, as a user would.
        let (uid, gid) = manifold_sandbox::spec::DEFAULT_ROOT_RUN_AS;
        std::os::unix::fs::chown(&shared, Some(uid), Some(gid)).unwrap();
    }
    let node = manifold_testkit::node().unwrap();
    let fs =
        manifold_testkit::npm_package_entry("@modelcontextprotocol/server-filesystem").unwrap();
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.fs]\ncommand = \"{node}\"\nargs = [\"{fs}\", \"{shared}\"]\n\
         [servers.fs.sandbox]\nprofile = \"strict\"\nread_write = [\"{shared}\"]\n\n\
         [servers.locked]\ncommand = \"{node}\"\nargs = [\"{fs}\", \"{locked}\"]\n\
         [servers.locked.sandbox]\nprofile = \"strict\"\nread_write = [\"{locked}\"]\n",
        data = path_str(&dir.join("data")),
        node = path_str(&node),
        fs = path_str(&fs),
        shared = path_str(&shared),
        locked = path_str(&locked),
    );
    let s = serve(&dir, &config);
    let written = shared.join("new.txt");
    let (code, out, err) = write_file(s.url(), &written, "written-inside");
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "written-inside");
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("cannot write it"))
        .collect();
    if nix::unistd::geteuid().is_root() {
        assert!(
            warned.len() == 1 && warned[0].contains("locked") && warned[0].contains("WARN"),
            "{log}"
        );
    } else {
        assert!(
            warned.is_empty(),
            "the gateway's own uid writes its dirs: {log}"
        );
    }
}

#[test]
fn without_the_launcher_the_default_profile_runs_unsandboxed_and_says_so_and_strict_is_refused() {
    let dir = scratch("sandboxed-no-launcher");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "the-secret-value").unwrap();
    let (scripts, script) = reader_script(&dir);
    // A manifold installed without manifold-sandbox-exec beside it.
    let alone = dir.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    let binary = alone.join("manifold");
    // A hard link takes no space (a copy leaked a few hundred MB per run in the temp dir); a
    // copy only where the temp dir is on another filesystem.
    if std::fs::hard_link(MANIFOLD, &binary).is_err() {
        std::fs::copy(MANIFOLD, &binary).unwrap();
    }
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.plain]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\n\
         [servers.boxed]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.boxed.sandbox]\nprofile = \"strict\"\nread_only = [\"{scripts}\"]\n",
        data = path_str(&dir.join("data")),
        script = path_str(&script),
        scripts = path_str(&scripts),
    );
    let s = serve_binary(&binary, &dir, &config, None);
    let h = health_when(s.url(), "plain", &["up"]);
    let sandbox = &upstream(&h, "plain")["sandbox"];
    assert_eq!(
        (&sandbox["profile"], &sandbox["degraded"]),
        (&serde_json::json!("default"), &serde_json::json!(true)),
        "{h}"
    );
    for control in ["namespaces", "filesystem", "network", "seccomp"] {
        let c = &sandbox["controls"][control];
        assert_eq!(c["state"], "missing", "{control}: {h}");
        assert!(
            c["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("manifold-sandbox-exec"),
            "the detail names the missing launcher: {h}"
        );
    }
    // Unsandboxed indeed: it reads what a sandbox hides.
    let path_arg = format!("path={}", path_str(&secret));
    let (code, out, err) = client(&["call", s.url(), "plain__read", "--arg", &path_arg]);
    assert_eq!((code, out.trim()), (0, "the-secret-value"), "{err}");
    // A written profile is not relaxed: that server is refused, naming the launcher.
    let h = health_when(s.url(), "boxed", &["down", "failed", "restarting"]);
    let boxed = upstream(&h, "boxed");
    assert!(
        boxed.to_string().contains("manifold-sandbox-exec"),
        "the refusal names the launcher: {boxed}"
    );
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("plain")
            && l.contains("default profile could not be built")),
        "{log}"
    );
    drop(s);
    let _ = std::fs::remove_file(&binary);
}

#[test]
fn the_default_profile_lets_a_server_write_the_dir_its_command_line_names() {
    let dir = scratch("sandboxed-default-fs");
    let notes = dir.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    if nix::unistd::geteuid().is_root() {
        // A root gateway runs the server as nobody: the dir is handed to it, as a user would.
        let (uid, gid) = manifold_sandbox::spec::DEFAULT_ROOT_RUN_AS;
        std::os::unix::fs::chown(&notes, Some(uid), Some(gid)).unwrap();
    }
    let node = manifold_testkit::node().unwrap();
    let fs =
        manifold_testkit::npm_package_entry("@modelcontextprotocol/server-filesystem").unwrap();
    // No sandbox table at all: the default profile.
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.fs]\ncommand = \"{node}\"\nargs = [\"{fs}\", \"{notes}\"]\n",
        data = path_str(&dir.join("data")),
        node = path_str(&node),
        fs = path_str(&fs),
        notes = path_str(&notes),
    );
    let s = serve(&dir, &config);
    let written = notes.join("new.txt");
    let (code, out, err) = write_file(s.url(), &written, "written-inside");
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "written-inside");
    let h = health_when(s.url(), "fs", &["up"]);
    let sandbox = &upstream(&h, "fs")["sandbox"];
    assert_eq!(
        (&sandbox["profile"], &sandbox["degraded"]),
        (&serde_json::json!("default"), &serde_json::json!(false)),
        "{h}"
    );
}

/// npm's bin links as a user configures them after `npm install`, under the default profile:
/// `node_modules/.bin/NAME` itself, and a link to it from outside the tree (`~/bin/NAME`, say).
/// Node finds the package's imports from the script's real path, so both need the whole tree
/// visible and the links kept as links; both servers list their tools and answer.
#[test]
fn npm_bin_links_run_under_the_default_profile_from_inside_and_outside_the_tree() {
    let dir = scratch("sandboxed-bin-links");
    let bin = manifold_testkit::peers_dir()
        .unwrap()
        .join("node_modules/.bin");
    let memory = bin.join("mcp-server-memory");
    let outside = dir.join("bin/everything");
    std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(bin.join("mcp-server-everything"), &outside).unwrap();
    // The scripts' `#!/usr/bin/env node` finds the pinned node first.
    let node = manifold_testkit::node().unwrap();
    let path = format!("{}:/usr/bin:/bin", path_str(node.parent().unwrap()));
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.memory]\ncommand = \"{memory}\"\n\
         env = {{ PATH = \"{path}\", MEMORY_FILE_PATH = \"/workspace/memory.jsonl\" }}\n\n\
         [servers.everything]\ncommand = \"{outside}\"\nargs = [\"stdio\"]\n\
         env = {{ PATH = \"{path}\" }}\n",
        data = path_str(&dir.join("data")),
        memory = path_str(&memory),
        outside = path_str(&outside),
    );
    let s = serve(&dir, &config);
    for name in ["memory", "everything"] {
        // Health names the cause when one never comes up.
        let h = health_when(s.url(), name, &["up"]);
        assert_eq!(upstream(&h, name)["sandbox"]["profile"], "default", "{h}");
    }
    let (code, out, err) = client(&["call", s.url(), "memory__read_graph"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("entities"), "{out}");
    let (code, out, err) = client(&[
        "call",
        s.url(),
        "everything__echo",
        "--arg",
        "message=through a bin link",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("through a bin link"), "{out}");
}

/// A server that dies at start because the sandbox hides a path it imports from: health names
/// the error line of its stderr (not its last line) and says what to do. The same server with
/// the path listed in `read_only` comes up.
#[test]
fn a_server_that_cannot_find_a_hidden_path_is_told_apart_and_read_only_fixes_it() {
    let dir = scratch("sandboxed-hidden-import");
    let (scripts, _) = reader_script(&dir);
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("reader_lib.py"), READER_SERVER).unwrap();
    let main = scripts.join("main.py");
    std::fs::write(
        &main,
        format!(
            "import sys\nsys.path.insert(0, {lib:?})\nimport reader_lib\n",
            lib = path_str(&lib)
        ),
    )
    .unwrap();
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.hidden]\ncommand = \"python3\"\nargs = [\"-u\", \"{main}\"]\n\n\
         [servers.listed]\ncommand = \"python3\"\nargs = [\"-u\", \"{main}\"]\n\
         [servers.listed.sandbox]\nread_only = [\"{lib}\"]\n",
        data = path_str(&dir.join("data")),
        main = path_str(&main),
        lib = path_str(&lib),
    );
    let s = serve(&dir, &config);
    health_when(s.url(), "listed", &["up"]);
    let h = health_when(s.url(), "hidden", &["down", "crash-loop"]);
    let error = upstream(&h, "hidden")["lastError"]
        .as_str()
        .unwrap()
        .to_owned();
    for part in [
        "its stderr said: ModuleNotFoundError: No module named 'reader_lib'",
        "it runs sandboxed",
        "manifold doctor",
        "[servers.hidden.sandbox] read_only",
    ] {
        assert!(error.contains(part), "{part:?} missing from {error}");
    }
}

/// A sandboxed server whose program is not on its PATH is not handed to the launcher (whose
/// failed exec would read as a sandbox that could not be built, and the default profile would
/// then try it unsandboxed): health names the program and the PATH searched.
#[test]
fn a_missing_program_is_named_with_the_path_searched_and_never_run_unsandboxed() {
    let dir = scratch("sandboxed-missing-program");
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.gone]\ncommand = \"no-such-mcp-server\"\nenv = {{ PATH = \"/usr/bin:/bin\" }}\n",
        data = path_str(&dir.join("data")),
    );
    let s = serve(&dir, &config);
    let h = health_when(s.url(), "gone", &["down", "crash-loop"]);
    let error = upstream(&h, "gone")["lastError"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.contains(
            "\"no-such-mcp-server\" is not an executable file in any dir of the PATH it gets (/usr/bin:/bin)"
        ),
        "{error}"
    );
    assert!(!s.log().contains("runs unsandboxed"), "{}", s.log());
}

/// `docker run -i --rm IMAGE` under the default profile: the container is the server's sandbox,
/// so the engine's CLI starts as it is (here a stand-in `docker` on the server's PATH that runs
/// the reader directly, so what it reads shows it is not boxed), and health says so: profile
/// default, every control off with the reason, not degraded.
#[test]
fn a_container_engine_under_the_default_profile_is_left_to_its_container_and_health_says_why() {
    let dir = scratch("sandboxed-container-engine");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "outside-any-box").unwrap();
    let (_, script) = reader_script(&dir);
    let bin = dir.join("engine-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let docker = bin.join("docker");
    std::fs::write(
        &docker,
        format!("#!/bin/sh\nexec python3 {}\n", path_str(&script)),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", path_str(&bin), std::env::var("PATH").unwrap());
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.image]\ncommand = \"docker\"\nargs = [\"run\", \"-i\", \"--rm\", \"mcp/reader\"]\n\
         env = {{ PATH = \"{path}\" }}\n",
        data = path_str(&dir.join("data")),
    );
    let s = serve(&dir, &config);
    let path_arg = format!("path={}", path_str(&secret));
    let (code, out, err) = client(&["call", s.url(), "image__read", "--arg", &path_arg]);
    assert_eq!((code, out.trim()), (0, "outside-any-box"), "{err}");
    let h = health_when(s.url(), "image", &["up"]);
    let sandbox = &upstream(&h, "image")["sandbox"];
    assert_eq!(
        (&sandbox["profile"], &sandbox["degraded"]),
        (&serde_json::json!("default"), &serde_json::json!(false)),
        "{h}"
    );
    let controls = sandbox["controls"].as_object().unwrap();
    assert_eq!(controls.len(), 11, "{h}");
    for (control, state) in controls {
        assert_eq!(state["state"], "off", "{control}: {h}");
        assert!(
            state["detail"]
                .as_str()
                .unwrap()
                .contains("the server runs in the container docker starts, which is its sandbox"),
            "{control}: {h}"
        );
    }
    assert!(
        !s.log().contains("sandbox profile is \"off\""),
        "{}",
        s.log()
    );
    // /readyz and the dashboard's overview say "container", not "enforced" nor "off".
    let (status, body) = get(s.url(), "/readyz");
    let ready: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(status.contains("200"), "{status}: {body}");
    assert_eq!(ready["upstreams"][0]["sandbox"], "container", "{body}");
    assert_eq!(ready["sandboxDegraded"], serde_json::json!([]), "{body}");
}

/// The certificate-authority variables reach a child (sandboxed or not), so a host whose TLS
/// goes through its own CA works for `uvx`, pip, curl and node; a variable outside the allowlist
/// does not. Read from the child's own `/proc/self/environ`.
#[test]
fn certificate_authority_variables_reach_children_and_other_variables_do_not() {
    let dir = scratch("sandboxed-ca-env");
    let (_, script) = reader_script(&dir);
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.boxed]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\n\
         [servers.plain]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.plain.sandbox]\nprofile = \"off\"\n",
        data = path_str(&dir.join("data")),
        script = path_str(&script),
    );
    let s = ServeCommand::new(Path::new(MANIFOLD), &dir)
        .config_text(config)
        .env("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
        .env("NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/ca-certificates.crt")
        .env("MANIFOLD_TEST_NOT_ALLOWED", "kept-from-children")
        .env_remove("MANIFOLD_SANDBOX_FORCE_PROBE")
        .start()
        .unwrap();
    for name in ["boxed", "plain"] {
        let tool = format!("{name}__read");
        let (code, out, err) =
            client(&["call", s.url(), &tool, "--arg", "path=/proc/self/environ"]);
        assert_eq!(code, 0, "{name}: {out}\n{err}");
        for allowed in [
            "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
            "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt",
        ] {
            assert!(
                out.contains(allowed),
                "{name}: {allowed} missing from {out}"
            );
        }
        assert!(!out.contains("kept-from-children"), "{name}: {out}");
    }
}
