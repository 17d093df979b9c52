//! How to reach an HTTP server: the URL, the transport, headers, trust roots and credentials.
//! Below both the shared HTTP client (`http_client.rs`), the OAuth code (`auth/`) and the HTTP
//! transports, which all read it.

use std::path::PathBuf;

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
