//! What the configuration says about one server's OAuth client: which grant, which client
//! identity, which scopes. Plain data, compared to decide whether a server changed; printing it
//! never shows the client secret.

/// How tokens are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grant {
    /// Authorization code with PKCE: a user consents once (`manifold login`), refresh tokens keep
    /// the server reachable afterwards.
    #[default]
    AuthorizationCode,
    /// Client credentials: Manifold acts on its own behalf with a configured client id and secret.
    ClientCredentials,
}

impl Grant {
    /// The OAuth `grant_type` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::AuthorizationCode => "authorization_code",
            Grant::ClientCredentials => "client_credentials",
        }
    }
}

/// The name Manifold registers under when nothing else is configured.
pub const DEFAULT_CLIENT_NAME: &str = "Manifold";

/// One server's OAuth client settings.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    pub grant: Grant,
    /// A pre-registered client id; without one, a client ID metadata document or dynamic
    /// registration supplies it.
    pub client_id: Option<String>,
    /// The pre-registered client's secret (confidential clients).
    pub client_secret: Option<String>,
    /// The HTTPS URL of this client's metadata document, used as the client id where the
    /// authorization server supports client ID metadata documents.
    pub client_metadata_url: Option<String>,
    /// Scopes to request in addition to those the server asks for; `None` follows the
    /// specification's selection (challenge, then `scopes_supported`).
    pub scopes: Option<Vec<String>>,
    /// The loopback redirect URI `manifold login` listens on (a port registered with the
    /// authorization server); `None` takes a free port.
    pub redirect_uri: Option<String>,
    /// `client_name` in dynamic registration.
    pub client_name: String,
}

impl Default for OAuthSettings {
    fn default() -> OAuthSettings {
        OAuthSettings {
            grant: Grant::AuthorizationCode,
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: None,
            redirect_uri: None,
            client_name: DEFAULT_CLIENT_NAME.to_owned(),
        }
    }
}

impl std::fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("redirect_uri", &self.redirect_uri)
            .field("client_name", &self.client_name)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_client_secret() {
        let s = OAuthSettings {
            client_id: Some("abc".to_owned()),
            client_secret: Some("s3cret".to_owned()),
            ..OAuthSettings::default()
        };
        let shown = format!("{s:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("client_secret: Some(\"<redacted>\")"),
            "{shown}"
        );
    }
}
