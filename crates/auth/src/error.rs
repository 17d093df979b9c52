//! Why a request was not authenticated, and why authentication could not be set up.
//!
//! Every refusal is typed, so the HTTP layer maps it to exactly one status and one
//! `WWW-Authenticate` challenge ([`crate::Authenticator::challenge`]), and so tests can name the
//! reason. No message ever contains the credential itself.

use std::path::PathBuf;

/// Why a presented token was refused (RFC 6750 `invalid_token`: 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenProblem {
    #[error("the token holds characters a bearer token cannot have")]
    BadCharacters,
    #[error("the token is neither a Manifold API key (mfk_...) nor a JWT")]
    NotAToken,
    #[error("API keys are not accepted by this gateway; use an OAuth access token")]
    ApiKeysOff,
    #[error("OAuth access tokens are not accepted by this gateway; use a Manifold API key")]
    TokensOff,
    #[error(
        "the API key is malformed: a Manifold key is mfk_, 16 hex digits, _, and 64 hex digits"
    )]
    MalformedKey,
    #[error("the API key is not known to this gateway (mistyped, or made for another gateway)")]
    UnknownKey,
    #[error("the API key was revoked; ask for a new one")]
    RevokedKey,
    #[error("the token is not a well-formed JWT ({0})")]
    Malformed(String),
    #[error("unsigned tokens (alg none) are refused")]
    Unsigned,
    #[error("the token's algorithm {alg} is not allowed here (allowed: {allowed})")]
    AlgorithmNotAllowed { alg: String, allowed: String },
    #[error("the token names signing key '{0}', which the issuer does not publish")]
    UnknownKid(String),
    #[error("the issuer publishes no key for the token's algorithm {0}")]
    NoMatchingKey(String),
    #[error("the issuer's key '{kid}' cannot verify {alg} signatures")]
    KeyMismatch { kid: String, alg: String },
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token expired")]
    Expired,
    #[error("the token is not valid yet (its nbf is in the future)")]
    NotYetValid,
    #[error("the token was issued by another issuer than {0}")]
    WrongIssuer(String),
    #[error("the token was not issued for this gateway (its aud does not include {0})")]
    WrongAudience(String),
    #[error("the token has no {0} claim")]
    MissingClaim(String),
    #[error("the token's {0} claim has the wrong type")]
    BadClaim(String),
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credentials at all (401, a challenge without an error code, as RFC 6750 asks).
    #[error(
        "this gateway requires authentication; send Authorization: Bearer <API key or access token>"
    )]
    Missing,
    /// Credentials in a scheme Manifold does not take (401, no error code).
    #[error(
        "the Authorization scheme '{0}' is not supported; send Authorization: Bearer <API key or access token>"
    )]
    UnsupportedScheme(String),
    /// A malformed request (400 `invalid_request`).
    #[error("{0}")]
    InvalidRequest(String),
    /// A token that does not prove anything (401 `invalid_token`).
    #[error("{0}")]
    InvalidToken(TokenProblem),
    /// A valid token without the scopes this gateway requires (403 `insufficient_scope`).
    #[error(
        "the token lacks the required scope(s) {}; ask the authorization server for a token that grants them",
        missing.join(" ")
    )]
    InsufficientScope { missing: Vec<String> },
    /// Credentials could not be checked now (503): the issuer's keys or the key file.
    #[error("{0}")]
    Unavailable(String),
}

impl From<TokenProblem> for AuthError {
    fn from(p: TokenProblem) -> AuthError {
        AuthError::InvalidToken(p)
    }
}

/// What went wrong with the API key file.
#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a Manifold API key file ({reason}); restore it from a backup or move it away"
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error("'{0}' is not a key name: use 1 to 64 of A-Z a-z 0-9 _ - . @")]
    InvalidName(String),
    #[error("'{0}' is not a scope: one word of printable ASCII without quotes or backslashes")]
    InvalidScope(String),
    #[error("'{0}' is not a group name: 1 to 128 printable characters without commas")]
    InvalidGroup(String),
    #[error(
        "an active key named '{0}' exists already; revoke it first (manifold keys revoke {0}) or pick another name"
    )]
    NameTaken(String),
    #[error("no active key is named '{0}' (manifold keys list shows them)")]
    NoSuchKey(String),
    #[error("the system's random number generator failed: {0}")]
    Random(String),
    /// The store holding the keys failed; its message says where and what to do.
    #[error("{0}")]
    Store(String),
}

/// Why authentication could not be set up from the configuration.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(
        "[auth.oauth] needs the gateway's public URL: set [auth] resource_url to the URL clients use for /mcp (e.g. \"https://mcp.example.com/mcp\")"
    )]
    NoResourceUrl,
    #[error("{field} is not a usable URL ({reason})")]
    BadUrl { field: &'static str, reason: String },
    #[error("auth.oauth.algorithms names {0}, which Manifold does not verify")]
    BadAlgorithm(String),
    #[error("could not set up the HTTP client that fetches the issuer's keys: {0}")]
    HttpClient(String),
}
