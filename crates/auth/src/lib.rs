//! manifold-auth: who may use the gateway's HTTP endpoint, and how they prove it.
//!
//! [`Authenticator`] reads a request's bearer credential ([`bearer`]) and checks it against
//! Manifold's own API keys ([`ApiKeys`], over a [`KeyRepository`] the binary backs with its store) or as an OAuth 2.1 access token from the configured
//! issuer ([`JwtValidator`], with the issuer's keys in a [`jwks::JwksCache`]). The result is an
//! [`Identity`] or a typed [`AuthError`] that [`Authenticator::challenge`] turns into the status
//! and `WWW-Authenticate` header to answer with. [`ProtectedResourceMetadata`] is the RFC 9728
//! document that tells OAuth clients where to get tokens. No HTTP server code lives here.

pub mod api_keys;
pub mod authenticator;
pub mod bearer;
pub mod error;
pub mod identity;
pub mod jwks;
pub mod jwt;
pub mod key_repository;
pub mod metadata;
pub mod settings;

pub use api_keys::{API_KEYS_FILE, ApiKeyFile, KeyRecord, NewKey};
pub use authenticator::{Authenticator, Challenge};
pub use error::{AuthError, KeyStoreError, SetupError, TokenProblem};
pub use identity::{Credential, Identity};
pub use jwt::{JwtSettings, JwtValidator};
pub use key_repository::{
    ApiKeys, ImportReport, KEY_REFRESH_INTERVAL, KeyRepository, RepositoryFuture,
    UNKNOWN_KEY_REFRESH_INTERVAL,
};
pub use metadata::{ProtectedResourceMetadata, WELL_KNOWN_PREFIX};
pub use settings::{AuthSettings, OAuthSettings};
