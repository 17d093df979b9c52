//! `/metrics` where the operator asked for it: beside `/mcp` by default, only on the admin
//! listener when there is one, nowhere when turned off; and refusals by the browser guards
//! counted under their own reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use live_server::{gateway, peer_def, serve, start};

#[tokio::test]
async fn metrics_are_served_beside_mcp_and_count_host_refusals() {
    let live = start().await;
    let r = live
        .http
        .post(&live.url)
        .header("host", "attacker.example")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = live
        .get("/metrics")
        .header("host", "scraper.internal")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "probes and scrapes come under any Host");
    let text = r.text().await.unwrap();
    assert!(
        text.contains("manifold_rejected_requests_total{reason=\"host\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("manifold_rejected_requests_total{reason=\"origin\"} 0\n"));
    assert!(text.contains("manifold_upstream_state{upstream=\"SERVER\",state=\"up\"} 1\n"));
    assert!(live.server.admin_addr().is_none());
    live.stop().await;
}

#[tokio::test]
async fn with_an_admin_listener_metrics_are_served_only_there() {
    let live = serve(gateway(vec![peer_def("peer", &[])]).await, |s| {
        s.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let admin = format!("http://{}", live.server.admin_addr().unwrap());
    let on_mcp = live.get("/metrics").send().await.unwrap();
    assert_eq!(on_mcp.status(), 404);
    for (path, starts) in [
        ("/metrics", "# HELP "),
        ("/healthz", "ok"),
        ("/readyz", "{"),
    ] {
        let r = live
            .http
            .get(format!("{admin}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.text().await.unwrap().starts_with(starts), "{path}");
    }
    live.stop().await;
}

#[tokio::test]
async fn metrics_can_be_turned_off() {
    let live = serve(gateway(vec![peer_def("peer", &[])]).await, |s| {
        s.metrics_endpoint = false;
        s.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let admin = format!("http://{}", live.server.admin_addr().unwrap());
    for url in [format!("{}/metrics", live.base), format!("{admin}/metrics")] {
        let r = live.http.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 404, "{url}");
    }
    let r = live
        .http
        .get(format!("{admin}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    live.stop().await;
}
