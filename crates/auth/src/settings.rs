//! The `[auth]` section as typed values: whether clients of the HTTP endpoint must authenticate,
//! and how (Manifold's own API keys, OAuth 2.1 access tokens from one issuer, or both).
//!
//! These are plain values, owned here beside the checks they configure (`authenticator.rs`);
//! manifold-config builds them from the file.

/// JWT algorithms accepted when `algorithms` is not written: the two most issuers sign with.
pub const DEFAULT_ALGORITHMS: [&str; 2] = ["RS256", "ES256"];

/// Every algorithm `algorithms` may name. All are verified with the issuer's public keys; the
/// shared-secret (HS*) algorithms and `none` are refused, so a public key can never be used as
/// an HMAC secret and an unsigned token never passes.
pub const ASYMMETRIC_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// The claim groups are read from when `groups_claim` is not written.
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";

/// The resolved `[auth]` section. `Default` is "no authentication" (loopback only).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthSettings {
    /// Manifold's own API keys (made by `manifold keys create`) are accepted.
    pub api_keys: bool,
    /// OAuth 2.1 access tokens (JWTs) from one issuer are accepted.
    pub oauth: Option<OAuthSettings>,
    /// The public URL of the gateway's MCP endpoint, as clients reach it (the RFC 9728
    /// `resource`, and the default audience). Absent: `http://LISTEN/mcp`.
    pub resource_url: Option<String>,
    /// Serve without authentication even where other machines can connect (something in front
    /// of Manifold authenticates). Logged as a warning at every start.
    pub insecure_no_auth: bool,
}

impl AuthSettings {
    /// Whether requests must carry credentials.
    pub fn enabled(&self) -> bool {
        self.api_keys || self.oauth.is_some()
    }
}

/// The resolved `[auth.oauth]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The issuer identifier; tokens' `iss` must equal it exactly.
    pub issuer: String,
    /// Where the issuer publishes its keys; absent: discovered from the issuer's metadata.
    pub jwks_url: Option<String>,
    /// What tokens' `aud` must contain; absent: the resource URL.
    pub audience: Option<String>,
    /// The algorithms accepted (a subset of [`ASYMMETRIC_ALGORITHMS`]).
    pub algorithms: Vec<String>,
    /// Scopes every token must carry; a token without them gets 403 `insufficient_scope`.
    pub required_scopes: Vec<String>,
    /// The claim holding the caller's groups (a list of strings, or one string).
    pub groups_claim: String,
}
