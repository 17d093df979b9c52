//! Credentials for HTTP upstreams: OAuth 2.1 as the MCP authorization specification asks of a
//! client, and the explicit per-server choice to pass a downstream caller's token through.
//!
//! A transport never decides anything about authorization itself: it asks a
//! [`RequestAuthorizer`] to send each request, and the authorizer attaches the bearer token, reads
//! `401`/`403` challenges, discovers the protected resource and its authorization server, obtains
//! or refreshes a token, and retries. The state behind it ([`OAuthClient`]) lives as long as the
//! configured server does, so tokens survive reconnections and restarts of the connection.
//!
//! One concern per file: challenge parsing ([`challenge`]), PKCE ([`pkce`]), RFC 9728 resource
//! metadata ([`resource`]), RFC 8414 / OpenID server metadata ([`server_metadata`]), client
//! identity ([`registration`]), the token endpoint ([`token`]), the user's consent ([`consent`]),
//! persistence ([`store`]), the flow that ties them together ([`session`]), the transport hook
//! ([`request`]) and token passthrough ([`passthrough`]).

pub mod challenge;
pub mod consent;
pub mod error;
pub mod http;
pub mod passthrough;
pub mod pkce;
pub mod registration;
pub mod request;
pub mod resource;
pub mod server_metadata;
pub mod session;
pub mod settings;
pub mod store;
pub mod token;

pub use consent::{ConsentDriver, HeadlessConsent};
pub use error::AuthError;
pub use request::RequestAuthorizer;
pub use session::{LoginSummary, OAuthClient};
pub use settings::{Grant, OAuthSettings};
pub use store::{FileTokenStore, StoredCredentials, TokenFile, TokenStore, TokenStoreFuture};

/// The directory, under the data directory, where earlier versions kept OAuth credentials (one
/// file per server); Manifold imports it into its store once.
pub const TOKEN_STORE_DIR: &str = "oauth";

/// How requests to one HTTP server are authorized, beyond its static headers.
#[derive(Clone, Default)]
pub enum HttpAuth {
    /// Static headers only (a configured `Authorization` header, or none).
    #[default]
    None,
    /// OAuth 2.1: discovery on 401, a grant, refresh, step-up on 403.
    OAuth(OAuthClient),
    /// The downstream caller's own bearer token, forwarded as it came. Only by explicit choice
    /// per server: the specification forbids it by default (tokens are audience-bound).
    Passthrough,
}

impl HttpAuth {
    /// OAuth with these settings and fresh, in-memory state.
    pub fn oauth(settings: OAuthSettings) -> HttpAuth {
        HttpAuth::OAuth(OAuthClient::new(settings))
    }

    /// The OAuth client, when this is OAuth.
    pub fn oauth_client(&self) -> Option<&OAuthClient> {
        match self {
            HttpAuth::OAuth(c) => Some(c),
            _ => None,
        }
    }
}

impl PartialEq for HttpAuth {
    /// Same settings: the runtime state (tokens) is not part of what a server is.
    fn eq(&self, other: &HttpAuth) -> bool {
        match (self, other) {
            (HttpAuth::None, HttpAuth::None) | (HttpAuth::Passthrough, HttpAuth::Passthrough) => {
                true
            }
            (HttpAuth::OAuth(a), HttpAuth::OAuth(b)) => a.settings() == b.settings(),
            _ => false,
        }
    }
}

impl std::fmt::Debug for HttpAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpAuth::None => f.write_str("None"),
            HttpAuth::OAuth(c) => f.debug_tuple("OAuth").field(c.settings()).finish(),
            HttpAuth::Passthrough => f.write_str("Passthrough"),
        }
    }
}
