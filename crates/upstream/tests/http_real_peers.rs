//! The Auto fallback against a real HTTP+SSE server (server-everything in `sse` mode), which
//! answers a Streamable HTTP POST with a plain 404 like many deployed 2024-11-05 servers; the
//! transports' other real-peer coverage lives in peers_everything.rs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsStr;
use std::time::Duration;

use manifold_testkit::{
    ChildGuard, free_port, loopback_preload, node, npm_package_entry, spawn_http_peer,
};
use manifold_upstream::{
    CallOptions, ConnectOptions, HttpSpec, HttpTransportChoice, Target, connect,
};
use manifold_wire::Era;

const HANG_GUARD: Duration = Duration::from_secs(30);

async fn everything(mode: &str) -> (ChildGuard, u16) {
    let port = free_port().unwrap();
    let entry = npm_package_entry("@modelcontextprotocol/server-everything").unwrap();
    let preload = loopback_preload().unwrap();
    let peer = spawn_http_peer(
        node().unwrap(),
        [
            OsStr::new("--require"),
            preload.as_os_str(),
            entry.as_os_str(),
            OsStr::new(mode),
        ],
        [("PORT", port.to_string())],
        port,
    )
    .await
    .unwrap();
    (peer, port)
}

fn spec(url: String, transport: HttpTransportChoice) -> Target {
    Target::Http(HttpSpec {
        url,
        transport,
        ..HttpSpec::default()
    })
}

#[tokio::test]
async fn auto_falls_back_to_http_sse_for_an_sse_only_server() {
    let (_peer, port) = everything("sse").await;
    let target = spec(
        format!("http://127.0.0.1:{port}/sse"),
        HttpTransportChoice::Auto,
    );
    let options = ConnectOptions::new("everything-sse");
    let (conn, info) = tokio::time::timeout(HANG_GUARD, connect(&target, &options))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.era, Era::Legacy);
    assert_eq!(
        conn.describe(),
        format!("HTTP+SSE http://127.0.0.1:{port}/sse")
    );
    let reply = conn
        .call(
            "tools/call",
            Some(r#"{"name":"echo","arguments":{"message":"via sse"}}"#),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        reply.result_raw().unwrap(),
        r#"{"content":[{"type":"text","text":"Echo: via sse"}]}"#
    );
    conn.close().await;
}
