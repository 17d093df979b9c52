//! The 2024-11-05 HTTP+SSE transport against manifold-test-peer: reached by the Auto fallback or
//! forced, carrying progress and server requests, and refused where the rules say so.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_peer;

use std::sync::Arc;
use std::time::Duration;

use http_peer::{Answering, HANG_GUARD, Peer, call, echo, open_err, slow_with_progress, text_of};
use manifold_upstream::{ConnectOptions, EraChoice, HttpTransportChoice, UpstreamError};
use manifold_wire::{Era, Kind};

#[tokio::test]
async fn auto_falls_back_to_http_sse_and_sse_can_be_forced() {
    let peer = Peer::start("sse", &[]).await;
    for choice in [HttpTransportChoice::Auto, HttpTransportChoice::Sse] {
        let (conn, info) = peer.connect("/sse", choice).await;
        assert_eq!(info.era, Era::Legacy, "{choice:?}");
        assert_eq!(conn.describe(), format!("HTTP+SSE {}", peer.url("/sse")));
        assert_eq!(echo(&conn, "old").await.unwrap(), "old");
        conn.close().await;
    }
}

#[tokio::test]
async fn forcing_streamable_http_forbids_the_fallback() {
    let peer = Peer::start("sse", &[]).await;
    let error = open_err(
        peer.url("/sse"),
        HttpTransportChoice::StreamableHttp,
        &ConnectOptions::new("peer"),
    )
    .await;
    match error {
        UpstreamError::Http {
            server,
            method,
            status,
            ..
        } => {
            assert_eq!(
                (server.as_str(), method.as_str(), status),
                ("peer", "initialize", 405)
            );
        }
        other => panic!("expected HTTP 405, got {other:?}"),
    }
}

#[tokio::test]
async fn progress_and_elicitation_travel_over_http_sse() {
    let peer = Peer::start("sse", &[]).await;
    let handler = Arc::new(Answering::default());
    let mut options = ConnectOptions::new("peer");
    options.client.capabilities = r#"{"elicitation":{}}"#.to_owned();
    options.handler = handler.clone();
    let (conn, _) = peer.open("/sse", HttpTransportChoice::Sse, &options).await;
    let (tokens, text) = slow_with_progress(&conn).await;
    assert_eq!(tokens, vec!["\"mine\""; 3]);
    assert_eq!(text, "slow done after 3 steps");
    let reply = call(
        &conn,
        "tools/call",
        r#"{"name":"ask","arguments":{"question":"Q"}}"#,
    )
    .await
    .unwrap();
    assert_eq!(text_of(&reply), r#"{"answer":"blue"}"#);
    conn.close().await;
}

#[tokio::test]
async fn http_404_everywhere_fails_both_transports_and_says_so() {
    let peer = Peer::start("http", &["--behaviour", "http-404"]).await;
    let error = open_err(
        peer.url("/mcp"),
        HttpTransportChoice::Auto,
        &ConnectOptions::new("peer"),
    )
    .await;
    let UpstreamError::Connect { reason, .. } = error else {
        panic!("expected a combined failure, got {error:?}");
    };
    assert!(
        reason.starts_with(
            "Streamable HTTP failed (server \"peer\" answered HTTP 404 to initialize:"
        ),
        "{reason}"
    );
    assert!(reason.contains("and so did the HTTP+SSE fallback (server \"peer\" answered HTTP 404 to GET (opening the HTTP+SSE stream):"), "{reason}");
}

#[tokio::test]
async fn requiring_the_modern_era_refuses_http_sse() {
    let mut options = ConnectOptions::new("peer");
    options.era = EraChoice::Modern;
    let peer = Peer::start("sse", &[]).await;
    let error = open_err(peer.url("/sse"), HttpTransportChoice::Sse, &options).await;
    assert!(
        matches!(error, UpstreamError::Negotiation { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_giant_event_on_the_stream_fails_the_one_waiting_call() {
    let peer = Peer::start("sse", &["--behaviour", "giant-sse-event"]).await;
    let (conn, _) = peer.connect("/sse", HttpTransportChoice::Sse).await;
    let error = echo(&conn, "x").await.unwrap_err();
    assert_eq!(
        error,
        UpstreamError::Protocol {
            server: "peer".to_owned(),
            detail: "it sent an SSE event larger than 16777216 bytes while this request waited; the event was dropped and the request abandoned".to_owned(),
        }
    );
    // The stream stays in sync after the dropped event.
    let listed = call(&conn, "tools/list", "{}").await.unwrap();
    assert_eq!(listed.kind(), Kind::Result);
    conn.close().await;
}

#[tokio::test]
async fn the_end_of_the_stream_closes_the_connection() {
    let peer = Peer::start("sse", &["--behaviour", "exit-mid-call"]).await;
    let (conn, _) = peer.connect("/sse", HttpTransportChoice::Sse).await;
    // The peer exits when the call arrives; whether its POST was still answered is a race, so
    // only the failure is asserted here and the closure below.
    echo(&conn, "x").await.unwrap_err();
    tokio::time::timeout(HANG_GUARD, async {
        while !conn.is_closed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the connection never noticed the stream ended");
    let UpstreamError::Closed { server, cause } =
        call(&conn, "tools/list", "{}").await.unwrap_err()
    else {
        panic!("expected the connection to be closed");
    };
    assert_eq!(server, "peer");
    assert!(
        cause.ends_with(
            "; over HTTP+SSE that stream carries every reply, so the connection is over"
        ),
        "{cause}"
    );
}
