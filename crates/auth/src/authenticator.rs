//! The one question the HTTP server asks: who sent this request? Bearer parsing, then the API
//! key store or the token validator by the token's shape; and, for a refusal, the exact status
//! and `WWW-Authenticate` challenge RFC 6750, RFC 9728 and the MCP authorization spec ask for.

use crate::settings::AuthSettings;

use crate::api_keys::VerifyError;
use crate::bearer::{Presented, bearer_token, classify};
use crate::error::{AuthError, SetupError, TokenProblem};
use crate::identity::Identity;
use crate::jwks::{KeySource, fetchable_url};
use crate::jwt::{JwtSettings, JwtValidator, parse_algorithms};
use crate::key_repository::ApiKeys;
use crate::metadata::{ProtectedResourceMetadata, metadata_url};

/// The realm named in every challenge.
pub const REALM: &str = "manifold";

/// How a refusal is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub status: u16,
    /// The `WWW-Authenticate` value, for the statuses that carry one.
    pub www_authenticate: Option<String>,
    /// One line for the response body, starting with the status's reason.
    pub message: String,
}

/// Authenticates requests with API keys, access tokens, or both.
#[derive(Debug)]
pub struct Authenticator {
    api_keys: Option<ApiKeys>,
    jwt: Option<JwtValidator>,
    metadata: Option<ProtectedResourceMetadata>,
    metadata_url: Option<String>,
}

/// A value made safe inside a quoted-string of a challenge.
fn quoted(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\' {
                c
            } else {
                '\''
            }
        })
        .collect()
}

impl Authenticator {
    /// An authenticator from its parts. `resource_url` is the public URL of `/mcp`; with OAuth
    /// it is required (it names the resource in the metadata).
    pub fn new(
        api_keys: Option<ApiKeys>,
        jwt: Option<JwtValidator>,
        resource_url: Option<&str>,
    ) -> Result<Authenticator, SetupError> {
        let (metadata, metadata_url) = match (&jwt, resource_url) {
            (Some(jwt), Some(resource)) => {
                let parsed = url::Url::parse(resource).map_err(|e| SetupError::BadUrl {
                    field: "auth.resource_url",
                    reason: e.to_string(),
                })?;
                let document = ProtectedResourceMetadata {
                    resource: resource.to_owned(),
                    authorization_servers: vec![jwt.settings().issuer.clone()],
                    scopes_supported: jwt.settings().required_scopes.clone(),
                    bearer_methods_supported: vec!["header".to_owned()],
                    resource_name: "Manifold".to_owned(),
                };
                (Some(document), Some(metadata_url(&parsed)))
            }
            (Some(_), None) => return Err(SetupError::NoResourceUrl),
            (None, _) => (None, None),
        };
        Ok(Authenticator {
            api_keys,
            jwt,
            metadata,
            metadata_url,
        })
    }

    /// The authenticator a configuration asks for; `None` when authentication is off.
    /// `default_resource_url` is used when `[auth] resource_url` is not written; `api_keys` is
    /// where the keys live, used when `[auth] api_keys = true`.
    pub fn from_config(
        auth: &AuthSettings,
        api_keys: impl FnOnce() -> ApiKeys,
        default_resource_url: Option<&str>,
    ) -> Result<Option<Authenticator>, SetupError> {
        if !auth.enabled() {
            return Ok(None);
        }
        let api_keys = auth.api_keys.then(api_keys);
        let resource = auth.resource_url.as_deref().or(default_resource_url);
        let jwt = match &auth.oauth {
            None => None,
            Some(oauth) => {
                let resource = resource.ok_or(SetupError::NoResourceUrl)?;
                let source = match &oauth.jwks_url {
                    Some(u) => KeySource::Url(fetchable_url(u, "auth.oauth.jwks_url")?),
                    None => {
                        fetchable_url(&oauth.issuer, "auth.oauth.issuer")?;
                        KeySource::Discover {
                            issuer: oauth.issuer.clone(),
                        }
                    }
                };
                let settings = JwtSettings {
                    issuer: oauth.issuer.clone(),
                    audience: oauth
                        .audience
                        .clone()
                        .unwrap_or_else(|| resource.to_owned()),
                    algorithms: parse_algorithms(&oauth.algorithms)?,
                    required_scopes: oauth.required_scopes.clone(),
                    groups_claim: oauth.groups_claim.clone(),
                };
                Some(JwtValidator::new(settings, source)?)
            }
        };
        Authenticator::new(api_keys, jwt, resource).map(Some)
    }

    pub fn api_keys(&self) -> Option<&ApiKeys> {
        self.api_keys.as_ref()
    }

    pub fn jwt(&self) -> Option<&JwtValidator> {
        self.jwt.as_ref()
    }

    /// The RFC 9728 document, when OAuth is configured.
    pub fn metadata(&self) -> Option<&ProtectedResourceMetadata> {
        self.metadata.as_ref()
    }

    /// Where the RFC 9728 document is published, when OAuth is configured.
    pub fn metadata_url(&self) -> Option<&str> {
        self.metadata_url.as_deref()
    }

    /// What is accepted, for the startup log.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(store) = &self.api_keys {
            parts.push(format!("API keys from {}", store.describe()));
        }
        if let Some(jwt) = &self.jwt {
            let s = jwt.settings();
            parts.push(format!(
                "access tokens from {} for audience {}",
                s.issuer, s.audience
            ));
        }
        parts.join(" and ")
    }

    /// The identity a request's `Authorization` header values prove.
    pub async fn authenticate(&self, authorization: &[&[u8]]) -> Result<Identity, AuthError> {
        let token = bearer_token(authorization)?.ok_or(AuthError::Missing)?;
        match classify(&token)? {
            Presented::ApiKey(key) => {
                let store = self.api_keys.as_ref().ok_or(TokenProblem::ApiKeysOff)?;
                store.verify(key).await.map_err(|e| match e {
                    VerifyError::Refused(p) => AuthError::InvalidToken(p),
                    VerifyError::Store(e) => {
                        tracing::error!(error = %e, "the API key store is unusable; every API key is refused until it is fixed");
                        AuthError::Unavailable(
                            "Manifold cannot read its API keys; ask its operator to check the gateway's log".to_owned(),
                        )
                    }
                })
            }
            Presented::Jwt(jwt) => {
                let validator = self.jwt.as_ref().ok_or(TokenProblem::TokensOff)?;
                validator.validate(jwt).await
            }
        }
    }

    /// The answer to a refusal: status, challenge and message.
    pub fn challenge(&self, error: &AuthError) -> Challenge {
        let (status, code, reason) = match error {
            AuthError::Missing | AuthError::UnsupportedScheme(_) => (401, None, "Unauthorized"),
            AuthError::InvalidRequest(_) => (400, Some("invalid_request"), "Bad Request"),
            AuthError::InvalidToken(_) => (401, Some("invalid_token"), "Unauthorized"),
            AuthError::InsufficientScope { .. } => (403, Some("insufficient_scope"), "Forbidden"),
            AuthError::Unavailable(_) => (503, None, "Service Unavailable"),
        };
        let message = format!("{reason}: {error}");
        if status == 503 {
            return Challenge {
                status,
                www_authenticate: None,
                message,
            };
        }
        let mut params = vec![format!("realm=\"{REALM}\"")];
        if let Some(code) = code {
            params.push(format!("error=\"{code}\""));
            params.push(format!(
                "error_description=\"{}\"",
                quoted(&error.to_string())
            ));
        }
        // The MCP spec asks for the needed scopes in every challenge, not only in the 403.
        let scopes = self
            .jwt
            .as_ref()
            .map(|j| j.settings().required_scopes.join(" "))
            .unwrap_or_default();
        if !scopes.is_empty() {
            params.push(format!("scope=\"{}\"", quoted(&scopes)));
        }
        if let Some(url) = &self.metadata_url {
            params.push(format!("resource_metadata=\"{}\"", quoted(url)));
        }
        Challenge {
            status,
            www_authenticate: Some(format!("Bearer {}", params.join(", "))),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_only() -> Authenticator {
        let repository = std::sync::Arc::new(crate::key_repository::tests::InMemory::default());
        Authenticator::new(Some(ApiKeys::new(repository)), None, None).unwrap()
    }

    #[test]
    fn challenges_carry_the_status_and_error_rfc_6750_asks_for() {
        let a = keys_only();
        assert_eq!(
            a.challenge(&AuthError::Missing),
            Challenge {
                status: 401,
                www_authenticate: Some("Bearer realm=\"manifold\"".to_owned()),
                message: "Unauthorized: this gateway requires authentication; send Authorization: Bearer <API key or access token>".to_owned(),
            }
        );
        let c = a.challenge(&AuthError::InvalidToken(TokenProblem::UnknownKid(
            "k\"9".into(),
        )));
        assert_eq!(c.status, 401);
        assert_eq!(
            c.www_authenticate.as_deref(),
            Some(
                "Bearer realm=\"manifold\", error=\"invalid_token\", error_description=\"the token names signing key 'k'9', which the issuer does not publish\""
            )
        );
        let c = a.challenge(&AuthError::InvalidRequest("two headers".into()));
        assert_eq!(
            (c.status, c.message.as_str()),
            (400, "Bad Request: two headers")
        );
        let c = a.challenge(&AuthError::Unavailable("down".into()));
        assert_eq!((c.status, c.www_authenticate), (503, None));
    }

    #[tokio::test]
    async fn tokens_go_where_their_shape_says_and_are_refused_when_that_is_off() {
        let a = keys_only();
        assert_eq!(
            a.authenticate(&[b"Bearer a.b.c"]).await.unwrap_err(),
            AuthError::InvalidToken(TokenProblem::TokensOff)
        );
        assert_eq!(a.authenticate(&[]).await.unwrap_err(), AuthError::Missing);
        let only_tokens = Authenticator {
            api_keys: None,
            jwt: None,
            metadata: None,
            metadata_url: None,
        };
        assert_eq!(
            only_tokens
                .authenticate(&[b"Bearer mfk_1_2"])
                .await
                .unwrap_err(),
            AuthError::InvalidToken(TokenProblem::ApiKeysOff)
        );
    }
}
