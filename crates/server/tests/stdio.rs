//! Why: pins the stdio downstream (`serve_stdio`) in process: both eras over one connection,
//! cancellation, listen streams, faults answered with the right ids, and a clean end at EOF.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use live_server::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream};

struct Client {
    to_server: DuplexStream,
    from_server: tokio::io::Lines<BufReader<DuplexStream>>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
    gateway: manifold_gateway::Gateway,
}

impl Client {
    async fn start(defs: Vec<manifold_gateway::UpstreamDefinition>) -> Client {
        let gateway = gateway(defs).await;
        let (to_server, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, from_server) = tokio::io::duplex(1 << 20);
        let served = tokio::spawn(manifold_server::serve_stdio(
            gateway.clone(),
            server_in,
            server_out,
        ));
        Client {
            to_server,
            from_server: BufReader::new(from_server).lines(),
            served,
            gateway,
        }
    }

    async fn send(&mut self, line: &str) {
        self.to_server.write_all(line.as_bytes()).await.unwrap();
        self.to_server.write_all(b"\n").await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(HANG_GUARD, self.from_server.next_line())
            .await
            .expect("no line in time")
            .unwrap()
            .expect("the server closed its output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    async fn finish(self) {
        drop(self.to_server);
        let result = tokio::time::timeout(HANG_GUARD, self.served)
            .await
            .unwrap()
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
        self.gateway.shutdown().await;
    }
}

#[tokio::test]
async fn a_legacy_client_initializes_and_calls_and_early_requests_are_refused() {
    let mut c = Client::start(vec![peer_def("SERVER", &[])]).await;
    c.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .await;
    let early = c.recv().await;
    assert_eq!(early["id"], 1);
    assert_eq!(early["error"]["code"], -32602);
    c.send(&init_body("2025-06-18", "{}")).await;
    let init = c.recv().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    c.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    c.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#).await;
    assert_eq!(c.recv().await, json!({"jsonrpc":"2.0","id":2,"result":{}}));
    c.send(r#"{"jsonrpc":"2.0","id":"s3","method":"tools/call","params":{"name":"SERVER__echo","arguments":{"message":"via stdio"}}}"#).await;
    let r = c.recv().await;
    assert_eq!(r["id"], "s3");
    assert_eq!(r["result"]["content"][0]["text"], "via stdio");
    c.finish().await;
}

#[tokio::test]
async fn broken_lines_get_errors_with_the_ids_that_could_be_read() {
    let mut c = Client::start(vec![]).await;
    c.send("this is not json").await;
    let r = c.recv().await;
    assert_eq!(r["error"]["code"], -32700);
    assert!(r["id"].is_null());
    c.send(r#"{"jsonrpc":"1.0","id":9,"method":"ping"}"#).await;
    let r = c.recv().await;
    assert_eq!(r["id"], 9);
    assert_eq!(r["error"]["code"], -32600);
    c.finish().await;
}

#[tokio::test]
async fn a_modern_client_discovers_calls_and_is_refused_an_unknown_revision() {
    let mut c = Client::start(vec![peer_def("SERVER", &[])]).await;
    c.send(&modern_body(1, "server/discover", "")).await;
    let r = c.recv().await;
    assert_eq!(r["result"]["supportedVersions"], json!(["2026-07-28"]));
    c.send(&modern_body(
        2,
        "tools/call",
        r#""name":"SERVER__echo","arguments":{"message":"modern"}"#,
    ))
    .await;
    let r = c.recv().await;
    assert_eq!(r["result"]["content"][0]["text"], "modern");
    assert_eq!(r["result"]["resultType"], "complete");
    c.send(&modern_body(3, "tools/list", "").replace("2026-07-28", "2031-01-01"))
        .await;
    let r = c.recv().await;
    assert_eq!(r["error"]["code"], -32022);
    assert_eq!(r["error"]["data"]["requested"], "2031-01-01");
    c.send(&modern_body(4, "ping", "")).await;
    assert_eq!(c.recv().await["error"]["code"], -32601);
    c.finish().await;
}

#[tokio::test]
async fn a_cancelled_call_is_never_answered_and_the_connection_goes_on() {
    let mut c = Client::start(vec![peer_def("SERVER", &[])]).await;
    c.send(&init_body("2025-11-25", "{}")).await;
    let _ = c.recv().await;
    c.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"SERVER__slow","arguments":{"seconds":30,"steps":300},"_meta":{"progressToken":"t"}}}"#).await;
    let progress = c.recv().await;
    assert_eq!(progress["method"], "notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "t");
    c.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}"#)
        .await;
    c.send(r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#).await;
    loop {
        let m = c.recv().await;
        assert_ne!(m["id"], 5, "a cancelled call was answered: {m}");
        if m["id"] == 6 {
            break;
        }
    }
    c.finish().await;
}

#[tokio::test]
async fn a_listen_stream_acknowledges_and_forwards_changes_until_cancelled() {
    let mut c = Client::start(vec![
        peer_def("SERVER", &[]),
        peer_def("flaky", &["--behaviour", "rug-pull", "--era", "legacy"]),
    ])
    .await;
    c.send(&modern_body(
        7,
        "subscriptions/listen",
        r#""notifications":{"toolsListChanged":true}"#,
    ))
    .await;
    let ack = c.recv().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    c.send(&modern_body(
        8,
        "tools/call",
        r#""name":"flaky__echo","arguments":{"message":"x"}"#,
    ))
    .await;
    let mut saw_change = false;
    for _ in 0..2 {
        let m = c.recv().await;
        if m["method"] == "notifications/tools/list_changed" {
            assert_eq!(
                m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
                7
            );
            saw_change = true;
            break;
        }
    }
    assert!(saw_change);
    c.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#)
        .await;
    c.finish().await;
}
