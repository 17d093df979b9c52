//! Why: pins that a legacy session lives in its sealed id: another server (a replica, or this
//! gateway after a restart) holding the same key serves it, a server with another key refuses it,
//! and an altered id is refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use live_server::*;

const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

#[tokio::test]
async fn a_session_minted_by_one_server_is_served_by_another_with_the_same_key_only() {
    let gw = gateway(vec![peer_def("SERVER", &[])]).await;
    let minting = serve(gw.clone(), |s| s.session_key = key(1)).await;
    let replica = serve(gw.clone(), |s| s.session_key = key(1)).await;
    let stranger = serve(gw.clone(), |s| s.session_key = key(2)).await;
    let sid = minting.initialize(r#"{"elicitation":{}}"#).await;

    let r = replica.session_send(&sid, LIST).await;
    assert_eq!(r.status(), 200);
    let body = json_of(r).await;
    assert!(
        body["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "SERVER__echo")
    );
    // What the client declared travelled in the id: the replica knows its revision and info.
    let health = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"manifold_health","arguments":{}}}"#;
    let body = json_of(replica.session_send(&sid, health).await).await;
    let client = &body["result"]["structuredContent"]["client"];
    assert_eq!(client["revision"], "2025-11-25");
    assert_eq!(client["info"]["name"], "raw-test");

    let r = stranger.session_send(&sid, LIST).await;
    assert_eq!(r.status(), 404);

    let mut tampered = sid.clone().into_bytes();
    let i = tampered.len() - 5;
    tampered[i] = if tampered[i] == b'a' { b'b' } else { b'a' };
    let tampered = String::from_utf8(tampered).unwrap();
    let r = minting.session_send(&tampered, LIST).await;
    assert_eq!(r.status(), 404);

    for s in [minting, replica, stranger] {
        s.server.shutdown().await;
    }
    gw.shutdown().await;
}

#[tokio::test]
async fn a_restarted_server_with_the_stored_key_keeps_its_sessions() {
    let dir = std::env::temp_dir().join(format!("manifold-server-restart-{}", std::process::id()));
    let path = dir.join("session.key");
    let gw = gateway(vec![peer_def("SERVER", &[])]).await;
    let stored = manifold_server::SessionKey::load_or_create(&path).unwrap();
    let before = serve(gw.clone(), |s| s.session_key = stored).await;
    let sid = before.initialize("{}").await;
    before.server.shutdown().await;
    let reloaded = manifold_server::SessionKey::load_or_create(&path).unwrap();
    let after = serve(gw.clone(), |s| s.session_key = reloaded).await;
    let r = after.session_send(&sid, LIST).await;
    assert_eq!(r.status(), 200);
    after.server.shutdown().await;
    gw.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
