//! The token endpoint: the authorization code exchange (with the PKCE verifier), refresh, and the
//! client credentials grant, each with the `resource` parameter (RFC 8707) and the client's
//! authentication; and what a token response means (expiry, granted scope).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use super::error::AuthError;
use super::http::AuthHttp;
use super::registration::{ClientAuthMethod, ClientRegistration};

/// A token is refreshed this long before it expires, so a request never carries one that dies
/// on the way.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// Tokens for one resource from one authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSet {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Seconds since the Unix epoch; `None` when the server did not say.
    pub expires_at: Option<u64>,
    /// The scope the server granted (its `scope`, else what was asked for).
    pub scope: Option<String>,
    /// The scope that was asked for, kept for step-up (the union of what was asked before and
    /// what the server now challenges for).
    pub requested_scope: Option<String>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("requested_scope", &self.requested_scope)
            .finish()
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl TokenSet {
    /// Whether the access token is expired, or will be within [`EXPIRY_MARGIN`], at `at`.
    pub fn expires_soon(&self, at: u64) -> bool {
        self.expires_at
            .is_some_and(|e| e <= at.saturating_add(EXPIRY_MARGIN.as_secs()))
    }
}

/// One token request.
#[derive(Clone, Copy)]
pub enum GrantRequest<'a> {
    AuthorizationCode {
        code: &'a str,
        verifier: &'a str,
        redirect_uri: &'a str,
    },
    Refresh {
        refresh_token: &'a str,
    },
    ClientCredentials {
        scope: Option<&'a str>,
    },
}

impl GrantRequest<'_> {
    fn grant_type(&self) -> &'static str {
        match self {
            GrantRequest::AuthorizationCode { .. } => "authorization_code",
            GrantRequest::Refresh { .. } => "refresh_token",
            GrantRequest::ClientCredentials { .. } => "client_credentials",
        }
    }
}

/// Asks the token endpoint for tokens. `requested_scope` is remembered with the result;
/// `previous_refresh` is kept when a refresh answer brings no new refresh token.
pub async fn request(
    http: &AuthHttp,
    token_endpoint: &Url,
    client: &ClientRegistration,
    grant: GrantRequest<'_>,
    resource: &str,
    requested_scope: Option<&str>,
    previous_refresh: Option<&str>,
) -> Result<TokenSet, AuthError> {
    let mut form: Vec<(&str, &str)> = vec![("grant_type", grant.grant_type())];
    match grant {
        GrantRequest::AuthorizationCode {
            code,
            verifier,
            redirect_uri,
        } => {
            form.push(("code", code));
            form.push(("redirect_uri", redirect_uri));
            form.push(("code_verifier", verifier));
        }
        GrantRequest::Refresh { refresh_token } => form.push(("refresh_token", refresh_token)),
        GrantRequest::ClientCredentials { scope } => {
            if let Some(s) = scope.filter(|s| !s.is_empty()) {
                form.push(("scope", s));
            }
        }
    }
    form.push(("resource", resource));
    let basic = match client.auth_method {
        ClientAuthMethod::ClientSecretBasic => client
            .client_secret
            .as_deref()
            .map(|secret| (client.client_id.as_str(), secret)),
        ClientAuthMethod::ClientSecretPost => {
            form.push(("client_id", &client.client_id));
            if let Some(secret) = client.client_secret.as_deref() {
                form.push(("client_secret", secret));
            }
            None
        }
        ClientAuthMethod::None => {
            form.push(("client_id", &client.client_id));
            None
        }
    };
    let what = format!("the {} token request", grant.grant_type());
    let answer = http.post_form(token_endpoint, &form, basic, &what).await?;
    if !answer.is_success() {
        let body = answer.json.unwrap_or(Value::Null);
        let field = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
        return Err(AuthError::TokenEndpoint {
            grant: grant.grant_type().to_owned(),
            status: answer.status,
            error: field("error").map(|e| format!(": {e}")).unwrap_or_default(),
            description: field("error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default(),
        });
    }
    parse_response(
        answer.json.as_ref(),
        now(),
        requested_scope,
        previous_refresh,
    )
    .map_err(|detail| AuthError::BadDocument {
        what: format!("the answer to {what}"),
        url: token_endpoint.to_string(),
        detail,
    })
}

/// A successful token response (RFC 6749 §5.1) as a [`TokenSet`], received at `at`.
pub fn parse_response(
    body: Option<&Value>,
    at: u64,
    requested_scope: Option<&str>,
    previous_refresh: Option<&str>,
) -> Result<TokenSet, String> {
    let body = body.ok_or("it is not a JSON object")?;
    let access_token = body
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or("it has no access_token")?
        .to_owned();
    let token_type = body
        .get("token_type")
        .and_then(Value::as_str)
        .unwrap_or("Bearer");
    if !token_type.eq_ignore_ascii_case("bearer") {
        return Err(format!(
            "its token_type is {token_type:?}; Manifold sends Bearer tokens only"
        ));
    }
    // Some servers send expires_in as a string; either way a number of seconds.
    let expires_in = match body.get("expires_in") {
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    let refresh_token = body
        .get("refresh_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .or_else(|| previous_refresh.map(str::to_owned));
    let scope = body
        .get("scope")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| requested_scope.map(str::to_owned));
    Ok(TokenSet {
        access_token,
        refresh_token,
        expires_at: expires_in.map(|s| at.saturating_add(s)),
        scope,
        requested_scope: requested_scope.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_full_response_becomes_a_token_set() {
        let t = parse_response(
            Some(&json!({
                "access_token": "at", "token_type": "bearer", "expires_in": 3600,
                "refresh_token": "rt", "scope": "a b"
            })),
            1_000,
            Some("a b c"),
            None,
        )
        .unwrap();
        assert_eq!(t.access_token, "at");
        assert_eq!(t.refresh_token.as_deref(), Some("rt"));
        assert_eq!(t.expires_at, Some(4_600));
        assert_eq!(t.scope.as_deref(), Some("a b"));
        assert_eq!(t.requested_scope.as_deref(), Some("a b c"));
    }

    #[test]
    fn a_refresh_without_a_new_refresh_token_keeps_the_old_one() {
        let t = parse_response(
            Some(&json!({ "access_token": "at2", "expires_in": "60" })),
            10,
            None,
            Some("rt-old"),
        )
        .unwrap();
        assert_eq!(t.refresh_token.as_deref(), Some("rt-old"));
        assert_eq!(t.expires_at, Some(70));
        assert_eq!(t.scope, None);
    }

    #[test]
    fn unusable_responses_are_refused() {
        assert!(parse_response(None, 0, None, None).is_err());
        assert!(parse_response(Some(&json!({ "token_type": "Bearer" })), 0, None, None).is_err());
        let dpop = parse_response(
            Some(&json!({ "access_token": "x", "token_type": "DPoP" })),
            0,
            None,
            None,
        );
        assert!(dpop.unwrap_err().contains("DPoP"));
    }

    #[test]
    fn expiry_is_judged_with_a_margin() {
        let t = TokenSet {
            access_token: "a".to_owned(),
            refresh_token: None,
            expires_at: Some(1_000),
            scope: None,
            requested_scope: None,
        };
        assert!(!t.expires_soon(900));
        assert!(t.expires_soon(1_000 - EXPIRY_MARGIN.as_secs()));
        assert!(t.expires_soon(2_000));
        let forever = TokenSet {
            expires_at: None,
            ..t.clone()
        };
        assert!(!forever.expires_soon(u64::MAX));
        assert!(!format!("{t:?}").contains("\"a\""));
    }
}
