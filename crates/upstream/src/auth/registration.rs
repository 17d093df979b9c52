//! Who Manifold is to an authorization server: a pre-registered client, a client ID metadata
//! document URL, or a client obtained by dynamic registration (RFC 7591), in the specification's
//! order of preference. Registrations belong to the issuer that made them and are never offered
//! to another.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::AuthError;
use super::http::AuthHttp;
use super::server_metadata::AuthServerMetadata;
use super::settings::{Grant, OAuthSettings};

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuthMethod {
    /// A public client: `client_id` in the body, no secret.
    None,
    ClientSecretBasic,
    ClientSecretPost,
}

impl ClientAuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuthMethod::None => "none",
            ClientAuthMethod::ClientSecretBasic => "client_secret_basic",
            ClientAuthMethod::ClientSecretPost => "client_secret_post",
        }
    }

    fn parse(s: &str) -> Option<ClientAuthMethod> {
        match s {
            "none" => Some(ClientAuthMethod::None),
            "client_secret_basic" => Some(ClientAuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(ClientAuthMethod::ClientSecretPost),
            _ => None,
        }
    }
}

/// Where a client id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientOrigin {
    Configured,
    MetadataDocument,
    Registered,
}

/// A client identity at one authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRegistration {
    /// The issuer this identity belongs to.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    pub auth_method: ClientAuthMethod,
    pub origin: ClientOrigin,
    /// The redirect URIs registered (dynamic registration), so a changed one re-registers.
    #[serde(default)]
    pub redirect_uris: Vec<String>,
}

impl std::fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .field("origin", &self.origin)
            .field("redirect_uris", &self.redirect_uris)
            .finish()
    }
}

impl ClientRegistration {
    /// Whether this identity can be used for a flow returning to `redirect_uri`.
    pub fn fits(&self, issuer: &str, redirect_uri: Option<&str>) -> bool {
        self.issuer == issuer
            && match (self.origin, redirect_uri) {
                (ClientOrigin::Registered, Some(r)) => self.redirect_uris.iter().any(|u| u == r),
                _ => true,
            }
    }
}

/// The authentication method for a client that holds `secret`, given what the server offers.
pub fn auth_method_for(metadata: &AuthServerMetadata, has_secret: bool) -> ClientAuthMethod {
    if !has_secret {
        return ClientAuthMethod::None;
    }
    if metadata.offers_auth_method("client_secret_basic") {
        ClientAuthMethod::ClientSecretBasic
    } else if metadata.offers_auth_method("client_secret_post") {
        ClientAuthMethod::ClientSecretPost
    } else {
        ClientAuthMethod::None
    }
}

/// The method to ask for in dynamic registration: a public client where the server allows one
/// (Manifold is a native client), else a secret sent the way the server prefers.
fn method_to_request(metadata: &AuthServerMetadata) -> ClientAuthMethod {
    if metadata.offers_auth_method("none") {
        ClientAuthMethod::None
    } else if metadata.offers_auth_method("client_secret_basic") {
        ClientAuthMethod::ClientSecretBasic
    } else if metadata.offers_auth_method("client_secret_post") {
        ClientAuthMethod::ClientSecretPost
    } else {
        ClientAuthMethod::None
    }
}

/// The client identity to use with `metadata`'s issuer: configured, else a client ID metadata
/// document where the server supports them, else dynamic registration.
pub async fn obtain(
    http: &AuthHttp,
    settings: &OAuthSettings,
    metadata: &AuthServerMetadata,
    redirect_uri: Option<&str>,
) -> Result<ClientRegistration, AuthError> {
    if let Some(client_id) = settings.client_id.as_ref().filter(|c| !c.is_empty()) {
        let has_secret = settings
            .client_secret
            .as_ref()
            .is_some_and(|s| !s.is_empty());
        return Ok(ClientRegistration {
            issuer: metadata.issuer.clone(),
            client_id: client_id.clone(),
            client_secret: settings.client_secret.clone().filter(|s| !s.is_empty()),
            auth_method: auth_method_for(metadata, has_secret),
            origin: ClientOrigin::Configured,
            redirect_uris: Vec::new(),
        });
    }
    if settings.grant == Grant::ClientCredentials {
        return Err(AuthError::Settings {
            detail: "the client_credentials grant needs oauth.client_id and oauth.client_secret"
                .to_owned(),
        });
    }
    if let Some(url) = &settings.client_metadata_url
        && metadata.client_id_metadata_document_supported == Some(true)
    {
        return Ok(ClientRegistration {
            issuer: metadata.issuer.clone(),
            client_id: url.clone(),
            client_secret: None,
            auth_method: ClientAuthMethod::None,
            origin: ClientOrigin::MetadataDocument,
            redirect_uris: Vec::new(),
        });
    }
    let Some(endpoint) = &metadata.registration_endpoint else {
        return Err(AuthError::NoClientIdentity {
            issuer: metadata.issuer.clone(),
        });
    };
    let endpoint = http.url(endpoint, "the registration endpoint")?;
    let requested = method_to_request(metadata);
    let redirect_uris: Vec<String> = redirect_uri.map(str::to_owned).into_iter().collect();
    let body = json!({
        "client_name": settings.client_name,
        "redirect_uris": redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": requested.as_str(),
        "application_type": "native",
    });
    let answer = http
        .post_json(&endpoint, &body, "dynamic client registration")
        .await?;
    let failed = |detail: String| AuthError::Registration {
        issuer: metadata.issuer.clone(),
        detail,
    };
    if !answer.is_success() {
        let reason = answer
            .json
            .as_ref()
            .map(oauth_error_text)
            .unwrap_or_else(|| answer.text.clone());
        return Err(failed(format!("HTTP {}: {reason}", answer.status)));
    }
    let doc = answer.json.unwrap_or(Value::Null);
    let client_id = doc
        .get("client_id")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| failed("the answer has no client_id".to_owned()))?
        .to_owned();
    let client_secret = doc
        .get("client_secret")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let granted = doc
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .and_then(ClientAuthMethod::parse)
        .unwrap_or(requested);
    // A secret method without a secret cannot work; a public client never sends one.
    let auth_method = match (granted, &client_secret) {
        (ClientAuthMethod::None, _) => ClientAuthMethod::None,
        (method, Some(_)) => method,
        (_, None) => ClientAuthMethod::None,
    };
    Ok(ClientRegistration {
        issuer: metadata.issuer.clone(),
        client_id,
        client_secret: client_secret.filter(|_| auth_method != ClientAuthMethod::None),
        auth_method,
        origin: ClientOrigin::Registered,
        redirect_uris,
    })
}

/// `error: error_description` of an OAuth error body, for messages.
pub fn oauth_error_text(body: &Value) -> String {
    let error = body.get("error").and_then(Value::as_str).unwrap_or("error");
    match body.get("error_description").and_then(Value::as_str) {
        Some(d) => format!("{error}: {d}"),
        None => error.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offering(methods: Option<&[&str]>) -> AuthServerMetadata {
        AuthServerMetadata {
            issuer: "https://as".to_owned(),
            token_endpoint_auth_methods_supported: methods
                .map(|m| m.iter().map(|s| (*s).to_owned()).collect()),
            ..AuthServerMetadata::default()
        }
    }

    #[test]
    fn a_secret_is_sent_the_way_the_server_accepts() {
        assert_eq!(
            auth_method_for(&offering(Some(&["client_secret_post"])), true),
            ClientAuthMethod::ClientSecretPost
        );
        assert_eq!(
            auth_method_for(
                &offering(Some(&["client_secret_post", "client_secret_basic"])),
                true
            ),
            ClientAuthMethod::ClientSecretBasic
        );
        assert_eq!(
            auth_method_for(&offering(None), true),
            ClientAuthMethod::ClientSecretBasic
        );
        assert_eq!(
            auth_method_for(&offering(Some(&["client_secret_basic"])), false),
            ClientAuthMethod::None
        );
    }

    #[test]
    fn registration_asks_to_be_a_public_client_where_allowed() {
        assert_eq!(
            method_to_request(&offering(Some(&["none", "client_secret_basic"]))),
            ClientAuthMethod::None
        );
        assert_eq!(
            method_to_request(&offering(Some(&["client_secret_post"]))),
            ClientAuthMethod::ClientSecretPost
        );
        assert_eq!(
            method_to_request(&offering(None)),
            ClientAuthMethod::ClientSecretBasic
        );
    }

    #[test]
    fn a_registration_fits_its_issuer_and_registered_redirect_only() {
        let reg = ClientRegistration {
            issuer: "https://as1".to_owned(),
            client_id: "c".to_owned(),
            client_secret: Some("s".to_owned()),
            auth_method: ClientAuthMethod::ClientSecretBasic,
            origin: ClientOrigin::Registered,
            redirect_uris: vec!["http://127.0.0.1:5000/callback".to_owned()],
        };
        assert!(reg.fits("https://as1", Some("http://127.0.0.1:5000/callback")));
        assert!(!reg.fits("https://as1", Some("http://127.0.0.1:5001/callback")));
        assert!(!reg.fits("https://as2", Some("http://127.0.0.1:5000/callback")));
        assert!(!format!("{reg:?}").contains("\"s\""));
    }
}
