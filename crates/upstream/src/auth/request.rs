//! The hook the HTTP transports call to send a request: it attaches the credentials the server
//! is configured for and, for OAuth, answers the server's challenges and retries.
//!
//! A request is retried at most once after a 401 (with a token obtained in between) and at most
//! once after a 403 `insufficient_scope` (with a token for more scope); anything else the server
//! answers goes back to the transport as it came.

use std::sync::Arc;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use url::Url;

use super::HttpAuth;
use super::challenge::{BearerChallenge, bearer_challenge};
use super::error::AuthError;
use super::http::{AuthHttp, client_for};
use super::passthrough::CallerToken;
use super::session::{Binding, LoginSummary, OAuthClient};
use crate::error::UpstreamError;
use crate::http_client::{check_url, send_failure};
use crate::http_spec::HttpSpec;

/// Why a request was not sent (or not answered).
#[derive(Debug)]
pub enum SendFailure {
    /// The request itself failed.
    Http(reqwest::Error),
    /// Credentials could not be obtained.
    Auth(AuthError),
}

impl SendFailure {
    /// The failure as the transports report it; `what` names the request (e.g. `POST URL (tools/call)`).
    pub fn into_upstream(self, server: &str, what: &str) -> UpstreamError {
        match self {
            SendFailure::Http(e) => UpstreamError::Connect {
                server: server.to_owned(),
                reason: format!("{what}: {}", send_failure(&e)),
            },
            SendFailure::Auth(e) => UpstreamError::Auth {
                server: server.to_owned(),
                detail: e.to_string(),
            },
        }
    }
}

#[derive(Clone, Default)]
enum Mode {
    #[default]
    None,
    OAuth {
        client: OAuthClient,
        binding: Arc<Binding>,
    },
    Passthrough,
}

/// Sends one server's requests with its credentials.
#[derive(Clone, Default)]
pub struct RequestAuthorizer {
    mode: Mode,
}

impl RequestAuthorizer {
    /// The authorizer for a server as configured; `url` is its checked MCP URL.
    pub fn for_spec(
        spec: &HttpSpec,
        url: &Url,
        server: &str,
    ) -> Result<RequestAuthorizer, UpstreamError> {
        let mode = match &spec.auth {
            HttpAuth::None => Mode::None,
            HttpAuth::Passthrough => Mode::Passthrough,
            HttpAuth::OAuth(client) => {
                let http = client_for(spec, server).map_err(|e| UpstreamError::Auth {
                    server: server.to_owned(),
                    detail: e.to_string(),
                })?;
                Mode::OAuth {
                    client: client.clone(),
                    binding: Arc::new(Binding {
                        http: AuthHttp::new(http, spec.allow_insecure_http),
                        server_url: url.clone(),
                        server: server.to_owned(),
                    }),
                }
            }
        };
        Ok(RequestAuthorizer { mode })
    }

    /// Before negotiation: when no token is held yet, asks the server (one unauthenticated
    /// request) whether it wants one and, if it does, authorizes now. The flow (discovery,
    /// registration, a token request) then runs under its own deadlines rather than inside the
    /// short deadline of negotiation's first request, and a server that needs a login fails the
    /// connection at once with that message.
    pub async fn prepare(&self, client: &reqwest::Client) -> Result<(), UpstreamError> {
        let Mode::OAuth {
            client: oauth,
            binding,
        } = &self.mode
        else {
            return Ok(());
        };
        if oauth.bearer(binding).await.is_some() {
            return Ok(());
        }
        let Some(challenge) = probe(client, &binding.server_url).await else {
            return Ok(());
        };
        oauth
            .unauthorized(binding, &challenge, None)
            .await
            .map_err(|e| UpstreamError::Auth {
                server: binding.server.clone(),
                detail: e.to_string(),
            })
    }

    /// Sends the request `build` makes (called again for a retry), with credentials: a
    /// passthrough server's are those of `caller`, the caller the request runs for (`None` for
    /// the gateway's own messages).
    pub async fn send<F>(
        &self,
        caller: Option<&CallerToken>,
        build: F,
    ) -> Result<reqwest::Response, SendFailure>
    where
        F: Fn() -> reqwest::RequestBuilder,
    {
        match &self.mode {
            Mode::None => build().send().await.map_err(SendFailure::Http),
            Mode::Passthrough => {
                let request = match caller {
                    Some(token) => with_bearer(build(), token.as_str()),
                    None => build(),
                };
                request.send().await.map_err(SendFailure::Http)
            }
            Mode::OAuth { client, binding } => send_oauth(client, binding, build).await,
        }
    }
}

fn with_bearer(request: reqwest::RequestBuilder, token: &str) -> reqwest::RequestBuilder {
    match HeaderValue::from_str(&format!("Bearer {token}")) {
        Ok(mut value) => {
            value.set_sensitive(true);
            request.header(AUTHORIZATION, value)
        }
        // A token no header can carry is not sent at all; the server's 401 will say so.
        Err(_) => request,
    }
}

async fn send_oauth<F>(
    client: &OAuthClient,
    binding: &Binding,
    build: F,
) -> Result<reqwest::Response, SendFailure>
where
    F: Fn() -> reqwest::RequestBuilder,
{
    let mut authorized = false;
    let mut stepped_up = false;
    loop {
        let token = client.bearer(binding).await;
        let request = match &token {
            Some(t) => with_bearer(build(), t),
            None => build(),
        };
        let response = request.send().await.map_err(SendFailure::Http)?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED && !authorized {
            authorized = true;
            let challenge = bearer_challenge(response.headers()).unwrap_or_default();
            tracing::debug!(server = %binding.server, challenge = ?challenge, "the server asked for authorization");
            client
                .unauthorized(binding, &challenge, token.as_deref())
                .await
                .map_err(SendFailure::Auth)?;
            continue;
        }
        if let Some(t) = token.as_deref()
            && status != StatusCode::UNAUTHORIZED
        {
            client.accepted(t);
        }
        if status == StatusCode::FORBIDDEN
            && !stepped_up
            && let Some(used) = token.as_deref()
        {
            let challenge = bearer_challenge(response.headers()).unwrap_or_default();
            if challenge.is_insufficient_scope() {
                stepped_up = true;
                tracing::debug!(server = %binding.server, scope = ?challenge.scope, "the server asked for more scope");
                if client
                    .insufficient_scope(binding, &challenge, used)
                    .await
                    .map_err(SendFailure::Auth)?
                {
                    continue;
                }
            }
        }
        return Ok(response);
    }
}

impl OAuthClient {
    /// Runs the whole authorization flow for a server now (`manifold login`), whatever is
    /// stored, and stores the result. The server is asked first, without credentials, how it is
    /// protected; its challenge (if it gives one) guides discovery and scope selection.
    pub async fn login(&self, spec: &HttpSpec, server: &str) -> Result<LoginSummary, AuthError> {
        let url =
            check_url(&spec.url, spec.allow_insecure_http).map_err(|e| AuthError::Settings {
                detail: e.to_string(),
            })?;
        let http = AuthHttp::new(client_for(spec, server)?, spec.allow_insecure_http);
        let challenge = match crate::http_client::build_client(spec, server) {
            Ok(client) => probe(&client, &url).await.unwrap_or_default(),
            Err(_) => BearerChallenge::default(),
        };
        let binding = Binding {
            http,
            server_url: url,
            server: server.to_owned(),
        };
        self.authorize_now(&binding, &challenge).await
    }
}

/// An unauthenticated request to the MCP endpoint: `Some(challenge)` when the server asked for
/// authorization (401), `None` when it answered anything else or could not be reached.
async fn probe(client: &reqwest::Client, url: &Url) -> Option<BearerChallenge> {
    let body = r#"{"jsonrpc":"2.0","id":"manifold-authorization-probe","method":"ping"}"#;
    let sent = client
        .post(url.clone())
        .header(
            reqwest::header::ACCEPT,
            "application/json, text/event-stream",
        )
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send();
    match tokio::time::timeout(super::http::EXCHANGE_TIMEOUT, sent).await {
        Ok(Ok(response)) if response.status() == StatusCode::UNAUTHORIZED => {
            Some(bearer_challenge(response.headers()).unwrap_or_default())
        }
        _ => None,
    }
}
