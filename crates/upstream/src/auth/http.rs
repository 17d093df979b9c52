//! The authorization side's HTTP: metadata documents, registration and the token endpoint.
//!
//! Every URL a server or an authorization server hands us goes through the same policy as the MCP
//! URL itself (HTTPS, or plain HTTP to this machine only unless the server allows it), every body
//! is read with a limit and every exchange has a deadline, because these documents come from
//! parties Manifold does not control. The client used here carries none of the server's static
//! headers: those are for the MCP server, not for its authorization server.

use std::time::Duration;

use base64::Engine as _;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::Value;
use url::Url;

use super::error::AuthError;
use crate::http_client::{
    BodyError, check_url, describe_error, excerpt, read_body_limited, send_failure,
};

/// How long one exchange with an authorization server (or a metadata document) may take.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest metadata, registration or token response read.
pub const MAX_DOCUMENT: usize = 1024 * 1024;

/// An answer: its status and, when the body is a JSON document, the document.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub json: Option<Value>,
    /// A short quote of a body that is not JSON, for error messages.
    pub text: String,
}

/// The HTTP client for authorization exchanges, with the URL policy of its server.
#[derive(Clone)]
pub struct AuthHttp {
    client: reqwest::Client,
    allow_insecure_http: bool,
}

impl AuthHttp {
    pub fn new(client: reqwest::Client, allow_insecure_http: bool) -> AuthHttp {
        AuthHttp {
            client,
            allow_insecure_http,
        }
    }

    /// Parses `raw` and checks it against the transport policy.
    pub fn url(&self, raw: &str, what: &str) -> Result<Url, AuthError> {
        check_url(raw, self.allow_insecure_http).map_err(|e| AuthError::BadDocument {
            what: what.to_owned(),
            url: raw.to_owned(),
            detail: e.to_string(),
        })
    }

    pub async fn get_json(&self, url: &Url, what: &str) -> Result<Answer, AuthError> {
        let request = self
            .client
            .get(url.clone())
            .header(ACCEPT, "application/json");
        self.exchange(request, url, what).await
    }

    /// POSTs a form, with HTTP Basic client authentication when given (RFC 6749 §2.3.1: both
    /// parts form-urlencoded before Base64).
    pub async fn post_form(
        &self,
        url: &Url,
        form: &[(&str, &str)],
        basic: Option<(&str, &str)>,
        what: &str,
    ) -> Result<Answer, AuthError> {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter())
            .finish();
        let mut request = self
            .client
            .post(url.clone())
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body);
        if let Some((id, secret)) = basic {
            let pair = format!("{}:{}", form_encode(id), form_encode(secret));
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair.as_bytes());
            if let Ok(mut value) = HeaderValue::from_str(&format!("Basic {encoded}")) {
                value.set_sensitive(true);
                request = request.header(AUTHORIZATION, value);
            }
        }
        self.exchange(request, url, what).await
    }

    pub async fn post_json(
        &self,
        url: &Url,
        body: &Value,
        what: &str,
    ) -> Result<Answer, AuthError> {
        let request = self
            .client
            .post(url.clone())
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        self.exchange(request, url, what).await
    }

    async fn exchange(
        &self,
        request: reqwest::RequestBuilder,
        url: &Url,
        what: &str,
    ) -> Result<Answer, AuthError> {
        let unreachable = |detail: String| AuthError::Unreachable {
            what: what.to_owned(),
            url: url.to_string(),
            detail,
        };
        let exchange = async {
            let response = request
                .send()
                .await
                .map_err(|e| unreachable(send_failure(&e)))?;
            let status = response.status();
            let body = read_body_limited(response, MAX_DOCUMENT)
                .await
                .map_err(|e| match e {
                    BodyError::TooLarge { limit } => {
                        unreachable(format!("the answer is larger than {limit} bytes"))
                    }
                    BodyError::Read(why) => unreachable(why),
                })?;
            Ok::<_, AuthError>((status, body))
        };
        let (status, body) = tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
            .await
            .map_err(|_| unreachable(format!("no answer within {EXCHANGE_TIMEOUT:?}")))??;
        Ok(Answer {
            status: status.as_u16(),
            json: serde_json::from_slice(&body).ok(),
            text: excerpt(&body),
        })
    }
}

impl Answer {
    pub fn is_success(&self) -> bool {
        StatusCode::from_u16(self.status).is_ok_and(|s| s.is_success())
    }
}

fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Builds the authorization client for a server: its TLS settings, none of its headers.
pub fn client_for(
    spec: &crate::http_spec::HttpSpec,
    server: &str,
) -> Result<reqwest::Client, AuthError> {
    let mut bare = spec.clone();
    bare.headers.clear();
    crate::http_client::build_client(&bare, server).map_err(|e| AuthError::Settings {
        detail: describe_error(&e),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Serves `body` at `/doc` on 127.0.0.1:0; the task ends with the test's runtime.
    async fn serve_document(body: Vec<u8>) -> Url {
        let app = axum::Router::new().route(
            "/doc",
            axum::routing::get(move || {
                let body = body.clone();
                async move { body }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Url::parse(&format!("http://{addr}/doc")).unwrap()
    }

    /// A JSON string of exactly `len` bytes, quotes included.
    fn json_string_of(len: usize) -> Vec<u8> {
        let mut doc = vec![b'"'];
        doc.resize(len - 1, b'x');
        doc.push(b'"');
        doc
    }

    #[tokio::test]
    async fn a_document_at_the_cap_is_read_and_one_byte_more_is_refused_naming_the_cap() {
        let client = client_for(&crate::http_spec::HttpSpec::default(), "peer").unwrap();
        let http = AuthHttp::new(client, false);
        let at_cap = serve_document(json_string_of(MAX_DOCUMENT)).await;
        let answer = http.get_json(&at_cap, "metadata").await.unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(
            answer.json.and_then(|v| v.as_str().map(str::len)),
            Some(MAX_DOCUMENT - 2)
        );
        let over = serve_document(json_string_of(MAX_DOCUMENT + 1)).await;
        match http.get_json(&over, "metadata").await {
            Err(AuthError::Unreachable { what, url, detail }) => {
                assert_eq!(what, "metadata");
                assert_eq!(url, over.to_string());
                assert_eq!(
                    detail,
                    format!("the answer is larger than {MAX_DOCUMENT} bytes")
                );
            }
            other => panic!("expected the document to be refused, got {other:?}"),
        }
    }

    #[test]
    fn basic_credentials_are_form_encoded_first() {
        assert_eq!(form_encode("a b:c"), "a+b%3Ac");
        assert_eq!(form_encode("plain-id_1.x"), "plain-id_1.x");
    }
}
