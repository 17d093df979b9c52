//! Authorization server metadata: RFC 8414 and OpenID Connect Discovery, tried in the order the
//! MCP specification gives, and validated as RFC 8414 §3.3 requires (the document's `issuer` must
//! be exactly the issuer the URL was built from; a document that says otherwise is not used).

use serde::Deserialize;
use url::Url;

use super::error::AuthError;
use super::http::AuthHttp;
use super::pkce;

/// What Manifold uses of an authorization server's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AuthServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
    pub registration_endpoint: Option<String>,
    pub scopes_supported: Option<Vec<String>>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub grant_types_supported: Option<Vec<String>>,
    pub client_id_metadata_document_supported: Option<bool>,
    pub authorization_response_iss_parameter_supported: Option<bool>,
}

impl AuthServerMetadata {
    /// Whether the server advertises PKCE with S256, which the specification requires before
    /// an authorization code flow may start.
    pub fn supports_s256(&self) -> bool {
        self.code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|x| x == pkce::METHOD))
    }

    /// Whether `scope` is listed in `scopes_supported`.
    pub fn lists_scope(&self, scope: &str) -> bool {
        self.scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|x| x == scope))
    }

    /// Whether a token endpoint authentication method is offered (RFC 8414's default, when the
    /// list is absent, is `client_secret_basic`).
    pub fn offers_auth_method(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(list) => list.iter().any(|m| m == method),
            None => method == "client_secret_basic",
        }
    }
}

/// The metadata URLs for an issuer, in the specification's priority order.
pub fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/').to_owned();
    let at = |p: String| {
        let mut u = issuer.clone();
        u.set_query(None);
        u.set_fragment(None);
        u.set_path(&p);
        u
    };
    if path.is_empty() {
        vec![
            at("/.well-known/oauth-authorization-server".to_owned()),
            at("/.well-known/openid-configuration".to_owned()),
        ]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

/// Fetches the first usable metadata document for `issuer` (the identifier exactly as the
/// protected resource metadata wrote it).
pub async fn discover(http: &AuthHttp, issuer: &str) -> Result<AuthServerMetadata, AuthError> {
    let issuer_url = http.url(issuer, "the authorization server's issuer identifier")?;
    if issuer_url.query().is_some() || issuer_url.fragment().is_some() {
        return Err(AuthError::BadDocument {
            what: "the authorization server's issuer identifier".to_owned(),
            url: issuer.to_owned(),
            detail: "an issuer identifier has no query or fragment (RFC 8414 §2)".to_owned(),
        });
    }
    let urls = metadata_urls(&issuer_url);
    let mut mismatch = String::new();
    for url in &urls {
        let answer = http.get_json(url, "authorization server metadata").await?;
        if !answer.is_success() {
            tracing::debug!(url = %url, status = answer.status, "no authorization server metadata here");
            continue;
        }
        let Some(doc) = answer
            .json
            .and_then(|j| serde_json::from_value::<AuthServerMetadata>(j).ok())
        else {
            tracing::debug!(url = %url, "not an authorization server metadata document");
            continue;
        };
        if doc.issuer != issuer {
            tracing::warn!(url = %url, expected = %issuer, found = %doc.issuer, "authorization server metadata names another issuer; not used");
            mismatch = format!(
                "; the document at {url} names the issuer {:?}, not {issuer:?}, so it was not used",
                doc.issuer
            );
            continue;
        }
        return Ok(doc);
    }
    Err(AuthError::NoServerMetadata {
        issuer: issuer.to_owned(),
        tried: urls
            .iter()
            .map(Url::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        mismatch,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn urls(issuer: &str) -> Vec<String> {
        metadata_urls(&Url::parse(issuer).unwrap())
            .iter()
            .map(Url::to_string)
            .collect()
    }

    #[test]
    fn an_issuer_with_a_path_tries_insertion_then_appending() {
        assert_eq!(
            urls("https://auth.example.com/tenant1"),
            vec![
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            urls("https://auth.example.com/tenant1/")[0],
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1"
        );
    }

    #[test]
    fn an_issuer_without_a_path_tries_oauth_then_openid() {
        assert_eq!(
            urls("https://auth.example.com"),
            vec![
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn pkce_and_auth_method_support_read_from_the_document() {
        let m: AuthServerMetadata = serde_json::from_value(serde_json::json!({
            "issuer": "https://a",
            "code_challenge_methods_supported": ["plain", "S256"],
            "scopes_supported": ["x", "offline_access"],
        }))
        .unwrap();
        assert!(m.supports_s256());
        assert!(m.lists_scope("offline_access"));
        assert!(m.offers_auth_method("client_secret_basic"));
        assert!(!m.offers_auth_method("none"));
        let plain_only = AuthServerMetadata {
            code_challenge_methods_supported: Some(vec!["plain".to_owned()]),
            token_endpoint_auth_methods_supported: Some(vec!["none".to_owned()]),
            ..AuthServerMetadata::default()
        };
        assert!(!plain_only.supports_s256());
        assert!(!AuthServerMetadata::default().supports_s256());
        assert!(plain_only.offers_auth_method("none"));
        assert!(!plain_only.offers_auth_method("client_secret_basic"));
    }
}
