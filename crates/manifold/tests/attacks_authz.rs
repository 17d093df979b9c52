//! Authorization attacks through `manifold serve`, end to end: a configuration with `[[rules]]`
//! and `[rate_limits]` in front of the test peer, reached over Streamable HTTP (2026-07-28,
//! JSON replies) by a client that tries what a caller outside the rules would try. Each case
//! asserts the exact JSON-RPC error.
//!
//! The first test sends no credentials: on loopback without `[auth]` every request is anonymous,
//! so its rules match `anonymous = true`. The second turns API keys on (`manifold keys create`),
//! so rules naming identities and groups meet identities that authentication established.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
const MODERN: &str = "2026-07-28";

struct Serving {
    child: Child,
    url: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn temp_dir(name: &str) -> PathBuf {
    manifold_testkit::fresh_dir(&format!("attacks-authz-{name}")).unwrap()
}

/// A configuration: the test peer as `peer`, then `rest` (rules, limits, auth).
fn write_config(dir: &Path, rest: &str) -> PathBuf {
    let peer = manifold_testkit::test_peer().unwrap();
    let config = dir.join("manifold.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n[servers.peer]\ncommand = \"{}\"\nargs = [\"stdio\"]\n\n{rest}",
            dir.join("data").display(),
            peer.display()
        ),
    )
    .unwrap();
    config
}

fn serve(dir: &Path, config: &Path) -> Serving {
    let mut child = Command::new(MANIFOLD)
        .args(["serve", "--config", config.to_str().unwrap()])
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
    Serving { child, url }
}

fn serve_with_rules() -> Serving {
    let dir = temp_dir("anonymous");
    let config = write_config(
        &dir,
        r#"[[rules]]
name = "no-add"
effect = "deny"
anonymous = true
tools = ["peer__add"]

[[rules]]
name = "no-failures"
effect = "deny"
explain = true
anonymous = true
tools = ["peer__fail"]

[[rules]]
name = "private-data"
effect = "deny"
anonymous = true
resources = ["peer+test://static", "peer+test://item/*"]
prompts = ["peer__greet"]

[[rate_limits.tools]]
match = ["peer__echo"]
rate = "2/day"
"#,
    );
    serve(&dir, &config)
}

/// `manifold keys create NAME --groups GROUPS`: the key, printed once.
fn create_key(dir: &Path, config: &Path, name: &str, groups: &str) -> String {
    let mut args = vec!["keys", "create", name, "--config", config.to_str().unwrap()];
    if !groups.is_empty() {
        args.extend(["--groups", groups]);
    }
    let out = Command::new(MANIFOLD)
        .args(&args)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn client() -> reqwest::Client {
    // reqwest is built without a TLS provider in this workspace; plain HTTP still needs one set.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// One stateless request; the JSON-RPC response.
async fn ask(http: &reqwest::Client, url: &str, method: &str, name: &str, params: Value) -> Value {
    ask_as(http, url, None, method, name, params).await
}

/// One stateless request, with `Authorization: Bearer KEY` when a key is given.
async fn ask_as(
    http: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    method: &str,
    name: &str,
    params: Value,
) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "attacks-authz", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut r = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if !name.is_empty() {
        r = r.header("mcp-name", name);
    }
    if let Some(key) = key {
        r = r.header("authorization", format!("Bearer {key}"));
    }
    let response = r.body(body.to_string()).send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

async fn call(http: &reqwest::Client, url: &str, tool: &str, arguments: Value) -> Value {
    ask(
        http,
        url,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": arguments}),
    )
    .await
}

fn error(response: &Value) -> (i64, &str) {
    (
        response["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {response}")),
        response["error"]["message"].as_str().unwrap(),
    )
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test]
async fn a_caller_outside_the_rules_learns_nothing_and_is_limited() {
    let s = serve_with_rules();
    let http = client();
    let url = s.url.as_str();

    // The list leaves out what the rules hide, explaining ones included.
    let list = ask(&http, url, "tools/list", "", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"peer__echo"), "{names:?}");
    assert!(
        !names.contains(&"peer__add") && !names.contains(&"peer__fail"),
        "{names:?}"
    );

    // A hidden tool called by its exposed name: exactly an unknown tool (the suggestion is a tool
    // the caller sees).
    let hidden = call(&http, url, "peer__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(
        error(&hidden),
        (
            -32602,
            "unknown tool \"peer__add\"; did you mean \"peer__ask\"?"
        )
    );
    let missing = call(&http, url, "peer__subtract", json!({})).await;
    assert_eq!(
        error(&missing),
        (
            -32602,
            "unknown tool \"peer__subtract\"; tools/list (or manifold_search_tools) shows what is offered"
        )
    );

    // ... and through the built-in manifold_call_tool.
    let through = call(
        &http,
        url,
        "manifold_call_tool",
        json!({"name": "peer__add", "arguments": {"a": 1, "b": 2}}),
    )
    .await;
    assert_eq!(error(&through), error(&hidden));

    // ... and the built-in search does not find it.
    let found = call(
        &http,
        url,
        "manifold_search_tools",
        json!({"query": "adds numbers"}),
    )
    .await;
    let found: Vec<&str> = found["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!found.contains(&"peer__add"), "{found:?}");

    // An explaining rule says so, and names itself.
    let explained = call(&http, url, "peer__fail", json!({})).await;
    assert_eq!(
        error(&explained),
        (
            -32007,
            "the tool \"peer__fail\" is not allowed for anonymous callers by rule \"no-failures\" (rules[1])"
        )
    );

    // Resources and templates outside the rules.
    let resources = ask(&http, url, "resources/list", "", json!({})).await;
    assert_eq!(resources["result"]["resources"], json!([]));
    let templates = ask(&http, url, "resources/templates/list", "", json!({})).await;
    assert_eq!(templates["result"]["resourceTemplates"], json!([]));
    for uri in ["peer+test://static", "peer+test://item/42"] {
        let read = ask(&http, url, "resources/read", uri, json!({"uri": uri})).await;
        assert_eq!(
            error(&read),
            (
                -32602,
                format!("resource not found: {uri:?}; resources/list shows what is offered")
                    .as_str()
            )
        );
    }

    // A prompt outside the rules, and completing its arguments.
    let prompts = ask(&http, url, "prompts/list", "", json!({})).await;
    assert_eq!(prompts["result"]["prompts"], json!([]));
    let get = ask(
        &http,
        url,
        "prompts/get",
        "peer__greet",
        json!({"name": "peer__greet", "arguments": {"name": "x"}}),
    )
    .await;
    assert_eq!(
        error(&get),
        (
            -32602,
            "unknown prompt \"peer__greet\"; prompts/list shows what is offered"
        )
    );
    let complete = ask(
        &http,
        url,
        "completion/complete",
        "",
        json!({"ref": {"type": "ref/prompt", "name": "peer__greet"}, "argument": {"name": "name", "value": "A"}}),
    )
    .await;
    assert_eq!(
        error(&complete),
        (
            -32602,
            "completion/complete names no prompt or resource Manifold offers"
        )
    );

    // The rate limit: two echoes a day, then a refusal with the wait.
    for _ in 0..2 {
        let echoed = call(&http, url, "peer__echo", json!({"message": "hi"})).await;
        assert_eq!(echoed["result"]["content"][0]["text"], "hi", "{echoed}");
    }
    let limited = call(&http, url, "peer__echo", json!({"message": "hi"})).await;
    assert_eq!(
        error(&limited),
        (
            -32006,
            "rate limit exceeded: anonymous callers may make 2 calls of \"peer__echo\" per day (rate_limits.tools[0]); retry in 12 h"
        )
    );
    assert_eq!(limited["error"]["data"]["limit"], "rate_limits.tools[0]");
    let wait = limited["error"]["data"]["retryAfterMs"].as_u64().unwrap();
    assert!(
        (43_200_000 - 3_600_000..=43_200_000).contains(&wait),
        "{wait}"
    );

    // The same refusal tells a plain HTTP client how long to wait, in whole seconds.
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "peer__echo", "arguments": {"message": "hi"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "attacks-authz", "version": "1"}
        }
    }});
    let raw = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "peer__echo")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    let seconds: u64 = raw.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((43_200 - 3_600..=43_200).contains(&seconds), "{seconds}");
    let answered: Value = serde_json::from_str(&raw.text().await.unwrap()).unwrap();
    assert_eq!(answered["error"]["code"], -32006, "{answered}");
}

#[tokio::test]
async fn rules_and_limits_follow_the_identity_an_api_key_proves() {
    let dir = temp_dir("keys");
    let config = write_config(
        &dir,
        r#"[auth]
api_keys = true

[[rules]]
name = "admins-add"
effect = "allow"
groups = ["admins"]
tools = ["peer__add"]

[[rules]]
name = "nobody-else-adds"
effect = "deny"
tools = ["peer__add"]

[rate_limits]
per_identity = "3/day"
"#,
    );
    let alice = create_key(&dir, &config, "alice", "admins");
    let bob = create_key(&dir, &config, "bob", "");
    let s = serve(&dir, &config);
    let http = client();
    let url = s.url.as_str();
    let call_as = |key: String| {
        let http = http.clone();
        async move {
            ask_as(
                &http,
                url,
                Some(&key),
                "tools/call",
                "peer__add",
                json!({"name": "peer__add", "arguments": {"a": 2, "b": 3}}),
            )
            .await
        }
    };
    let sum = call_as(alice.clone()).await;
    assert_eq!(sum["result"]["structuredContent"]["sum"], 5, "{sum}");
    let refused = call_as(bob.clone()).await;
    assert_eq!(
        error(&refused),
        (
            -32602,
            "unknown tool \"peer__add\"; did you mean \"peer__ask\"?"
        )
    );
    let listed = ask_as(&http, url, Some(&bob), "tools/list", "", json!({})).await;
    assert!(
        !listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "peer__add"),
        "{listed}"
    );
    // bob has made one counted request; two more, then the identity limit. alice is unaffected.
    for _ in 0..2 {
        assert!(call_as(bob.clone()).await.get("error").is_some());
    }
    let limited = call_as(bob.clone()).await;
    assert_eq!(
        error(&limited),
        (
            -32006,
            "rate limit exceeded: \"bob\" may make 3 requests per day (rate_limits.per_identity); retry in 8 h"
        )
    );
    assert_eq!(
        limited["error"]["data"]["limit"],
        "rate_limits.per_identity"
    );
    let again = call_as(alice).await;
    assert_eq!(again["result"]["structuredContent"]["sum"], 5, "{again}");
}
