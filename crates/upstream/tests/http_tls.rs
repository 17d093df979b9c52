//! TLS for HTTP upstreams: a private CA added to the trust roots, and a client certificate for
//! servers that demand mutual TLS, against a small TLS server built here (the test peer speaks
//! plain HTTP only). The certificates are fixtures made once with openssl (see fixtures/tls).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use manifold_upstream::{
    ConnectOptions, EraChoice, HttpSpec, HttpTransportChoice, PeerInfo, Target, UpstreamError,
    connect,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};

const HANG_GUARD: Duration = Duration::from_secs(30);

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// What the TLS server learnt about one connection.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// The handshake completed; the client certificate it presented, if any.
    Handshake {
        client_cert: Option<Vec<u8>>,
    },
    HandshakeFailed(String),
}

/// A TLS server on 127.0.0.1 that answers `server/discover` and accepts notifications.
async fn tls_server(require_client_cert: bool) -> (u16, mpsc::UnboundedReceiver<Seen>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture("server.pem"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if require_client_cert {
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(fixture("ca.pem")).unwrap() {
            roots.add(ca.unwrap()).unwrap();
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(certs, key).unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(stream) => {
                        let client_cert = stream
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|c| c.first())
                            .map(|c| c.as_ref().to_vec());
                        let _ = tx.send(Seen::Handshake { client_cert });
                        serve_http(stream).await;
                    }
                    Err(e) => {
                        let _ = tx.send(Seen::HandshakeFailed(e.to_string()));
                    }
                }
            });
        }
    });
    (port, rx)
}

/// Just enough HTTP/1.1: one JSON-RPC message per POST, keep-alive.
async fn serve_http(stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>) {
    let mut stream = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; length];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let response = match request.get("id") {
            Some(id) => {
                let reply = serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "result": {
                        "resultType": "complete",
                        "supportedVersions": ["2026-07-28"],
                        "capabilities": {},
                        "serverInfo": {"name": "tls-fixture", "version": "1.0.0"}
                    }
                })
                .to_string();
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
                    reply.len()
                )
            }
            None => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned(),
        };
        if stream
            .get_mut()
            .write_all(response.as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn connect_tls(
    port: u16,
    ca_bundle: Option<PathBuf>,
    client_identity: Option<PathBuf>,
) -> Result<PeerInfo, UpstreamError> {
    let target = Target::Http(HttpSpec {
        url: format!("https://127.0.0.1:{port}/mcp"),
        transport: HttpTransportChoice::StreamableHttp,
        ca_bundle,
        client_identity,
        ..HttpSpec::default()
    });
    let mut options = ConnectOptions::new("tls");
    options.era = EraChoice::Modern;
    let (conn, info) = tokio::time::timeout(HANG_GUARD, connect(&target, &options))
        .await
        .expect("connect hung")?;
    conn.close().await;
    Ok(info)
}

fn fixture_client_cert() -> Vec<u8> {
    CertificateDer::pem_file_iter(fixture("client-identity.pem"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .as_ref()
        .to_vec()
}

#[tokio::test]
async fn a_private_ca_and_a_client_certificate_reach_an_mtls_server() {
    let (port, mut seen) = tls_server(true).await;
    let info = connect_tls(
        port,
        Some(fixture("ca.pem")),
        Some(fixture("client-identity.pem")),
    )
    .await
    .unwrap();
    assert_eq!(info.server_name.as_deref(), Some("tls-fixture"));
    assert_eq!(
        seen.recv().await.unwrap(),
        Seen::Handshake {
            client_cert: Some(fixture_client_cert())
        }
    );
}

#[tokio::test]
async fn without_the_private_ca_the_server_certificate_is_refused() {
    let (port, _seen) = tls_server(false).await;
    let error = connect_tls(port, None, None).await.unwrap_err();
    let UpstreamError::Connect { server, reason } = error else {
        panic!("expected a connect error, got {error:?}");
    };
    assert_eq!(server, "tls");
    assert!(
        reason.starts_with(&format!(
            "POST https://127.0.0.1:{port}/mcp (server/discover): could not connect:"
        )),
        "{reason}"
    );
    assert!(
        reason.ends_with("UnknownIssuer; if the server uses a private CA, configure its CA bundle"),
        "{reason}"
    );
}

#[tokio::test]
async fn an_mtls_server_refuses_a_client_without_a_certificate() {
    let (port, mut seen) = tls_server(true).await;
    let error = connect_tls(port, Some(fixture("ca.pem")), None)
        .await
        .unwrap_err();
    let UpstreamError::Connect { reason, .. } = error else {
        panic!("expected a connect error, got {error:?}");
    };
    assert!(
        reason.ends_with(
            "the server demands a client certificate: configure a client identity for it"
        ),
        "{reason}"
    );
    match seen.recv().await.unwrap() {
        Seen::HandshakeFailed(why) => assert!(why.contains("certificate"), "{why}"),
        other => panic!("expected a failed handshake, got {other:?}"),
    }
}

#[tokio::test]
async fn unusable_tls_files_are_named_in_the_error() {
    let missing = fixture("no-such-bundle.pem");
    let error = connect_tls(1, Some(missing.clone()), None)
        .await
        .unwrap_err();
    let UpstreamError::Connect { reason, .. } = error else {
        panic!("expected a connect error, got {error:?}");
    };
    assert!(
        reason.starts_with(&format!(
            "could not read the CA bundle {}:",
            missing.display()
        )),
        "{reason}"
    );

    // A key alone is not a certificate bundle.
    let error = connect_tls(1, Some(fixture("server.key")), None)
        .await
        .unwrap_err();
    let UpstreamError::Connect { reason, .. } = error else {
        panic!("expected a connect error, got {error:?}");
    };
    assert_eq!(
        reason,
        format!(
            "the CA bundle {} holds no certificate; it must contain PEM \"CERTIFICATE\" blocks",
            fixture("server.key").display()
        )
    );

    // A certificate without its key is not a client identity.
    let error = connect_tls(1, None, Some(fixture("ca.pem")))
        .await
        .unwrap_err();
    let UpstreamError::Connect { reason, .. } = error else {
        panic!("expected a connect error, got {error:?}");
    };
    assert!(
        reason.starts_with(&format!(
            "the client identity {} must be one PEM file with the certificate chain and its private key:",
            fixture("ca.pem").display()
        )),
        "{reason}"
    );
}
