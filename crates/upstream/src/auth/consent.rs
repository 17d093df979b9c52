//! The user's consent in the authorization code flow: building the authorization request,
//! handing it to whatever stands in for the user's browser (a [`ConsentDriver`]), and validating
//! the redirect that comes back (state, RFC 9207 `iss`, errors) before the code goes anywhere.

use futures::future::BoxFuture;
use url::Url;

use super::error::AuthError;
use super::pkce::{self, Pkce};

/// Stands in for the user-agent: shows the authorization URL to someone who can approve it and
/// returns the URL the authorization server redirected back to.
pub trait ConsentDriver: Send + Sync + 'static {
    /// The redirect URI the authorization server must send the user-agent to.
    fn redirect_uri(&self) -> String;

    /// Has the request at `authorization_url` approved; resolves to the full redirect URL
    /// (with `code`, `state` and perhaps `iss` in its query).
    fn obtain(&self, authorization_url: Url) -> BoxFuture<'static, Result<Url, AuthError>>;
}

/// Everything one authorization request needs to be checked when its answer comes back.
#[derive(Debug, Clone)]
pub struct PendingAuthorization {
    pub pkce: Pkce,
    pub state: String,
    /// The issuer recorded from the validated metadata before redirecting.
    pub issuer: String,
    /// Whether that metadata advertised `authorization_response_iss_parameter_supported`.
    pub iss_supported: bool,
    pub redirect_uri: String,
}

/// The parameters of an authorization request, besides PKCE and state.
pub struct AuthorizationParams<'a> {
    pub endpoint: &'a Url,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub resource: &'a str,
    pub scope: Option<&'a str>,
}

/// Builds the authorization URL (keeping any query the endpoint already has) and what is needed
/// to check the answer.
pub fn authorization_request(
    params: &AuthorizationParams<'_>,
    issuer: &str,
    iss_supported: bool,
) -> Result<(Url, PendingAuthorization), AuthError> {
    let pkce = Pkce::generate()?;
    let state = pkce::random_string(16)?;
    let mut url = params.endpoint.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", params.client_id)
            .append_pair("redirect_uri", params.redirect_uri)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", pkce::METHOD)
            .append_pair("state", &state)
            .append_pair("resource", params.resource);
        if let Some(scope) = params.scope.filter(|s| !s.is_empty()) {
            query.append_pair("scope", scope);
        }
    }
    Ok((
        url,
        PendingAuthorization {
            pkce,
            state,
            issuer: issuer.to_owned(),
            iss_supported,
            redirect_uri: params.redirect_uri.to_owned(),
        },
    ))
}

/// Checks the redirect and returns the authorization code. Order matters: the state and the
/// issuer are checked before an error in the response is believed (RFC 9207: on a mismatch the
/// client must not act on `error` at all).
pub fn read_redirect(redirect: &Url, pending: &PendingAuthorization) -> Result<String, AuthError> {
    let refuse = |detail: String| AuthError::AuthorizationResponse { detail };
    let param = |name: &str| {
        redirect
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    match param("state") {
        Some(s) if s == pending.state => {}
        Some(_) => {
            return Err(refuse(
                "its state does not match the request's (a forged or stale response)".to_owned(),
            ));
        }
        None => return Err(refuse("it carries no state".to_owned())),
    }
    match param("iss") {
        // Simple string comparison (RFC 3986 §6.2.1): no normalization of any kind.
        Some(iss) if iss == pending.issuer => {}
        Some(iss) => {
            return Err(refuse(format!(
                "its iss {iss:?} is not the authorization server the request went to ({:?}); a mix-up attack or a misconfigured server",
                pending.issuer
            )));
        }
        None if pending.iss_supported => {
            return Err(refuse(format!(
                "it carries no iss although {:?} advertises authorization_response_iss_parameter_supported",
                pending.issuer
            )));
        }
        None => {}
    }
    if let Some(error) = param("error") {
        return Err(AuthError::Denied {
            error,
            description: param("error_description")
                .map(|d| format!(" ({d})"))
                .unwrap_or_default(),
        });
    }
    param("code")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| refuse("it carries no authorization code".to_owned()))
}

/// A consent driver for authorization servers that approve without a person (the official
/// conformance suite's mock, tests, pre-approved automation clients): it requests the
/// authorization URL itself and reads the redirect the server answers with, without following it.
pub struct HeadlessConsent {
    client: reqwest::Client,
    redirect_uri: String,
}

impl HeadlessConsent {
    pub fn new(redirect_uri: impl Into<String>) -> Result<HeadlessConsent, AuthError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(crate::http_client::CONNECT_TIMEOUT)
            .build()
            .map_err(|e| AuthError::Consent {
                detail: format!(
                    "could not set up an HTTP client: {}",
                    crate::http_client::describe_error(&e)
                ),
            })?;
        Ok(HeadlessConsent {
            client,
            redirect_uri: redirect_uri.into(),
        })
    }
}

impl ConsentDriver for HeadlessConsent {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn obtain(&self, authorization_url: Url) -> BoxFuture<'static, Result<Url, AuthError>> {
        let client = self.client.clone();
        Box::pin(async move {
            let failed = |detail: String| AuthError::Consent { detail };
            let response = tokio::time::timeout(
                super::http::EXCHANGE_TIMEOUT,
                client.get(authorization_url.clone()).send(),
            )
            .await
            .map_err(|_| failed("the authorization endpoint did not answer in time".to_owned()))?
            .map_err(|e| {
                failed(format!(
                    "the authorization endpoint could not be reached: {}",
                    crate::http_client::send_failure(&e)
                ))
            })?;
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    failed(format!(
                        "the authorization endpoint answered HTTP {} without redirecting; it needs a person at a browser",
                        response.status().as_u16()
                    ))
                })?;
            authorization_url.join(location).map_err(|e| {
                failed(format!(
                    "the authorization endpoint redirected to an unusable URL: {e}"
                ))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn request(iss_supported: bool) -> (Url, PendingAuthorization) {
        let endpoint = Url::parse("https://as.example/authorize?tenant=t1").unwrap();
        authorization_request(
            &AuthorizationParams {
                endpoint: &endpoint,
                client_id: "https://client.example/meta.json",
                redirect_uri: "http://127.0.0.1:5555/callback",
                resource: "https://mcp.example/mcp",
                scope: Some("files:read files:write"),
            },
            "https://as.example",
            iss_supported,
        )
        .unwrap()
    }

    fn redirect(pending: &PendingAuthorization, extra: &[(&str, &str)]) -> Url {
        let mut url = Url::parse(&pending.redirect_uri).unwrap();
        url.query_pairs_mut().extend_pairs(extra.iter());
        url
    }

    #[test]
    fn the_request_carries_pkce_state_resource_and_scope() {
        let (url, pending) = request(true);
        let q: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("tenant"), Some("t1"));
        assert_eq!(get("response_type"), Some("code"));
        assert_eq!(get("client_id"), Some("https://client.example/meta.json"));
        assert_eq!(get("code_challenge"), Some(pending.pkce.challenge.as_str()));
        assert_eq!(get("code_challenge_method"), Some("S256"));
        assert_eq!(get("state"), Some(pending.state.as_str()));
        assert_eq!(get("resource"), Some("https://mcp.example/mcp"));
        assert_eq!(get("scope"), Some("files:read files:write"));
        assert_eq!(pending.pkce.challenge, pkce::s256(&pending.pkce.verifier));
    }

    #[test]
    fn a_matching_redirect_yields_the_code() {
        let (_, p) = request(true);
        let ok = redirect(
            &p,
            &[
                ("code", "c1"),
                ("state", &p.state.clone()),
                ("iss", "https://as.example"),
            ],
        );
        assert_eq!(read_redirect(&ok, &p).unwrap(), "c1");
    }

    #[test]
    fn iss_is_compared_as_a_string_and_required_when_advertised() {
        let (_, p) = request(true);
        let st = p.state.clone();
        for (iss, why) in [
            (Some("https://as.example/"), "normalized variant"),
            (Some("https://evil.example"), "other issuer"),
            (Some("HTTPS://as.example"), "case folded"),
            (None, "missing while advertised"),
        ] {
            let mut extra = vec![("code", "c1"), ("state", st.as_str())];
            if let Some(i) = iss {
                extra.push(("iss", i));
            }
            let got = read_redirect(&redirect(&p, &extra), &p);
            assert!(
                matches!(got, Err(AuthError::AuthorizationResponse { .. })),
                "{why}: {got:?}"
            );
        }
        let (_, quiet) = request(false);
        let st = quiet.state.clone();
        assert_eq!(
            read_redirect(&redirect(&quiet, &[("code", "c2"), ("state", &st)]), &quiet).unwrap(),
            "c2"
        );
        let wrong = redirect(
            &quiet,
            &[
                ("code", "c2"),
                ("state", &st),
                ("iss", "https://evil.example"),
            ],
        );
        assert!(read_redirect(&wrong, &quiet).is_err());
    }

    #[test]
    fn state_is_checked_before_anything_else() {
        let (_, p) = request(false);
        let forged = redirect(&p, &[("code", "c"), ("state", "other")]);
        assert!(matches!(
            read_redirect(&forged, &p),
            Err(AuthError::AuthorizationResponse { .. })
        ));
        let missing = redirect(&p, &[("code", "c")]);
        assert!(read_redirect(&missing, &p).is_err());
    }

    #[test]
    fn an_error_is_believed_only_after_the_issuer_matched() {
        let (_, p) = request(true);
        let st = p.state.clone();
        let denied = redirect(
            &p,
            &[
                ("error", "access_denied"),
                ("error_description", "no"),
                ("state", &st),
                ("iss", "https://as.example"),
            ],
        );
        match read_redirect(&denied, &p) {
            Err(AuthError::Denied { error, description }) => {
                assert_eq!(error, "access_denied");
                assert_eq!(description, " (no)");
            }
            other => panic!("{other:?}"),
        }
        let spoofed = redirect(
            &p,
            &[
                ("error", "access_denied"),
                ("state", &st),
                ("iss", "https://evil"),
            ],
        );
        assert!(matches!(
            read_redirect(&spoofed, &p),
            Err(AuthError::AuthorizationResponse { .. })
        ));
    }
}
