//! `/healthz` and `/readyz`: what an orchestrator's probes see, whatever Host they use.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use live_server::{json_of, peer_def, start, start_with};

#[tokio::test]
async fn healthz_answers_ok_even_under_a_foreign_host_name() {
    let live = start().await;
    let r = live
        .get("/healthz")
        .header("host", "pod-10-0-0-7.internal")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "ok\n");
    // The MCP endpoint itself still refuses that Host.
    let r = live
        .http
        .post(&live.url)
        .header("host", "pod-10-0-0-7.internal")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    live.stop().await;
}

#[tokio::test]
async fn readyz_is_ready_when_every_upstream_is_up() {
    let live = start().await;
    let r = live.get("/readyz").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body = json_of(r).await;
    assert_eq!(body["ready"], true);
    assert_eq!(body["upstreams"][0]["state"], "up");
    live.stop().await;
}

#[tokio::test]
async fn readyz_names_the_upstream_that_is_down_and_why() {
    let live = start_with(vec![
        peer_def("good", &[]),
        peer_def("dead", &["--behaviour", "exit-before-handshake"]),
    ])
    .await;
    let r = live.get("/readyz").send().await.unwrap();
    assert_eq!(r.status(), 503);
    let body = json_of(r).await;
    assert_eq!(body["ready"], false);
    let dead = body["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "dead")
        .unwrap();
    assert_eq!(dead["state"], "down", "{dead}");
    assert!(
        dead["cause"].as_str().unwrap().contains("exit status: 3"),
        "{dead}"
    );
    live.stop().await;
}
