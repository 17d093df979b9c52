//! `manifold login SERVER`: a person consents, once, to Manifold using an OAuth-protected
//! server on their behalf; the gateway then uses (and refreshes) the stored tokens on its own.
//!
//! The authorization URL is printed for the person to open; a one-shot listener on this
//! machine's loopback address (a free port, or the configured `redirect_uri`) receives the
//! authorization server's redirect; manifold-upstream validates it (state, issuer), exchanges the
//! code with its PKCE verifier and stores the tokens, sealed, in Manifold's store (opened beside
//! a running gateway, which picks the new tokens up at its next challenge).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_config::{Config, ServerKind};
use manifold_upstream::auth::{AuthError, ConsentDriver, HttpAuth, LoginSummary, TokenStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

use crate::config_file::config_path;
use crate::report::{CliError, Outcome};

/// How long the person has to approve in the browser.
pub const CONSENT_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// The path of the redirect when none is configured.
pub const DEFAULT_CALLBACK_PATH: &str = "/callback";
/// The largest request head read from the browser.
const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// How long one browser connection may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `manifold login SERVER [--config FILE]`.
pub async fn login(given: Option<&Path>, server: &str) -> Result<Outcome, CliError> {
    let Some(path) = config_path(given) else {
        return Err(CliError::with_hint(
            crate::config_file::none_found(),
            "name the file holding the server: manifold login SERVER --config FILE",
        ));
    };
    let config = Config::load(&path)
        .map_err(|errors| CliError::usage(format!("{} is not valid:\n{errors}", path.display())))?;
    let Some(server_config) = config.server(server) else {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        return Err(CliError::with_hint(
            format!("{} has no server named {server:?}", path.display()),
            if names.is_empty() {
                "it defines no servers".to_owned()
            } else {
                format!("its servers are {}", names.join(", "))
            },
        ));
    };
    let ServerKind::Http { spec, .. } = &server_config.kind else {
        return Err(CliError::usage(format!(
            "server {server:?} runs over stdio; login is for HTTP servers that use OAuth (credentials for a stdio server go in its env)"
        )));
    };
    let HttpAuth::OAuth(client) = &spec.auth else {
        return Err(CliError::with_hint(
            format!(
                "server {server:?} has no [servers.{server}.oauth] table, so Manifold does not use OAuth with it"
            ),
            format!(
                "add [servers.{server}.oauth] to {} (see docs/configuration.md), then run this again",
                path.display()
            ),
        ));
    };
    let consent = LoopbackConsent::bind(client.settings().redirect_uri.as_deref(), server)
        .await
        .map_err(|e| {
            CliError::with_hint(
                format!("could not listen for the authorization server's redirect: {e}"),
                "free the port named in oauth.redirect_uri, or remove redirect_uri to use any free port",
            )
        })?;
    let store = crate::key_store::open_for_command(&config).await?;
    let summary = match crate::token_store::open(&config, &store).await {
        Ok(tokens) => {
            let tokens: Arc<dyn TokenStore> = tokens;
            let client = client
                .with_store(tokens, server)
                .with_consent(Arc::new(consent));
            client
                .login(spec, server)
                .await
                .map_err(|e| login_error(server, e))
        }
        Err(e) => Err(e),
    };
    crate::key_store::close(store).await;
    println!("{}", describe(server, &summary?));
    Ok(Outcome::Success)
}

fn login_error(server: &str, e: AuthError) -> CliError {
    let hint = match &e {
        AuthError::Consent { .. } => {
            "run manifold login again and approve in the browser within 5 minutes"
        }
        AuthError::NoClientIdentity { .. } | AuthError::Registration { .. } => {
            "register Manifold with the authorization server and set oauth.client_id (and client_secret)"
        }
        AuthError::Store { .. } => "set gateway.data_dir to a directory Manifold can write",
        AuthError::TokenStore { .. } => {
            "check [store] and the token key it names (docs/configuration.md, [store] token_key)"
        }
        _ => "run with -v for the authorization exchanges",
    };
    CliError::with_hint(format!("login to server {server:?} failed: {e}"), hint)
}

fn describe(server: &str, s: &LoginSummary) -> String {
    let mut out = format!(
        "logged in to {server:?} (authorization server {}, resource {})",
        s.issuer, s.resource
    );
    if let Some(scope) = &s.scope {
        out.push_str(&format!("\n  scopes: {scope}"));
    }
    let renewal = if s.refreshable {
        "refreshed automatically"
    } else {
        "no refresh token: run manifold login again when it expires"
    };
    match s.expires_at {
        Some(at) => {
            let left = at.saturating_sub(manifold_upstream::auth::token::now());
            out.push_str(&format!(
                "\n  access token expires in {} min ({renewal})",
                left.div_ceil(60)
            ));
        }
        None => out.push_str(&format!(
            "\n  access token has no stated expiry ({renewal})"
        )),
    }
    if let Some(at) = &s.stored_at {
        out.push_str(&format!("\n  stored in {at}"));
    }
    out
}

/// Receives the redirect on this machine's loopback address.
struct LoopbackConsent {
    listener: Arc<TcpListener>,
    redirect_uri: String,
    path: String,
    server: String,
}

impl LoopbackConsent {
    async fn bind(configured: Option<&str>, server: &str) -> Result<LoopbackConsent, String> {
        let (host, port, path) = match configured {
            Some(raw) => {
                let url = Url::parse(raw).map_err(|e| format!("oauth.redirect_uri: {e}"))?;
                let host = url.host_str().unwrap_or("127.0.0.1").to_owned();
                (host, url.port().unwrap_or(0), url.path().to_owned())
            }
            None => ("127.0.0.1".to_owned(), 0, DEFAULT_CALLBACK_PATH.to_owned()),
        };
        let bind_host = match host.as_str() {
            "localhost" => "127.0.0.1".to_owned(),
            h => h.trim_start_matches('[').trim_end_matches(']').to_owned(),
        };
        let listener = TcpListener::bind((bind_host.as_str(), port))
            .await
            .map_err(|e| format!("{host}:{port}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?.port();
        let redirect_uri = match configured {
            Some(raw) => raw.to_owned(),
            None => format!("http://127.0.0.1:{bound}{path}"),
        };
        Ok(LoopbackConsent {
            listener: Arc::new(listener),
            redirect_uri,
            path,
            server: server.to_owned(),
        })
    }
}

impl ConsentDriver for LoopbackConsent {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn obtain(&self, authorization_url: Url) -> BoxFuture<'static, Result<Url, AuthError>> {
        let listener = Arc::clone(&self.listener);
        let path = self.path.clone();
        let redirect = self.redirect_uri.clone();
        let server = self.server.clone();
        Box::pin(async move {
            eprintln!(
                "To let Manifold use server {server:?} on your behalf, open this URL in a browser and approve:\n\n  {authorization_url}\n\nWaiting for the redirect to {redirect} ..."
            );
            let waiting = async {
                loop {
                    let (stream, _) = listener.accept().await.map_err(|e| AuthError::Consent {
                        detail: format!("the redirect listener failed: {e}"),
                    })?;
                    if let Some(target) = serve_one(stream, &path).await {
                        let base = Url::parse(&redirect).map_err(|e| AuthError::Consent {
                            detail: format!("the redirect URI is unusable: {e}"),
                        })?;
                        return base.join(&target).map_err(|e| AuthError::Consent {
                            detail: format!("the redirect could not be read: {e}"),
                        });
                    }
                }
            };
            tokio::time::timeout(CONSENT_TIMEOUT, waiting)
                .await
                .map_err(|_| AuthError::Consent {
                    detail: format!(
                        "no redirect arrived within {} minutes",
                        CONSENT_TIMEOUT.as_secs() / 60
                    ),
                })?
        })
    }
}

/// Answers one browser request; the request target when it is the redirect.
async fn serve_one(mut stream: TcpStream, path: &str) -> Option<String> {
    let mut head = Vec::new();
    let read = async {
        let mut buf = [0u8; 2048];
        while head.len() < MAX_REQUEST_HEAD && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(buf.get(..n).unwrap_or_default()),
            }
        }
    };
    let _ = tokio::time::timeout(REQUEST_TIMEOUT, read).await;
    let text = String::from_utf8_lossy(&head);
    let mut words = text.lines().next().unwrap_or_default().split(' ');
    let (method, target) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let is_redirect = method == "GET" && target.split('?').next() == Some(path);
    let (status, body) = if is_redirect {
        (
            "200 OK",
            "<!doctype html><title>Manifold</title><p>Manifold received the authorization server's answer. You can close this window and return to the terminal.</p>",
        )
    } else {
        (
            "404 Not Found",
            "<!doctype html><title>Manifold</title><p>Not found.</p>",
        )
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    is_redirect.then(|| target.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn the_listener_returns_the_redirect_and_ignores_other_requests() {
        let consent = LoopbackConsent::bind(None, "srv").await.unwrap();
        let redirect = consent.redirect_uri();
        assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
        assert!(redirect.ends_with("/callback"), "{redirect}");
        let waiting = consent.obtain(Url::parse("https://as.example/authorize?x=1").unwrap());
        let port = Url::parse(&redirect).unwrap().port().unwrap();
        let browser = async move {
            let get = |target: &'static str| async move {
                let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                s.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
                let mut answer = String::new();
                s.read_to_string(&mut answer).await.unwrap();
                answer
            };
            let favicon = get("/favicon.ico").await;
            let callback = get("/callback?code=c1&state=s1&iss=https%3A%2F%2Fas").await;
            (favicon, callback)
        };
        let (got, (favicon, callback)) = tokio::join!(waiting, browser);
        assert!(favicon.starts_with("HTTP/1.1 404"), "{favicon}");
        assert!(callback.starts_with("HTTP/1.1 200"), "{callback}");
        assert!(!callback.contains("c1"), "the page never shows the code");
        let got = got.unwrap();
        let pairs: Vec<(String, String)> = got.query_pairs().into_owned().collect();
        assert_eq!(
            pairs,
            vec![
                ("code".to_owned(), "c1".to_owned()),
                ("state".to_owned(), "s1".to_owned()),
                ("iss".to_owned(), "https://as".to_owned()),
            ]
        );
    }

    #[tokio::test]
    async fn a_configured_redirect_uri_is_used_as_written() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let uri = format!("http://127.0.0.1:{port}/oauth/done");
        let consent = LoopbackConsent::bind(Some(&uri), "srv").await.unwrap();
        assert_eq!(consent.redirect_uri(), uri);
        assert_eq!(consent.path, "/oauth/done");
    }
}
