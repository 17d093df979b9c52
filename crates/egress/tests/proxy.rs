//! The proxy end to end on 127.0.0.1: CONNECT and absolute-URI requests reach a local test server
//! only when the host is listed and loopback is opened by allow_private; everything else gets the
//! status and body the sandboxed client would see.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use manifold_egress::{Egress, MAX_HEAD_BYTES, Policy, serve};
use manifold_telemetry::{Metrics, Snapshot};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A one-request-per-connection HTTP server answering `hello <request line>`.
async fn origin() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = s.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let text = String::from_utf8_lossy(&buf);
                let line = text.lines().next().unwrap_or_default().to_owned();
                let body = format!("hello {line}");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

async fn proxy(server: &str, hosts: &[String], private: &[&str]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let egress = Egress::new(server, Policy::new(hosts, private).unwrap());
    tokio::spawn(serve(listener, egress));
    port
}

/// Sends `request` raw and reads the answer to EOF.
async fn exchange(proxy: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", proxy)).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

const LOOPBACK: &[&str] = &["127.0.0.0/8", "::1"];

#[tokio::test]
async fn absolute_uri_request_is_forwarded_in_origin_form() {
    let origin = origin().await;
    let proxy = proxy("fwd", &[format!("localhost:{origin}")], LOOPBACK).await;
    let req = format!(
        "GET http://localhost:{origin}/path?q=1 HTTP/1.1\r\nHost: localhost\r\nProxy-Connection: keep-alive\r\n\r\n"
    );
    let answer = exchange(proxy, req.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.ends_with("hello GET /path?q=1 HTTP/1.1"), "{answer}");
}

#[tokio::test]
async fn connect_tunnels_to_the_allowed_host() {
    let origin = origin().await;
    let proxy = proxy("tunnel", &[format!("localhost:{origin}")], LOOPBACK).await;
    let req = format!(
        "CONNECT localhost:{origin} HTTP/1.1\r\nHost: localhost:{origin}\r\n\r\nGET /inside HTTP/1.1\r\nHost: x\r\n\r\n"
    );
    let answer = exchange(proxy, req.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
        "{answer}"
    );
    assert!(answer.ends_with("hello GET /inside HTTP/1.1"), "{answer}");
}

#[tokio::test]
async fn a_host_not_listed_is_refused_with_403_naming_it() {
    let origin = origin().await;
    let proxy = proxy("refuse", &[format!("localhost:{origin}")], LOOPBACK).await;
    for req in [
        format!("GET http://other.invalid:{origin}/ HTTP/1.1\r\n\r\n"),
        format!("CONNECT 127.0.0.1:{origin} HTTP/1.1\r\n\r\n"),
        "CONNECT localhost:1 HTTP/1.1\r\n\r\n".to_string(),
    ] {
        let answer = exchange(proxy, req.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
        assert!(answer.contains("not in allow_hosts"), "{answer}");
        assert!(!answer.contains("hello"), "{answer}");
    }
    let answer = exchange(
        proxy,
        format!("GET http://other.invalid:{origin}/ HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.contains("other.invalid"), "{answer}");
}

#[tokio::test]
async fn loopback_is_refused_unless_allow_private_opens_it() {
    let origin = origin().await;
    let proxy = proxy("private", &[format!("localhost:{origin}")], &[]).await;
    let answer = exchange(
        proxy,
        format!("GET http://localhost:{origin}/ HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
    assert!(answer.contains("loopback address"), "{answer}");
}

#[tokio::test]
async fn malformed_and_oversized_requests_get_400() {
    let proxy = proxy("bad", &["a.test".to_string()], &[]).await;
    for req in [
        b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n".to_vec(),
        b"GET https://a.test/ HTTP/1.1\r\n\r\n".to_vec(),
        b"NONSENSE\r\n\r\n".to_vec(),
        {
            let mut big = b"GET http://a.test/ HTTP/1.1\r\nX: ".to_vec();
            big.resize(MAX_HEAD_BYTES + 100, b'a');
            big.extend_from_slice(b"\r\n\r\n");
            big
        },
    ] {
        let answer = exchange(proxy, &req).await;
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request"), "{answer}");
    }
}

#[tokio::test]
async fn each_decision_is_counted() {
    let origin = origin().await;
    let name = "counted-server";
    let proxy = proxy(name, &[format!("localhost:{origin}")], LOOPBACK).await;
    exchange(
        proxy,
        format!("GET http://localhost:{origin}/ HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    exchange(proxy, b"GET http://no.test/ HTTP/1.1\r\n\r\n").await;
    exchange(proxy, b"BAD\r\n\r\n").await;
    let text = Metrics::new().encode(&Snapshot::default());
    for decision in ["allowed", "refused_host", "bad_request"] {
        let series = format!(
            "manifold_sandbox_egress_total{{upstream=\"{name}\",decision=\"{decision}\"}} 1"
        );
        assert!(text.contains(&series), "{series} in {text}");
    }
}
