//! From "where is the server" to a negotiated connection.
//!
//! A [`Target`] names a stdio command or a URL; [`connect`] starts the right transport, negotiates
//! the era, and for URLs walks the specification's fallback from Streamable HTTP to legacy SSE.

use std::path::PathBuf;
use std::sync::Arc;

use crate::connection::{Connection, RefuseServerRequests, ServerRequestHandler};
use crate::error::UpstreamError;
use crate::negotiate::{ClientIdentity, EraChoice, PeerInfo};
use crate::transport::stdio::{self, StdioSpec};

/// Which HTTP transport to use for a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpTransportChoice {
    /// Streamable HTTP, falling back to legacy HTTP+SSE.
    #[default]
    Auto,
    StreamableHttp,
    /// Legacy HTTP+SSE (`GET` the SSE endpoint, `POST` to the endpoint it names).
    Sse,
}

/// How to reach an HTTP server. Equal specs reach the same endpoint the same way (what a
/// configuration reload compares).
#[derive(Clone, Default, PartialEq)]
pub struct HttpSpec {
    pub url: String,
    pub transport: HttpTransportChoice,
    /// Extra request headers (name, value), e.g. authorization.
    pub headers: Vec<(String, String)>,
    /// PEM file of extra trusted CA certificates.
    pub ca_bundle: Option<PathBuf>,
    /// PEM file with the client certificate chain and private key for mTLS.
    pub client_identity: Option<PathBuf>,
    /// Allow plain `http://` to hosts other than loopback.
    pub allow_insecure_http: bool,
    /// Credentials beyond the static headers: OAuth, or the caller's token passed through.
    pub auth: crate::auth::HttpAuth,
}

impl std::fmt::Debug for HttpSpec {
    /// Header values (authorization) and URL query strings may hold secrets: both are hidden.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown_url = self.url.split(['?', '#']).next().unwrap_or_default();
        f.debug_struct("HttpSpec")
            .field("url", &shown_url)
            .field("transport", &self.transport)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, _)| format!("{k}: <redacted>"))
                    .collect::<Vec<_>>(),
            )
            .field("ca_bundle", &self.ca_bundle)
            .field("client_identity", &self.client_identity)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("auth", &self.auth)
            .finish()
    }
}

/// Where a server is.
#[derive(Debug, Clone)]
pub enum Target {
    Stdio(StdioSpec),
    Http(HttpSpec),
    /// An API described by an OpenAPI document, answered by Manifold itself.
    OpenApi(crate::transport::openapi::OpenApiSpec),
}

/// Everything a connection needs besides the target.
#[derive(Clone)]
pub struct ConnectOptions {
    /// The server's name in logs and errors.
    pub server: String,
    pub era: EraChoice,
    pub client: ClientIdentity,
    pub handler: Arc<dyn ServerRequestHandler>,
}

impl ConnectOptions {
    pub fn new(server: impl Into<String>) -> ConnectOptions {
        ConnectOptions {
            server: server.into(),
            era: EraChoice::Auto,
            client: ClientIdentity::default(),
            handler: Arc::new(RefuseServerRequests),
        }
    }
}

/// Starts the transport and negotiates. On failure nothing is left running.
pub async fn connect(
    target: &Target,
    options: &ConnectOptions,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    match target {
        Target::Stdio(spec) => {
            let (transport, inbound) = stdio::spawn(&options.server, spec)?;
            let conn = Connection::start(
                options.server.clone(),
                transport,
                inbound,
                Arc::clone(&options.handler),
            );
            match conn.negotiate(options.era, &options.client).await {
                Ok(info) => Ok((conn, info)),
                Err(e) => {
                    conn.close().await;
                    Err(e)
                }
            }
        }
        Target::Http(spec) => crate::transport::http::connect(spec, options).await,
        Target::OpenApi(spec) => {
            let (transport, inbound) =
                crate::transport::openapi::start(&options.server, spec).await?;
            let conn = Connection::start(
                options.server.clone(),
                transport,
                inbound,
                Arc::clone(&options.handler),
            );
            match conn.negotiate(EraChoice::Legacy, &options.client).await {
                Ok(info) => Ok((conn, info)),
                Err(e) => {
                    conn.close().await;
                    Err(e)
                }
            }
        }
    }
}

/// [`connect`] with a deadline for the whole set-up: starting the transport, the era probe and
/// the handshake. When it passes, the server is stopped (for a stdio server that takes at most
/// [`stdio::STDIN_CLOSE_GRACE`] + [`stdio::SIGTERM_GRACE`]) and the error names what was still
/// unanswered (`server/discover`, `initialize`), or "the connection set-up" when nothing was.
pub async fn connect_within(
    target: &Target,
    options: &ConnectOptions,
    deadline: tokio::time::Instant,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    let started = tokio::time::Instant::now();
    let timed_out = |method: Option<String>| UpstreamError::Timeout {
        server: options.server.clone(),
        method: method.unwrap_or_else(|| SETUP_PHASE.to_owned()),
        after: deadline.saturating_duration_since(started),
    };
    match target {
        Target::Stdio(spec) => {
            let (transport, inbound) = stdio::spawn(&options.server, spec)?;
            let conn = Connection::start(
                options.server.clone(),
                transport,
                inbound,
                Arc::clone(&options.handler),
            );
            let outcome = {
                let negotiate = conn.negotiate(options.era, &options.client);
                tokio::pin!(negotiate);
                tokio::select! {
                    outcome = &mut negotiate => outcome,
                    () = tokio::time::sleep_until(deadline) => {
                        // Read while the request is still pending: dropping it forgets it.
                        Err(timed_out(conn.pending_methods().into_iter().next()))
                    }
                }
            };
            match outcome {
                Ok(info) => Ok((conn, info)),
                Err(e) => {
                    conn.close().await;
                    Err(e)
                }
            }
        }
        Target::Http(_) | Target::OpenApi(_) => {
            tokio::time::timeout_at(deadline, connect(target, options))
                .await
                .unwrap_or_else(|_| Err(timed_out(None)))
        }
    }
}

/// How a set-up timeout names its phase when no request was waiting (an HTTP connection).
pub const SETUP_PHASE: &str = "the connection set-up";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_secret_values() {
        let http = HttpSpec {
            url: "https://h/mcp?token=s3cret".to_owned(),
            headers: vec![("Authorization".to_owned(), "Bearer s3cret".to_owned())],
            ..HttpSpec::default()
        };
        let stdio = StdioSpec {
            command: "srv".to_owned(),
            env: vec![("API_KEY".to_owned(), "s3cret".to_owned())],
            ..StdioSpec::default()
        };
        for shown in [
            format!("{http:?}"),
            format!("{stdio:?}"),
            format!("{:?}", Target::Http(http.clone())),
        ] {
            assert!(!shown.contains("s3cret"), "{shown}");
        }
        assert!(format!("{stdio:?}").contains("API_KEY=<redacted>"));
    }
}
