//! The proxy end to end on 127.0.0.1: CONNECT and absolute-URI requests reach a local test server
//! only when the host is listed and loopback is opened by allow_private; everything else gets the
//! status and body the sandboxed client would see.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use manifold_egress::{Egress, MAX_HEAD_BYTES, Policy, serve};
use manifold_telemetry::{Metrics, Snapshot};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A server on 127.0.0.1 that runs `serve_one` on each connection it accepts; its port.
async fn origin_with<F, Fut>(serve_one: F) -> u16
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve_one(s));
        }
    });
    port
}

/// A one-request-per-connection HTTP server answering `hello <request line>`.
async fn origin() -> u16 {
    origin_with(|mut s| async move {
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
    })
    .await
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

/// A TCP server echoing every byte back on each connection, until the client closes.
async fn echo_origin() -> u16 {
    origin_with(|mut s| async move {
        let (mut r, mut w) = s.split();
        let _ = tokio::io::copy(&mut r, &mut w).await;
    })
    .await
}

/// The idle bound the idle tests give their proxy: short, so an idle tunnel closes soon.
const TEST_IDLE: Duration = Duration::from_millis(500);
/// How long a test waits for something the proxy must do; generous, for a loaded machine.
const GENEROUS_WAIT: Duration = Duration::from_secs(30);
/// The pause between trickled bytes: well under `TEST_IDLE`.
const TRICKLE_PAUSE: Duration = Duration::from_millis(50);
/// Trickled bytes: together their pauses span several idle bounds.
const TRICKLES: usize = 40;

async fn idle_proxy(server: &str, origin: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let policy = Policy::new(&[format!("localhost:{origin}")], LOOPBACK).unwrap();
    let egress = Egress::new(server, policy).with_idle_timeout(TEST_IDLE);
    tokio::spawn(serve(listener, egress));
    port
}

/// Opens a CONNECT tunnel to the echo origin and reads the proxy's 200.
async fn open_tunnel(proxy: u16, origin: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", proxy)).await.unwrap();
    let req = format!("CONNECT localhost:{origin} HTTP/1.1\r\nHost: localhost:{origin}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let expected = b"HTTP/1.1 200 Connection established\r\n\r\n";
    let mut head = vec![0u8; expected.len()];
    tokio::time::timeout(GENEROUS_WAIT, s.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head, expected);
    s
}

fn idle_closes_counted(server: &str) -> u64 {
    let text = Metrics::new().encode(&Snapshot::default());
    let key = format!(
        "manifold_sandbox_egress_total{{upstream=\"{server}\",decision=\"idle_timeout\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&key)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn an_idle_tunnel_is_closed_and_counted() {
    let origin = echo_origin().await;
    let name = "idle-tunnel-server";
    let proxy = idle_proxy(name, origin).await;
    let mut tunnel = open_tunnel(proxy, origin).await;
    tunnel.write_all(b"ping").await.unwrap();
    let mut echoed = [0u8; 4];
    tunnel.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"ping");
    // Then silence: the proxy must end the tunnel by itself (EOF on our side).
    let mut rest = Vec::new();
    let read = tokio::time::timeout(GENEROUS_WAIT, tunnel.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the idle tunnel was not closed");
    assert!(rest.is_empty(), "nothing more should arrive: {rest:?}");
    assert_eq!(idle_closes_counted(name), 1);
}

#[tokio::test]
async fn an_idle_forwarded_exchange_is_closed() {
    let origin = echo_origin().await;
    let name = "idle-forward-server";
    let proxy = idle_proxy(name, origin).await;
    let mut s = TcpStream::connect(("127.0.0.1", proxy)).await.unwrap();
    // The echo origin never answers like HTTP and never closes: only the idle bound ends this.
    let req = format!("GET http://localhost:{origin}/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(GENEROUS_WAIT, s.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "the idle exchange was not closed");
    assert!(String::from_utf8_lossy(&out).starts_with("GET / HTTP/1.1"));
    assert_eq!(idle_closes_counted(name), 1);
}

#[tokio::test]
async fn a_tunnel_with_bytes_trickling_below_the_bound_is_kept() {
    let origin = echo_origin().await;
    let name = "trickle-tunnel-server";
    let proxy = idle_proxy(name, origin).await;
    let mut tunnel = open_tunnel(proxy, origin).await;
    for i in 0..TRICKLES {
        tokio::time::sleep(TRICKLE_PAUSE).await;
        let byte = [u8::try_from(i % 256).unwrap()];
        tunnel.write_all(&byte).await.unwrap();
        let mut echoed = [0u8; 1];
        tokio::time::timeout(GENEROUS_WAIT, tunnel.read_exact(&mut echoed))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("the tunnel closed after {i} trickled bytes: {e}"));
        assert_eq!(echoed, byte);
    }
    assert_eq!(idle_closes_counted(name), 0);
}
