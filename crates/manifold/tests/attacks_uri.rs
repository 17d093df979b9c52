//! Spelling attacks on resource rules through `manifold serve`, end to end, in front of the real
//! server-everything (npm, stdio), whose SDK parses every URI it is asked for with the WHATWG URL
//! parser: it lowercases the scheme and resolves `.`, `..` and `%2e%2e` segments, so a spelling a
//! rule failed to see through would be served. A deny rule hides the dynamic text resources; the
//! caller tries every spelling over Streamable HTTP and must get, each time, the bytes a URI that
//! names nothing gets; and the resource links a tool returns name none of them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use manifold_testkit::{GatewayProcess, McpSession, ServeCommand};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

fn serve_everything_with_a_deny_rule(dir: &Path) -> GatewayProcess {
    let node = manifold_testkit::node().unwrap();
    let entry =
        manifold_testkit::npm_package_entry("@modelcontextprotocol/server-everything").unwrap();
    ServeCommand::new(MANIFOLD, dir)
        .config_text(format!(
            r#"[gateway]
listen = "127.0.0.1:0"
data_dir = "{}"

[servers.everything]
command = "{}"
args = ["{}", "stdio"]

[[rules]]
name = "hidden-text"
effect = "deny"
anonymous = true
resources = ["everything+demo://resource/dynamic/text/*"]
"#,
            dir.join("data").display(),
            node.display(),
            entry.display()
        ))
        .start()
        .unwrap()
}

/// A stateless (2026-07-28) client asking for JSON replies.
fn session(url: &str) -> McpSession {
    McpSession::options(url)
        .client_info("attacks-uri", "1")
        .accept("application/json")
        .modern()
}

/// One request, always with id 7 (the answers are compared as text); the reply's body.
async fn ask(mcp: &McpSession, method: &str, params: Value) -> String {
    let reply = mcp.send(&mcp.message(7, method, params)).await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body
}

async fn read(mcp: &McpSession, uri: &str) -> String {
    ask(mcp, "resources/read", json!({ "uri": uri })).await
}

/// The answer with the URI it quotes (`{uri:?}` inside a JSON string) replaced.
fn shape(answer: &str, uri: &str) -> String {
    let quoted = |s: &str| {
        let json = serde_json::to_string(&format!("{s:?}")).unwrap();
        json.trim_matches('"').to_owned()
    };
    answer.replace(&quoted(uri), &quoted("URI"))
}

#[tokio::test]
async fn no_spelling_of_a_hidden_uri_reaches_server_everything() {
    let dir = manifold_testkit::fresh_dir("attacks-uri").unwrap();
    let serving = serve_everything_with_a_deny_rule(&dir);
    let mcp = session(serving.url());

    // The rule is the only thing between the caller and the resource: the blob beside it is
    // served, and the upstream serves the text one to a spelling Manifold would not judge.
    let blob = read(&mcp, "everything+demo://resource/dynamic/blob/2").await;
    assert!(blob.contains("\"blob\""), "{blob}");

    let nothing = "nosuch+demo://resource/dynamic/text/1";
    let expected = shape(&read(&mcp, nothing).await, nothing);
    assert!(expected.contains("resource not found"), "{expected}");
    for spelling in [
        "everything+demo://resource/dynamic/text/1",
        "EVERYTHING+DEMO://resource/dynamic/text/1",
        "everything+demo://resource/dynamic/blob/../text/1",
        "everything+demo://resource/dynamic/blob/%2e%2e/text/1",
        "everything+demo://resource/dynamic/./text/1",
        "everything+demo://resource/dynamic/%74ext/1",
        "everything+demo://resource/dynamic/text/%31",
        "everything+demo://resource//dynamic//text/1",
        "everything+demo://resource/dynamic/text/1/",
        "everything+demo://resource/dynamic/text/1?x=1",
        "everything+demo://resource/dynamic/text/1#frag",
        "everything+demo://resource/dynamic%2Ftext%2F1",
        "everything+demo://resource/dynamic/text/nothing-here/../1",
    ] {
        let answer = read(&mcp, spelling).await;
        assert_eq!(shape(&answer, spelling), expected, "{spelling}");
        assert!(
            !answer.contains("Resource 1"),
            "{spelling} leaked: {answer}"
        );
    }

    // Neither a link nor an embedded resource in a tool result names a hidden URI.
    let links = ask(
        &mcp,
        "tools/call",
        json!({"name": "everything__get-resource-links", "arguments": {"count": 4}}),
    )
    .await;
    let links: Value = serde_json::from_str(&links).unwrap();
    let content = links["result"]["content"].as_array().unwrap();
    let uris: Vec<&str> = content.iter().filter_map(|c| c["uri"].as_str()).collect();
    assert!(uris.iter().any(|u| u.contains("/dynamic/blob/")), "{links}");
    assert!(
        !uris.iter().any(|u| u.contains("/dynamic/text/")),
        "{links}"
    );
}
