//! Who is at the dashboard, and that every change comes from the dashboard's own pages.
//!
//! Sign-in takes an API key with the `admin` scope, or an access token from the operator's OAuth
//! issuer carrying that scope, checked by the same authenticator as `/mcp`. It opens a session
//! kept in the store (`operator_sessions.rs`; the cookie holds a random id, nothing else), so every
//! replica knows it, and revoking the key ends it at the next request: each request checks the key is still active in the store. Every POST must carry the
//! session's CSRF token and an `Origin` naming this very address. Without authentication (only
//! ever on loopback) the pages are open to this machine, as `/mcp` is, and the session is made on
//! the first visit.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Form, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use manifold_auth::{Credential, Identity};
use serde::Deserialize;
use subtle::ConstantTimeEq;

pub use super::operator_sessions::{Flash, Operator, SESSION_IDLE};
use super::page::{self, Chrome};
use super::state::DashboardState;

/// The session cookie's name.
pub const COOKIE: &str = "manifold_ui";
/// The scope a credential needs to sign in.
pub const ADMIN_SCOPE: &str = "admin";
/// A session opened with an access token ends after this, whatever the token's own lifetime:
/// its revocation at the issuer is not visible here, so it is not trusted for long.
pub const TOKEN_SESSION_LIFETIME: Duration = Duration::from_secs(3600);
/// Largest form a page posts (a pasted configuration file is the largest).
pub const MAX_FORM_BYTES: usize = 2 * 1024 * 1024;
/// Who is shown as signed in when authentication is off.
pub const LOCAL_OPERATOR: &str = "operator";

fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

fn set_cookie(state: &DashboardState, value: &str, max_age: Duration) -> Option<HeaderValue> {
    let secure = if state.secure_cookies { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path={}; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        super::BASE,
        max_age.as_secs()
    ))
    .ok()
}

/// Whether a request that changes something was sent by a page of this very address: its
/// `Origin` must be `http(s)://` plus the `Host` it was sent to. A browser always sends `Origin`
/// on a POST; a request without one did not come from our form.
fn same_origin(headers: &HeaderMap) -> Result<(), String> {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match (origin, host) {
        (Some(origin), Some(host))
            if origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                == Some(host) =>
        {
            Ok(())
        }
        (None, _) => Err("the request carries no Origin header, so it cannot be shown to come from the dashboard's own page".to_owned()),
        (Some(origin), _) => Err(format!(
            "the request comes from {origin:?}, not from the dashboard's own address"
        )),
    }
}

fn changes_something(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The Origin check alone, for the sign-in form (there is no session, so no CSRF token, yet).
pub async fn same_origin_posts(request: Request, next: Next) -> Response {
    if changes_something(request.method())
        && let Err(why) = same_origin(request.headers())
    {
        return page::refused(
            StatusCode::FORBIDDEN,
            &format!("Refused: {why}. Nothing was changed; use the dashboard's own page."),
        );
    }
    next.run(request).await
}

/// Lets a signed-in operator through (with the [`Operator`] as an extension), or sends them to
/// sign in; checks the Origin and CSRF token of every change.
pub async fn require_operator(
    State(state): State<Arc<DashboardState>>,
    request: Request,
    next: Next,
) -> Response {
    let changing = changes_something(request.method());
    if changing && let Err(why) = same_origin(request.headers()) {
        return page::refused(
            StatusCode::FORBIDDEN,
            &format!("Refused: {why}. Nothing was changed; use the dashboard's own page."),
        );
    }
    let mut new_cookie = None;
    // A page shown takes the line the last action left; a live stream or an export does not.
    let shows_a_page = request.method() == Method::GET
        && !request.uri().path().starts_with("/ui/live/")
        && request.uri().path() != "/ui/audit/export";
    let found = match session_cookie(request.headers()) {
        Some(id) => match state.signins.find(&id, shows_a_page).await {
            Some(op) => still_valid(&state, Arc::new(op)).await,
            None => None,
        },
        None => None,
    };
    let operator = match found {
        Some(op) => op,
        None if state.auth.is_none() && !changing => {
            let opened = state
                .signins
                .open(
                    |session, csrf| Operator {
                        name: LOCAL_OPERATOR.to_owned(),
                        groups: Vec::new(),
                        scopes: vec![ADMIN_SCOPE.to_owned()],
                        key_id: None,
                        csrf,
                        session,
                        local: true,
                        flash: None,
                    },
                    None,
                )
                .await;
            let op = match opened {
                Ok(op) => op,
                Err(why) => return page::refused(StatusCode::INTERNAL_SERVER_ERROR, &why),
            };
            new_cookie = set_cookie(&state, &op.session, SESSION_IDLE);
            Arc::new(op)
        }
        None if changing => {
            return page::refused(
                StatusCode::UNAUTHORIZED,
                "Refused: you are not signed in (or your session ended, or the key that opened it was revoked). Nothing was changed; sign in again at /ui/login.",
            );
        }
        None => {
            let next = request
                .uri()
                .path_and_query()
                .map_or("/ui/", |p| p.as_str())
                .to_owned();
            let back: String = url::form_urlencoded::byte_serialize(next.as_bytes()).collect();
            return Redirect::to(&format!("/ui/login?next={back}")).into_response();
        }
    };
    let request = if changing {
        match checked_form(request, &operator).await {
            Ok(r) => r,
            Err(response) => return response,
        }
    } else {
        request
    };
    let mut request = request;
    request.extensions_mut().insert(operator);
    let mut response = next.run(request).await;
    if let Some(cookie) = new_cookie {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// The session's key is still active (a revocation from the CLI or another replica ends it).
pub(crate) async fn still_valid(
    state: &DashboardState,
    operator: Arc<Operator>,
) -> Option<Arc<Operator>> {
    let Some(key_id) = &operator.key_id else {
        return Some(operator);
    };
    match state.keys.list().await {
        Ok(keys) if keys.iter().any(|k| &k.id == key_id && k.is_active()) => Some(operator),
        Ok(_) => {
            state.signins.close(&operator.session).await;
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "the dashboard cannot read the API keys; sessions opened by a key are refused until it can");
            None
        }
    }
}

/// Reads the form (bounded) to check its `csrf` field, then hands the same bytes on.
async fn checked_form(request: Request, operator: &Operator) -> Result<Request, Response> {
    let (parts, body) = request.into_parts();
    let bytes = to_bytes(body, MAX_FORM_BYTES).await.map_err(|_| {
        page::refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Refused: the form is larger than {MAX_FORM_BYTES} bytes, or could not be read. Nothing was changed."),
        )
    })?;
    let token = url::form_urlencoded::parse(&bytes)
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v.into_owned());
    let valid = token.is_some_and(|t| bool::from(t.as_bytes().ct_eq(operator.csrf.as_bytes())));
    if !valid {
        return Err(page::refused(
            StatusCode::FORBIDDEN,
            "Refused: the form's CSRF token is missing or wrong (a page other than the dashboard's may have sent it). Nothing was changed; reload the page and try again.",
        ));
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

#[derive(askama::Template)]
#[template(path = "dashboard/login.html")]
struct SignInPage {
    chrome: Chrome,
    how: String,
    next: String,
}

/// Where sign-in goes on to: a dashboard page the visitor was sent from, never elsewhere.
fn next_page(given: &str) -> &str {
    let inside = given.starts_with("/ui/") && !given.starts_with("/ui//") && !given.contains('\\');
    if inside { given } else { "/ui/" }
}

#[derive(Deserialize, Default)]
pub struct GoOn {
    #[serde(default)]
    next: String,
}

fn sign_in_form(
    state: &DashboardState,
    status: StatusCode,
    error: Option<String>,
    next: &str,
) -> Response {
    let how = state
        .auth
        .as_ref()
        .map_or_else(String::new, |a| a.describe());
    let chrome = Chrome::signed_out("Sign in", error);
    let next = next_page(next).to_owned();
    page::render(status, &SignInPage { chrome, how, next })
}

/// `GET /ui/login?next=PAGE`.
pub async fn sign_in_page(
    State(state): State<Arc<DashboardState>>,
    Query(next): Query<GoOn>,
) -> Response {
    if state.auth.is_none() {
        return Redirect::to(next_page(&next.next)).into_response();
    }
    sign_in_form(&state, StatusCode::OK, None, &next.next)
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    credential: String,
    #[serde(default)]
    next: String,
}

/// `POST /ui/login`: an admin key or token opens a session.
pub async fn sign_in(
    State(state): State<Arc<DashboardState>>,
    Form(form): Form<SignInForm>,
) -> Response {
    let Some(auth) = &state.auth else {
        return Redirect::to("/ui/").into_response();
    };
    let presented = format!("Bearer {}", form.credential.trim());
    let identity: Identity = match auth.authenticate(&[presented.as_bytes()]).await {
        Ok(i) => i,
        Err(e) => {
            return sign_in_form(
                &state,
                StatusCode::UNAUTHORIZED,
                Some(format!(
                    "Not signed in: {e}. Paste an API key made with `manifold keys create NAME --scopes admin`, or an access token from the configured issuer."
                )),
                &form.next,
            );
        }
    };
    if !identity.scopes.iter().any(|s| s == ADMIN_SCOPE) {
        return sign_in_form(
            &state,
            StatusCode::FORBIDDEN,
            Some(format!(
                "Not signed in: {} lacks the {ADMIN_SCOPE} scope, which the dashboard needs. Make a key with `manifold keys create NAME --scopes {ADMIN_SCOPE}`.",
                identity.name
            )),
            &form.next,
        );
    }
    let (key_id, lasts) = match &identity.credential {
        Credential::ApiKey { id } => (Some(id.clone()), None),
        Credential::AccessToken { .. } => (None, Some(TOKEN_SESSION_LIFETIME)),
    };
    let lifetime = lasts.unwrap_or(SESSION_IDLE);
    let opened = state
        .signins
        .open(
            |session, csrf| Operator {
                name: identity.name.clone(),
                groups: identity.groups.clone(),
                scopes: identity.scopes.clone(),
                key_id,
                csrf,
                session,
                local: false,
                flash: None,
            },
            lasts,
        )
        .await;
    let operator = match opened {
        Ok(op) => op,
        Err(why) => return page::refused(StatusCode::INTERNAL_SERVER_ERROR, &why),
    };
    tracing::info!(operator = %operator.name, "signed in to the dashboard");
    let mut response = Redirect::to(next_page(&form.next)).into_response();
    if let Some(cookie) = set_cookie(&state, &operator.session, lifetime) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// `POST /ui/logout`.
pub async fn sign_out(
    State(state): State<Arc<DashboardState>>,
    axum::Extension(operator): axum::Extension<Arc<Operator>>,
) -> Response {
    state.signins.close(&operator.session).await;
    let mut response = Redirect::to("/ui/login").into_response();
    if let Some(cookie) = set_cookie(&state, "", Duration::ZERO) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_an_origin_naming_this_very_host_passes() {
        let ok = headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("host", "127.0.0.1:8080"),
        ]);
        assert!(same_origin(&ok).is_ok());
        let foreign = headers(&[
            ("origin", "http://evil.example"),
            ("host", "127.0.0.1:8080"),
        ]);
        assert!(same_origin(&foreign).unwrap_err().contains("evil.example"));
        let other_port = headers(&[("origin", "http://127.0.0.1:9"), ("host", "127.0.0.1:8080")]);
        assert!(same_origin(&other_port).is_err());
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080")])).is_err());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; manifold_ui=abc; b=2")]);
        assert_eq!(session_cookie(&h).as_deref(), Some("abc"));
        assert_eq!(
            session_cookie(&headers(&[("cookie", "manifold_uix=1")])),
            None
        );
    }

    #[test]
    fn sign_in_goes_on_only_to_a_dashboard_page() {
        assert_eq!(next_page("/ui/approvals/apr_1"), "/ui/approvals/apr_1");
        for away in [
            "https://evil.example/",
            "//evil.example/",
            "/ui//evil.example",
            "/mcp",
            "",
            "/ui\\x",
        ] {
            assert_eq!(next_page(away), "/ui/", "{away}");
        }
    }
}
