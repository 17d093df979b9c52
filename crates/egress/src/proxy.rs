//! The proxy loop: accepts on the listener the sandbox launcher bound inside the server's network
//! namespace (a listening socket keeps its namespace, so this side runs in the host's), decides each
//! request, and tunnels or forwards the allowed ones to the address it vetted itself. A tunnel or
//! forwarded exchange on which nothing moves for the idle bound is closed, so a server cannot hold
//! one of its `MAX_CONNECTIONS` slots (and an upstream socket) open forever.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use manifold_telemetry::EgressDecision;
use manifold_telemetry::metrics::count_egress;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::policy::Policy;
use crate::request::{ProxyRequest, RequestError, Target, parse, read_head};

/// Connections one server's proxy serves at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long name resolution may take.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection attempt to a vetted address may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most resolved addresses looked at (every one is vetted; the first that connects is used).
pub const MAX_RESOLVED: usize = 32;
/// Pause after a failed accept (e.g. out of fds) so the loop does not spin.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// How long a tunnel or forwarded exchange may go with no bytes either way before it is closed.
pub const TUNNEL_IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Bytes read from one side before they are written to the other.
pub const RELAY_BUFFER_BYTES: usize = 16 * 1024;

/// One server's proxy: its name (for logs and the metric), its allow-list and its idle bound.
#[derive(Clone, Debug)]
pub struct Egress {
    server: Arc<str>,
    policy: Arc<Policy>,
    idle_timeout: Duration,
}

impl Egress {
    /// A proxy for `server` closing idle tunnels after [`TUNNEL_IDLE_TIMEOUT`].
    pub fn new(server: &str, policy: Policy) -> Self {
        Self {
            server: Arc::from(server),
            policy: Arc::new(policy),
            idle_timeout: TUNNEL_IDLE_TIMEOUT,
        }
    }

    /// The same proxy closing a tunnel after `idle` without bytes either way (tests use a short
    /// bound; a zero bound is raised to one millisecond so a tunnel can open at all).
    #[must_use]
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle.max(Duration::from_millis(1));
        self
    }

    /// The idle bound this proxy applies.
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }
}

/// Serves `listener` until the task is dropped or aborted (the gateway ties it to the child).
pub async fn serve(listener: TcpListener, egress: Egress) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let egress = egress.clone();
                tokio::spawn(async move {
                    handle(stream, &egress).await;
                    drop(permit);
                });
            }
            Err(e) => {
                tracing::warn!(server = %egress.server, error = %e, "egress proxy: accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

async fn handle(mut client: TcpStream, egress: &Egress) {
    let server = &*egress.server;
    let read = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await;
    let parsed = match read {
        Ok(Ok((head, rest))) => parse(&head).map(|r| (r, rest)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(RequestError::Io(format!(
            "no complete request head within {}s",
            HEAD_TIMEOUT.as_secs()
        ))),
    };
    let (request, rest) = match parsed {
        Ok(ok) => ok,
        Err(e) => {
            count_egress(server, EgressDecision::BadRequest);
            tracing::warn!(server, decision = "bad_request", error = %e, "egress proxy refused a request");
            if !matches!(e, RequestError::Truncated | RequestError::Io(_)) {
                respond(&mut client, "400 Bad Request", &format!("bad request: {e}")).await;
            }
            return;
        }
    };
    let target = match &request {
        ProxyRequest::Connect { target } | ProxyRequest::Forward { target, .. } => target.clone(),
    };
    let Some(upstream) = vet_and_connect(&mut client, egress, &target).await else {
        return;
    };
    let mut upstream = upstream;
    let sent = match &request {
        ProxyRequest::Connect { .. } => {
            let ok = client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await;
            match ok {
                Ok(()) => upstream.write_all(&rest).await,
                Err(e) => Err(e),
            }
        }
        ProxyRequest::Forward { head, .. } => {
            let mut first = head.clone();
            first.extend_from_slice(&rest);
            upstream.write_all(&first).await
        }
    };
    if sent.is_ok() && relay(&mut client, &mut upstream, egress.idle_timeout).await == Relay::Idle {
        count_egress(server, EgressDecision::IdleTimeout);
        tracing::info!(
            server,
            host = target.host.as_str(),
            port = target.port,
            idle_secs = egress.idle_timeout.as_secs_f64(),
            decision = "idle_timeout",
            "egress proxy closed a tunnel on which no bytes moved"
        );
    }
}

/// How a relay ended.
#[derive(Debug, PartialEq, Eq)]
enum Relay {
    /// Both sides closed, or one failed.
    Done,
    /// Nothing moved either way for the idle bound.
    Idle,
}

/// Copies bytes both ways until both sides have closed, one fails, or neither sends anything for
/// `idle`. Unlike `copy_bidirectional` it sees every read, so the idle clock restarts on each.
async fn relay(client: &mut TcpStream, upstream: &mut TcpStream, idle: Duration) -> Relay {
    let (mut client_read, mut client_write) = client.split();
    let (mut upstream_read, mut upstream_write) = upstream.split();
    let mut from_client = vec![0u8; RELAY_BUFFER_BYTES];
    let mut from_upstream = vec![0u8; RELAY_BUFFER_BYTES];
    let (mut client_open, mut upstream_open) = (true, true);
    while client_open || upstream_open {
        tokio::select! {
            read = client_read.read(&mut from_client), if client_open => match read {
                Ok(0) => {
                    client_open = false;
                    let _ = upstream_write.shutdown().await;
                }
                Ok(n) => {
                    let Some(bytes) = from_client.get(..n) else { return Relay::Done };
                    if upstream_write.write_all(bytes).await.is_err() {
                        return Relay::Done;
                    }
                }
                Err(_) => return Relay::Done,
            },
            read = upstream_read.read(&mut from_upstream), if upstream_open => match read {
                Ok(0) => {
                    upstream_open = false;
                    let _ = client_write.shutdown().await;
                }
                Ok(n) => {
                    let Some(bytes) = from_upstream.get(..n) else { return Relay::Done };
                    if client_write.write_all(bytes).await.is_err() {
                        return Relay::Done;
                    }
                }
                Err(_) => return Relay::Done,
            },
            () = tokio::time::sleep(idle) => return Relay::Idle,
        }
    }
    Relay::Done
}

/// Applies the policy to `target`, answering the client itself on refusal or failure. Returns the
/// connection to the first vetted address that accepts.
async fn vet_and_connect(
    client: &mut TcpStream,
    egress: &Egress,
    target: &Target,
) -> Option<TcpStream> {
    let server = &*egress.server;
    let (host, port) = (target.host.as_str(), target.port);
    if !egress.policy.allows_host(host, port) {
        count_egress(server, EgressDecision::RefusedHost);
        tracing::warn!(
            server,
            host,
            port,
            decision = "refused_host",
            "egress proxy refused a host not in allow_hosts"
        );
        let body = format!("refused {host}:{port}: not in allow_hosts");
        respond(client, "403 Forbidden", &body).await;
        return None;
    }
    let resolved =
        tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port))).await;
    let addrs: Vec<SocketAddr> = match resolved {
        Ok(Ok(addrs)) => addrs.take(MAX_RESOLVED).collect(),
        Ok(Err(_)) | Err(_) => Vec::new(),
    };
    if let Some((addr, rule)) = addrs
        .iter()
        .find_map(|a| egress.policy.refuses_address(a.ip()).map(|r| (a.ip(), r)))
    {
        count_egress(server, EgressDecision::RefusedAddress);
        let rule = rule.as_str();
        tracing::warn!(server, host, port, %addr, rule, decision = "refused_address", "egress proxy refused a host resolving to a non-public address");
        let body = format!(
            "refused {host}:{port}: it resolves to {addr}, a {rule} address (allow_private opens such ranges)"
        );
        respond(client, "403 Forbidden", &body).await;
        return None;
    }
    count_egress(server, EgressDecision::Allowed);
    tracing::info!(
        server,
        host,
        port,
        decision = "allowed",
        "egress proxy allowed a host"
    );
    if addrs.is_empty() {
        tracing::warn!(
            server,
            host,
            port,
            "egress proxy could not resolve an allowed host"
        );
        respond(client, "502 Bad Gateway", &format!("cannot resolve {host}")).await;
        return None;
    }
    for addr in &addrs {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await
        {
            return Some(stream);
        }
    }
    tracing::warn!(
        server,
        host,
        port,
        "egress proxy could not connect to an allowed host"
    );
    let body = format!("cannot connect to {host}:{port}");
    respond(client, "502 Bad Gateway", &body).await;
    None
}

/// A short text answer; the client gets the reason in the body (curl and node print it).
async fn respond<W: AsyncWrite + Unpin>(client: &mut W, status: &str, body: &str) {
    let body = format!("manifold egress proxy: {body}\n");
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(text.as_bytes()).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::assertions_on_constants)]
    fn bounds_are_positive_and_ordered() {
        assert!((16..=4096).contains(&MAX_CONNECTIONS));
        assert!(
            MAX_RESOLVED >= 2,
            "dual-stack names resolve to at least two addresses"
        );
        for t in [HEAD_TIMEOUT, RESOLVE_TIMEOUT, CONNECT_TIMEOUT] {
            assert!(t >= Duration::from_secs(1) && t <= Duration::from_secs(60));
        }
        assert!(ACCEPT_BACKOFF < HEAD_TIMEOUT);
        assert!(
            TUNNEL_IDLE_TIMEOUT > HEAD_TIMEOUT,
            "a tunnel may idle longer than a client may take to send its head"
        );
        assert!(TUNNEL_IDLE_TIMEOUT <= Duration::from_secs(3600));
        assert!((1024..=1024 * 1024).contains(&RELAY_BUFFER_BYTES));
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_idle_bound_defaults_and_can_be_shortened_but_not_to_zero() {
        let policy = || Policy::new::<&str, &str>(&[], &[]).unwrap();
        assert_eq!(
            Egress::new("s", policy()).idle_timeout(),
            TUNNEL_IDLE_TIMEOUT
        );
        let short = Egress::new("s", policy()).with_idle_timeout(Duration::from_millis(50));
        assert_eq!(short.idle_timeout(), Duration::from_millis(50));
        let zero = Egress::new("s", policy()).with_idle_timeout(Duration::ZERO);
        assert_eq!(zero.idle_timeout(), Duration::from_millis(1));
    }
}
