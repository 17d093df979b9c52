//! Authorization attacks through `manifold serve`, end to end: a configuration with `[[rules]]`
//! and `[rate_limits]` in front of the test peer, reached over Streamable HTTP (2026-07-28,
//! JSON replies) by a client that tries what a caller outside the rules would try. Each case
//! asserts the exact JSON-RPC error.
//!
//! The first test sends no credentials: on loopback without `[auth]` every request is anonymous,
//! so its rules match `anonymous = true`. The second turns API keys on (`manifold keys create`),
//! so rules naming identities and groups meet identities that authentication established.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use manifold_testkit::{GatewayProcess, McpSession, ServeCommand};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

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

fn serve(dir: &Path, config: &Path) -> GatewayProcess {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .start()
        .unwrap()
}

fn serve_with_rules() -> GatewayProcess {
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
    let groups: &[&str] = if groups.is_empty() {
        &[]
    } else {
        &["--groups", groups]
    };
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .create_key(name, groups)
        .unwrap()
}

/// A stateless (2026-07-28) client asking for JSON replies, as the holder of `key` when given.
fn session(url: &str, key: Option<&str>) -> McpSession {
    let options = McpSession::options(url)
        .client_info("attacks-authz", "1")
        .accept("application/json");
    match key {
        Some(key) => options.bearer(key).modern(),
        None => options.modern(),
    }
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
    let mcp = session(s.url(), None);

    // The list leaves out what the rules hide, explaining ones included.
    let list = mcp.request("tools/list", json!({})).await.unwrap();
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
    let hidden = mcp
        .call_tool("peer__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(
        error(&hidden),
        (
            -32602,
            "unknown tool \"peer__add\"; did you mean \"peer__ask\"?"
        )
    );
    let missing = mcp.call_tool("peer__subtract", json!({})).await.unwrap();
    assert_eq!(
        error(&missing),
        (
            -32602,
            "unknown tool \"peer__subtract\"; tools/list (or manifold_search_tools) shows what is offered"
        )
    );

    // ... and through the built-in manifold_call_tool.
    let through = mcp
        .call_tool(
            "manifold_call_tool",
            json!({"name": "peer__add", "arguments": {"a": 1, "b": 2}}),
        )
        .await
        .unwrap();
    assert_eq!(error(&through), error(&hidden));

    // ... and the built-in search does not find it.
    let found = mcp
        .call_tool("manifold_search_tools", json!({"query": "adds numbers"}))
        .await
        .unwrap();
    let found: Vec<&str> = found["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!found.contains(&"peer__add"), "{found:?}");

    // An explaining rule says so, and names itself.
    let explained = mcp.call_tool("peer__fail", json!({})).await.unwrap();
    assert_eq!(
        error(&explained),
        (
            -32007,
            "the tool \"peer__fail\" is not allowed for anonymous callers by rule \"no-failures\" (rules[1])"
        )
    );

    // Resources and templates outside the rules.
    let resources = mcp.request("resources/list", json!({})).await.unwrap();
    assert_eq!(resources["result"]["resources"], json!([]));
    let templates = mcp
        .request("resources/templates/list", json!({}))
        .await
        .unwrap();
    assert_eq!(templates["result"]["resourceTemplates"], json!([]));
    for uri in ["peer+test://static", "peer+test://item/42"] {
        let read = mcp
            .request("resources/read", json!({"uri": uri}))
            .await
            .unwrap();
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
    let prompts = mcp.request("prompts/list", json!({})).await.unwrap();
    assert_eq!(prompts["result"]["prompts"], json!([]));
    let get = mcp
        .request(
            "prompts/get",
            json!({"name": "peer__greet", "arguments": {"name": "x"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        error(&get),
        (
            -32602,
            "unknown prompt \"peer__greet\"; prompts/list shows what is offered"
        )
    );
    let complete = mcp.request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "peer__greet"}, "argument": {"name": "name", "value": "A"}}),
    )
    .await.unwrap();
    assert_eq!(
        error(&complete),
        (
            -32602,
            "completion/complete names no prompt or resource Manifold offers"
        )
    );

    // The rate limit: two echoes a day, then a refusal with the wait.
    for _ in 0..2 {
        let echoed = mcp
            .call_tool("peer__echo", json!({"message": "hi"}))
            .await
            .unwrap();
        assert_eq!(echoed["result"]["content"][0]["text"], "hi", "{echoed}");
    }
    let limited = mcp
        .call_tool("peer__echo", json!({"message": "hi"}))
        .await
        .unwrap();
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
    let raw = mcp
        .send(&mcp.message(
            8,
            "tools/call",
            json!({"name": "peer__echo", "arguments": {"message": "hi"}}),
        ))
        .await
        .unwrap();
    assert_eq!(raw.status, 200);
    let seconds: u64 = raw.header("retry-after").unwrap().parse().unwrap();
    assert!((43_200 - 3_600..=43_200).contains(&seconds), "{seconds}");
    let answered = raw.json();
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
    let url = s.url();
    let call_as = |key: String| async move {
        session(url, Some(&key))
            .call_tool("peer__add", json!({"a": 2, "b": 3}))
            .await
            .unwrap()
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
    let listed = session(url, Some(&bob)).list_tools().await.unwrap();
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
