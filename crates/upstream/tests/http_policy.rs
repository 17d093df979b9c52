//! What the HTTP transports refuse to do: URLs outside the policy, redirects to other hosts,
//! and what an unreachable server looks like to the caller.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_peer;

use http_peer::{Peer, open_err};
use manifold_upstream::{ConnectOptions, HttpTransportChoice, UpstreamError};

#[tokio::test]
async fn a_redirect_to_another_host_is_refused() {
    let peer = Peer::start("http", &["--behaviour", "redirect-other-host"]).await;
    let error = open_err(
        peer.url("/mcp"),
        HttpTransportChoice::Auto,
        &ConnectOptions::new("peer"),
    )
    .await;
    let UpstreamError::Connect { server, reason } = error else {
        panic!("expected a connect error, got {error:?}");
    };
    assert_eq!(server, "peer");
    assert_eq!(
        reason,
        format!(
            "POST {} (server/discover): the server redirected to http://127.0.0.2:{}/mcp, another origin than http://127.0.0.1:{}; Manifold follows redirects within the same origin only: configure the final URL instead",
            peer.url("/mcp"),
            peer.port,
            peer.port
        )
    );
}

#[tokio::test]
async fn the_url_policy_refuses_before_any_connection() {
    let options = ConnectOptions::new("peer");
    let cases = [
        (
            "http://example.com/mcp",
            "plain http:// is only allowed to this machine",
        ),
        ("ftp://127.0.0.1/mcp", "the scheme \"ftp\" is not supported"),
        ("wss://example.com/mcp", "write https://example.com/mcp"),
    ];
    for (url, why) in cases {
        let error = open_err(url.to_owned(), HttpTransportChoice::Auto, &options).await;
        let UpstreamError::BadUrl {
            url: refused,
            reason,
        } = error
        else {
            panic!("expected BadUrl for {url}, got {error:?}");
        };
        assert_eq!(refused, url);
        assert!(reason.contains(why), "{url}: {reason}");
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error() {
    // Bind and drop a listener to get a port nobody serves.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let error = open_err(
        format!("http://127.0.0.1:{port}/mcp"),
        HttpTransportChoice::Auto,
        &ConnectOptions::new("gone"),
    )
    .await;
    let UpstreamError::Connect { server, reason } = error else {
        panic!("expected a connect error, got {error:?}");
    };
    assert_eq!(server, "gone");
    assert!(
        reason.starts_with(&format!(
            "POST http://127.0.0.1:{port}/mcp (server/discover): could not connect:"
        )),
        "{reason}"
    );
}
