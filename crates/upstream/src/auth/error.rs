//! Why a server could not be authorized. Each message says what happened, with which party, and
//! what to do; none carries a token, a secret or an authorization code.

/// A failure to obtain or use credentials for an upstream server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("could not reach {url} for {what}: {detail}")]
    Unreachable {
        what: String,
        url: String,
        detail: String,
    },
    #[error("{what} at {url} is unusable: {detail}")]
    BadDocument {
        what: String,
        url: String,
        detail: String,
    },
    #[error(
        "the server asked for authorization but publishes no protected resource metadata and no usable authorization server metadata at its origin (tried {tried}){mismatch}; it cannot be authorized automatically"
    )]
    NoResourceMetadata {
        tried: String,
        /// Why a document that was found had to be ignored, if one was.
        mismatch: String,
    },
    #[error(
        "the protected resource metadata names the resource {advertised:?}, which is neither {expected:?} nor a parent of it; refusing to ask for tokens for another resource (a misconfigured or malicious server)"
    )]
    ResourceMismatch {
        advertised: String,
        expected: String,
    },
    #[error(
        "no usable authorization server metadata for {issuer:?} (tried {tried}){mismatch}; check the server's authorization_servers"
    )]
    NoServerMetadata {
        issuer: String,
        tried: String,
        /// Why a document that was found had to be ignored, if one was.
        mismatch: String,
    },
    #[error(
        "the authorization server {issuer:?} does not advertise PKCE with S256 (code_challenge_methods_supported), so the MCP specification requires refusing to proceed"
    )]
    PkceUnsupported { issuer: String },
    #[error(
        "the authorization server {issuer:?} offers no way to obtain a client id (no client ID metadata document support with client_metadata_url configured, no registration_endpoint); configure oauth.client_id (and client_secret) for this server"
    )]
    NoClientIdentity { issuer: String },
    #[error("dynamic client registration with {issuer:?} failed: {detail}")]
    Registration { issuer: String, detail: String },
    #[error("the token endpoint refused the {grant} request (HTTP {status}{error}){description}")]
    TokenEndpoint {
        grant: String,
        status: u16,
        /// `: <error code>` when the body named one.
        error: String,
        /// `: <error_description>` when the body gave one.
        description: String,
    },
    #[error("the authorization response is refused: {detail}")]
    AuthorizationResponse { detail: String },
    #[error("the authorization server denied access: {error}{description}")]
    Denied { error: String, description: String },
    #[error(
        "the server needs a user's consent{scopes} and no usable token is stored; run `manifold login {server}`"
    )]
    NeedsLogin {
        server: String,
        /// ` (scopes: ...)` when particular scopes are needed.
        scopes: String,
    },
    #[error("{detail}")]
    Rejected { detail: String },
    #[error("{detail}")]
    Unsupported { detail: String },
    #[error(
        "the stored credentials at {path} could not be {action}: {detail}; check the data directory's permissions"
    )]
    Store {
        path: String,
        action: String,
        detail: String,
    },
    /// A [`super::TokenStore`] other than the file store failed; `detail` says where, and what
    /// to do.
    #[error("{detail}")]
    TokenStore { detail: String },
    #[error("the OAuth settings are not usable: {detail}")]
    Settings { detail: String },
    #[error("the user's consent was not obtained: {detail}")]
    Consent { detail: String },
}
