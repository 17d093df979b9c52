//! `[servers.NAME] cache_ttl`, end to end: a real `manifold serve` with API keys on, in front of
//! the reference time server (`mcp-server-time`, whose `get_current_time` is marked read-only and
//! idempotent although its answer moves with the clock: exactly what a cache keeps) twice, once
//! with a `cache_ttl` and once without, and of Manifold's test peer (no annotations). Within the
//! time a caller's same call gets the same answer, marked with its age; other arguments, another
//! caller, a server without `cache_ttl` and a tool not marked read-only reach the server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use manifold_testkit::{
    GatewayProcess, McpSession, ScratchDir, ServeCommand, SessionEra, toml_string,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Longer than a second, so the time server's answer (to the second) has moved on.
const CLOCK_MOVES: Duration = Duration::from_millis(1_200);

struct Served {
    _dir: ScratchDir,
    gateway: GatewayProcess,
    alice: String,
    bob: String,
}

fn serve() -> Served {
    let dir = ScratchDir::new("result-cache").unwrap();
    let time = toml_string(
        &manifold_testkit::venv_bin("mcp-server-time")
            .unwrap()
            .to_string_lossy(),
    );
    let peer = toml_string(&manifold_testkit::test_peer().unwrap().to_string_lossy());
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = {data}\n\n[auth]\napi_keys = true\n\n\
         [servers.time]\ncommand = {time}\nargs = [\"--local-timezone\", \"UTC\"]\ncache_ttl = \"1h\"\n\n\
         [servers.clock]\ncommand = {time}\nargs = [\"--local-timezone\", \"UTC\"]\n\n\
         [servers.peer]\ncommand = {peer}\nargs = [\"stdio\"]\ncache_ttl = \"1h\"\n",
        data = toml_string(&dir.path().join("data").to_string_lossy()),
    );
    let path = dir.path().join("manifold.toml");
    std::fs::write(&path, config).unwrap();
    let keys = ServeCommand::new(MANIFOLD, dir.path()).config(&path);
    let alice = keys.create_key("alice", &[]).unwrap();
    let bob = keys.create_key("bob", &[]).unwrap();
    let gateway = ServeCommand::new(MANIFOLD, dir.path())
        .config(&path)
        .start()
        .unwrap();
    Served {
        _dir: dir,
        gateway,
        alice,
        bob,
    }
}

async fn session(served: &Served, key: &str) -> McpSession {
    McpSession::options(served.gateway.url())
        .bearer(key)
        .open(SessionEra::Legacy)
        .await
        .unwrap()
}

/// A call's result: the time server's text, and the age the cache gave it (`None`: fresh).
async fn call(session: &McpSession, tool: &str, arguments: Value) -> (String, Option<u64>) {
    let answer = session.call_tool(tool, arguments).await.unwrap();
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{answer}");
    let text = result["content"][0]["text"].as_str().unwrap().to_owned();
    let age = result["_meta"]["io.manifold/cached"]["ageMs"].as_u64();
    (text, age)
}

#[tokio::test]
async fn a_callers_same_call_is_answered_again_within_the_time_and_nothing_else_is() {
    let served = serve();
    let alice = session(&served, &served.alice).await;
    let utc = json!({"timezone": "UTC"});

    let (first, age) = call(&alice, "time__get_current_time", utc.clone()).await;
    assert_eq!(age, None, "the first call reaches the server");
    tokio::time::sleep(CLOCK_MOVES).await;
    let (again, age) = call(&alice, "time__get_current_time", utc.clone()).await;
    assert_eq!(again, first, "the same answer, though the clock moved on");
    assert!(age.is_some_and(|a| a >= 1_000), "aged {age:?}");

    // Other arguments, another caller, a server without cache_ttl: fresh answers.
    let (paris, age) = call(
        &alice,
        "time__get_current_time",
        json!({"timezone": "Europe/Paris"}),
    )
    .await;
    assert_eq!(age, None);
    assert_ne!(paris, first);
    let bob = session(&served, &served.bob).await;
    let (bobs, age) = call(&bob, "time__get_current_time", utc.clone()).await;
    assert_eq!(age, None, "a caller never gets another's answer");
    assert_ne!(bobs, first, "the clock moved on for bob's own call");
    let (clock1, _) = call(&alice, "clock__get_current_time", utc.clone()).await;
    tokio::time::sleep(CLOCK_MOVES).await;
    let (clock2, age) = call(&alice, "clock__get_current_time", utc.clone()).await;
    assert_eq!(age, None, "no cache_ttl, no cache");
    assert_ne!(clock1, clock2);

    // A tool not marked read-only and idempotent is never answered from the cache.
    call(&alice, "peer__echo", json!({"message": "m"})).await;
    let (_, age) = call(&alice, "peer__echo", json!({"message": "m"})).await;
    assert_eq!(age, None);

    // The same call in the modern era is the same caller's same call.
    let modern = McpSession::options(served.gateway.url())
        .bearer(&served.alice)
        .modern();
    let (modern_answer, age) = call(&modern, "time__get_current_time", utc).await;
    assert_eq!(modern_answer, first);
    assert!(age.is_some());

    let metrics = manifold_testkit::http_client()
        .get(served.gateway.endpoint("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("manifold_result_cache_hits_total{upstream=\"time\"} 2"),
        "{metrics}"
    );
}
