//! Why: every interop test file meets the same real peers (tests/peers/README.md) the same way, so
//! how each peer is launched, how the test client answers a server's elicitation and sampling
//! requests, how results are read, and the check that no peer process outlives its test live here
//! once instead of drifting apart per file.

// Each test binary that includes this module uses a different part of it.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_testkit::{
    ChildGuard, free_port, loopback_preload, node, npm_package_entry, peers_dir,
    process_group_members, process_is_running, python, spawn_http_peer, venv_bin, workspace_root,
};
use manifold_upstream::paginate::ListKind;
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{
    Call, CallEvent, CallOptions, ClientIdentity, ConnectOptions, Connection, EraChoice, HttpSpec,
    HttpTransportChoice, PeerInfo, ServerRequest, ServerRequestHandler, Target, UpstreamError,
    connect,
};
use manifold_wire::{ErrorCode, ErrorObject, Kind, Message};
use serde_json::{Value, json};

/// Bounds a step that would otherwise hang the suite; never a performance assertion.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Per-request deadline used by every test call (a hang guard, not a latency claim).
pub fn call_options() -> CallOptions {
    CallOptions::with_timeout(Duration::from_secs(30))
}

/// The name the test client's elicitation handler gives.
pub const ELICITED_NAME: &str = "Ada Lovelace";
/// The text the test client's "model" samples.
pub const SAMPLED_TEXT: &str = "forty-two, said the test model";
/// The model the test client claims to have sampled with.
pub const SAMPLING_MODEL: &str = "manifold-test-model";
/// What a client with [`AnsweringHandler`] declares.
pub const ANSWERING_CAPABILITIES: &str = r#"{"elicitation":{},"sampling":{}}"#;

// ---------------------------------------------------------------------------------------------
// Scratch directories

/// A directory under the system temp dir, removed when dropped.
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    pub fn new(label: &str) -> ScratchDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "manifold-peers-{label}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap();
        // Canonical, because servers such as server-filesystem compare resolved paths.
        let path = path.canonicalize().unwrap();
        ScratchDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A git repository with one commit; returns the commit's hash.
pub fn git_repo_with_one_commit(dir: &Path, message: &str) -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "Manifold Test")
            .env("GIT_AUTHOR_EMAIL", "test@manifold.invalid")
            .env("GIT_COMMITTER_NAME", "Manifold Test")
            .env("GIT_COMMITTER_EMAIL", "test@manifold.invalid")
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
    git(&["commit", "-q", "-m", message]);
    git(&["rev-parse", "HEAD"]).trim().to_owned()
}

// ---------------------------------------------------------------------------------------------
// Launching peers

/// A stdio target: `command args...` with `env` added to the child's minimal environment.
pub fn stdio(command: impl Into<OsString>, args: &[&str], env: &[(&str, String)]) -> Target {
    Target::Stdio(StdioSpec {
        command: command.into().to_string_lossy().into_owned(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        ..StdioSpec::default()
    })
}

fn npm_entry(package: &str) -> String {
    npm_package_entry(package)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn peer_script(name: &str) -> String {
    peers_dir()
        .unwrap()
        .join(name)
        .to_string_lossy()
        .into_owned()
}

pub const EVERYTHING: &str = "@modelcontextprotocol/server-everything";

/// server-everything over stdio.
pub fn everything_stdio() -> Target {
    stdio(node().unwrap(), &[&npm_entry(EVERYTHING), "stdio"], &[])
}

/// A document server-everything serves as `demo://resource/static/document/<name>`, read from its
/// package, so a test can compare what came over the wire with the bytes on disk.
pub fn everything_document(name: &str) -> String {
    let entry = npm_package_entry(EVERYTHING).unwrap();
    let dist = entry.parent().unwrap();
    std::fs::read_to_string(dist.join("docs").join(name)).unwrap()
}

/// server-filesystem over stdio, allowed `dir` only.
pub fn filesystem_stdio(dir: &Path) -> Target {
    stdio(
        node().unwrap(),
        &[
            &npm_entry("@modelcontextprotocol/server-filesystem"),
            &dir.to_string_lossy(),
        ],
        &[],
    )
}

/// server-memory over stdio, storing its graph in `file`.
pub fn memory_stdio(file: &Path) -> Target {
    stdio(
        node().unwrap(),
        &[&npm_entry("@modelcontextprotocol/server-memory")],
        &[("MEMORY_FILE_PATH", file.to_string_lossy().into_owned())],
    )
}

/// mcp-server-time (PyPI) over stdio.
pub fn time_stdio() -> Target {
    stdio(venv_bin("mcp-server-time").unwrap(), &[], &[])
}

/// mcp-server-git (PyPI) over stdio, on `repo`.
pub fn git_stdio(repo: &Path) -> Target {
    stdio(
        venv_bin("mcp-server-git").unwrap(),
        &["--repository", &repo.to_string_lossy()],
        &[],
    )
}

/// tests/peers/python_server.py over stdio.
pub fn python_stdio() -> Target {
    stdio(
        python().unwrap(),
        &[&peer_script("python_server.py"), "stdio"],
        &[],
    )
}

/// tests/peers/ts_v2_server.mjs over stdio.
pub fn ts_v2_stdio() -> Target {
    stdio(
        node().unwrap(),
        &[&peer_script("ts_v2_server.mjs"), "stdio"],
        &[],
    )
}

/// The rmcp peer (crates/rmcp-peer) over stdio.
pub fn rmcp_stdio() -> Target {
    stdio(rmcp_peer_binary(), &["stdio"], &[])
}

/// The rmcp peer's executable: `$MANIFOLD_RMCP_PEER`, else built (or found up to date) by cargo,
/// which prints where the executable is. Building is a no-op when `cargo test --workspace` already
/// built it.
pub fn rmcp_peer_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("MANIFOLD_RMCP_PEER").filter(|p| !p.is_empty()) {
                return PathBuf::from(path);
            }
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let out = Command::new(cargo)
                .args(["build", "--quiet", "-p", "manifold-rmcp-peer", "--message-format=json"])
                .arg("--manifest-path")
                .arg(workspace_root().join("Cargo.toml"))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "building manifold-rmcp-peer failed (set MANIFOLD_RMCP_PEER to a built binary to skip this): {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .filter(|m| m["reason"] == "compiler-artifact")
                .filter(|m| m["target"]["name"] == "manifold-rmcp-peer")
                .find_map(|m| m["executable"].as_str().map(PathBuf::from))
                .expect("cargo named no executable for manifold-rmcp-peer")
        })
        .clone()
}

/// An HTTP peer and where it listens; dropping it kills its process group.
pub struct HttpPeer {
    pub guard: ChildGuard,
    pub base: String,
}

impl HttpPeer {
    /// `base` + `path`, e.g. `peer.url("/mcp")`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

async fn http_peer<I, S>(
    program: PathBuf,
    args: I,
    env: Vec<(String, String)>,
    port: u16,
) -> HttpPeer
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let guard = spawn_http_peer(program, args, env, port).await.unwrap();
    HttpPeer {
        guard,
        base: format!("http://127.0.0.1:{port}"),
    }
}

/// server-everything over HTTP: `mode` is `streamableHttp` (serves /mcp) or `sse` (serves /sse).
pub async fn everything_http(mode: &str) -> HttpPeer {
    let port = free_port().unwrap();
    let preload = loopback_preload().unwrap();
    http_peer(
        node().unwrap(),
        [
            OsString::from("--require"),
            preload.into_os_string(),
            OsString::from(npm_entry(EVERYTHING)),
            OsString::from(mode),
        ],
        vec![("PORT".to_owned(), port.to_string())],
        port,
    )
    .await
}

/// tests/peers/python_server.py over HTTP: `mode_args` is e.g. `["http"]`, `["http", "--stateless"]`,
/// `["http", "--json"]` (all serve /mcp) or `["sse"]` (serves /sse).
pub async fn python_http(mode_args: &[&str]) -> HttpPeer {
    let port = free_port().unwrap();
    let mut args = vec![peer_script("python_server.py")];
    args.extend(mode_args.iter().map(|a| (*a).to_owned()));
    args.extend(["--port".to_owned(), port.to_string()]);
    http_peer(python().unwrap(), args, Vec::new(), port).await
}

/// tests/peers/ts_v2_server.mjs over HTTP (serves /mcp).
pub async fn ts_v2_http() -> HttpPeer {
    let port = free_port().unwrap();
    http_peer(
        node().unwrap(),
        [
            peer_script("ts_v2_server.mjs"),
            "http".to_owned(),
            "--port".to_owned(),
            port.to_string(),
        ],
        Vec::new(),
        port,
    )
    .await
}

/// The rmcp peer over Streamable HTTP (serves /mcp).
pub async fn rmcp_http() -> HttpPeer {
    let port = free_port().unwrap();
    http_peer(
        rmcp_peer_binary(),
        ["http".to_owned(), "--port".to_owned(), port.to_string()],
        Vec::new(),
        port,
    )
    .await
}

pub fn http_target(url: String, transport: HttpTransportChoice) -> Target {
    Target::Http(HttpSpec {
        url,
        transport,
        ..HttpSpec::default()
    })
}

// ---------------------------------------------------------------------------------------------
// The test client's answers to server requests

/// Answers elicitation and sampling like a person and a model would (and `roots/list` with the
/// roots it was given), and records every request, so a test can check both what the server asked
/// and that the answer shaped the tool's result.
#[derive(Default)]
pub struct AnsweringHandler {
    seen: Mutex<Vec<ServerRequest>>,
    roots: Vec<PathBuf>,
}

impl AnsweringHandler {
    /// A handler that also answers `roots/list` with these directories.
    pub fn with_roots(roots: Vec<PathBuf>) -> AnsweringHandler {
        AnsweringHandler {
            roots,
            ..AnsweringHandler::default()
        }
    }

    pub fn seen(&self) -> Vec<ServerRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// The recorded requests of one method, with their params parsed.
    pub fn seen_params(&self, method: &str) -> Vec<Value> {
        self.seen()
            .into_iter()
            .filter(|r| r.method == method)
            .map(|r| serde_json::from_str(r.params.as_deref().unwrap_or("null")).unwrap())
            .collect()
    }
}

fn answer(request: &ServerRequest, roots: &[PathBuf]) -> Result<Value, ErrorObject> {
    let params: Value =
        serde_json::from_str(request.params.as_deref().unwrap_or("null")).unwrap_or(Value::Null);
    match request.method.as_str() {
        "elicitation/create" => {
            // Fill only what the form asks for: strict schemas reject unknown fields.
            let asked = &params["requestedSchema"]["properties"];
            let mut content = serde_json::Map::new();
            if asked.get("name").is_some() {
                content.insert("name".to_owned(), json!(ELICITED_NAME));
            }
            if asked.get("check").is_some() {
                content.insert("check".to_owned(), json!(true));
            }
            Ok(json!({ "action": "accept", "content": content }))
        }
        "sampling/createMessage" => Ok(json!({
            "role": "assistant",
            "content": { "type": "text", "text": SAMPLED_TEXT },
            "model": SAMPLING_MODEL,
            "stopReason": "endTurn"
        })),
        "roots/list" if !roots.is_empty() => Ok(json!({
            "roots": roots
                .iter()
                .map(|r| json!({ "uri": format!("file://{}", r.display()), "name": "test root" }))
                .collect::<Vec<_>>()
        })),
        other => Err(ErrorObject::new(
            ErrorCode::MethodNotFound,
            format!("the interop test client does not answer {other}"),
        )),
    }
}

impl ServerRequestHandler for AnsweringHandler {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        let outcome = answer(&request, &self.roots).map(|v| v.to_string());
        self.seen.lock().unwrap().push(request);
        Box::pin(async move { outcome })
    }
}

/// Shares one handler between the connection and the test.
struct SharedHandler(Arc<AnsweringHandler>);

impl ServerRequestHandler for SharedHandler {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        self.0.handle(request)
    }
}

// ---------------------------------------------------------------------------------------------
// Connecting

/// Connects with the default client identity (no capabilities) and the given era.
pub async fn open(label: &str, target: &Target, era: EraChoice) -> (Connection, PeerInfo) {
    let mut options = ConnectOptions::new(label);
    options.era = era;
    tokio::time::timeout(HANG_GUARD, connect(target, &options))
        .await
        .expect("connect hung")
        .unwrap_or_else(|e| panic!("could not connect to {label}: {e}"))
}

/// Connects declaring elicitation and sampling, answered by a recording [`AnsweringHandler`].
pub async fn open_answering(
    label: &str,
    target: &Target,
    era: EraChoice,
) -> (Connection, PeerInfo, Arc<AnsweringHandler>) {
    let handler = Arc::new(AnsweringHandler::default());
    let (conn, info) = open_with_handler(
        label,
        target,
        era,
        ANSWERING_CAPABILITIES,
        Arc::clone(&handler),
    )
    .await;
    (conn, info, handler)
}

/// Connects declaring `capabilities` (raw JSON), answered by `handler`.
pub async fn open_with_handler(
    label: &str,
    target: &Target,
    era: EraChoice,
    capabilities: &str,
    handler: Arc<AnsweringHandler>,
) -> (Connection, PeerInfo) {
    let mut options = ConnectOptions::new(label);
    options.era = era;
    options.client = ClientIdentity {
        name: "manifold-interop-tests".to_owned(),
        version: "0".to_owned(),
        capabilities: capabilities.to_owned(),
    };
    options.handler = Arc::new(SharedHandler(handler));
    tokio::time::timeout(HANG_GUARD, connect(target, &options))
        .await
        .expect("connect hung")
        .unwrap_or_else(|e| panic!("could not connect to {label}: {e}"))
}

/// The pid in a stdio connection's description ("stdio CMD (pid N)").
pub fn stdio_pid(conn: &Connection) -> u32 {
    let describe = conn.describe();
    let (_, after) = describe
        .rsplit_once("(pid ")
        .unwrap_or_else(|| panic!("no pid in {describe:?}"));
    after.trim_end_matches(')').parse().unwrap()
}

/// Closes a stdio connection and checks that its child and the child's whole process group are
/// gone: no peer may outlive its test.
pub async fn close_stdio_and_check_gone(conn: Connection) {
    let pid = stdio_pid(&conn);
    tokio::time::timeout(HANG_GUARD, conn.close())
        .await
        .expect("close hung");
    assert!(conn.is_closed());
    assert!(
        !process_is_running(pid),
        "the stdio server (pid {pid}) is still running after close"
    );
    assert_eq!(
        process_group_members(pid),
        Vec::<u32>::new(),
        "members of the stdio server's process group survived close"
    );
}

/// Closes an HTTP connection (its server dies with its guard).
pub async fn close_http(conn: Connection) {
    tokio::time::timeout(HANG_GUARD, conn.close())
        .await
        .expect("close hung");
    assert!(conn.is_closed());
}

// ---------------------------------------------------------------------------------------------
// Reading results

/// The result of a response, as JSON; a JSON-RPC error fails the test with its text.
pub fn result_of(method: &str, response: &Message) -> Value {
    assert_eq!(
        response.kind(),
        Kind::Result,
        "{method} answered an error: {}",
        response.as_str()
    );
    serde_json::from_str(response.result_raw().unwrap()).unwrap()
}

/// Calls a tool (answering modern-era `input_required` rounds) and returns its result.
pub async fn call_tool(conn: &Connection, name: &str, arguments: Value) -> Value {
    let params = json!({ "name": name, "arguments": arguments }).to_string();
    let response = conn
        .call_resolving_input("tools/call", Some(&params), call_options())
        .await
        .unwrap_or_else(|e| panic!("tools/call {name} failed: {e}"));
    result_of("tools/call", &response)
}

/// The text blocks of a tool result or prompt, joined by newlines.
pub fn text_of(result: &Value) -> String {
    let blocks = result["content"].as_array().cloned().unwrap_or_default();
    blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names (or URIs, for resources) of everything a list method returns, in server order.
pub async fn names(conn: &Connection, kind: ListKind) -> Vec<String> {
    let key = match kind {
        ListKind::Resources => "uri",
        ListKind::Templates => "uriTemplate",
        _ => "name",
    };
    conn.list_all(kind, call_options())
        .await
        .unwrap_or_else(|e| panic!("{} failed: {e}", kind.method()))
        .iter()
        .map(|raw| {
            let item: Value = serde_json::from_str(raw.get()).unwrap();
            item[key].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The text of a resource's only content.
pub async fn read_text(conn: &Connection, uri: &str) -> String {
    let params = json!({ "uri": uri }).to_string();
    let response = conn
        .call_resolving_input("resources/read", Some(&params), call_options())
        .await
        .unwrap_or_else(|e| panic!("resources/read {uri} failed: {e}"));
    let result = result_of("resources/read", &response);
    let contents = result["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 1, "{result}");
    assert_eq!(contents[0]["uri"], uri, "{result}");
    contents[0]["text"].as_str().unwrap().to_owned()
}

/// The texts of a prompt's messages, as "role: text" lines.
pub async fn prompt_lines(conn: &Connection, name: &str, arguments: Value) -> Vec<String> {
    let params = json!({ "name": name, "arguments": arguments }).to_string();
    let response = conn
        .call_resolving_input("prompts/get", Some(&params), call_options())
        .await
        .unwrap_or_else(|e| panic!("prompts/get {name} failed: {e}"));
    let result = result_of("prompts/get", &response);
    result["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                m["content"]["text"].as_str().unwrap_or("(not text)")
            )
        })
        .collect()
}

/// Every event of a call: its notifications in arrival order, then its response.
pub async fn drain(mut call: Call) -> (Vec<Message>, Result<Message, UpstreamError>) {
    let mut notes = Vec::new();
    loop {
        match tokio::time::timeout(HANG_GUARD, call.next())
            .await
            .expect("the call hung")
        {
            Some(Ok(CallEvent::Notification(n))) => notes.push(n),
            Some(Ok(CallEvent::Response(r))) => return (notes, Ok(r)),
            Some(Err(e)) => return (notes, Err(e)),
            None => panic!("the call ended without a response"),
        }
    }
}

/// The params of a `notifications/progress`.
pub fn progress_params(note: &Message) -> Value {
    assert_eq!(
        note.method(),
        Some("notifications/progress"),
        "{}",
        note.as_str()
    );
    serde_json::from_str(note.params().unwrap()).unwrap()
}

/// Waits for the call's next notification, which must be progress; returns its params.
pub async fn next_progress(call: &mut Call) -> Value {
    match tokio::time::timeout(HANG_GUARD, call.next())
        .await
        .expect("no progress arrived")
    {
        Some(Ok(CallEvent::Notification(n))) => progress_params(&n),
        other => panic!("expected a progress notification, got {other:?}"),
    }
}
