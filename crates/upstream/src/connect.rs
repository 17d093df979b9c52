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

/// How to reach an HTTP server.
#[derive(Debug, Clone, Default)]
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
}

/// Where a server is.
#[derive(Debug, Clone)]
pub enum Target {
    Stdio(StdioSpec),
    Http(HttpSpec),
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
    }
}
