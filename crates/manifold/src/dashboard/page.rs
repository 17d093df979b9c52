//! How every page is answered: the frame around it (navigation, who is signed in, the line an
//! action left), the security headers, and the error page.

use askama::Template;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::signin::{Flash, Operator};
use super::state::DashboardState;

/// No inline script or style, nothing from elsewhere, never framed, forms only to here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The navigation, in order: (path, label, the `nav` key a page passes).
pub const NAV: &[(&str, &str, &str)] = &[
    ("/ui/", "Overview", "overview"),
    ("/ui/catalog", "Catalog", "catalog"),
    ("/ui/playground", "Playground", "playground"),
    ("/ui/calls", "Live calls", "calls"),
    ("/ui/audit", "Audit", "audit"),
    ("/ui/approvals", "Approvals", "approvals"),
    ("/ui/authored", "Authored tools", "authored"),
    ("/ui/keys", "Keys", "keys"),
    ("/ui/config", "Configuration", "config"),
];

/// The frame of a page.
pub struct Chrome {
    pub title: String,
    pub nav: &'static str,
    /// Who is signed in; `None` on the sign-in page.
    pub operator: Option<String>,
    pub local: bool,
    pub csrf: String,
    pub flash: Option<String>,
    pub error: Option<String>,
}

impl Chrome {
    /// A page for a signed-in operator, with the line the last action left.
    pub fn new(operator: &Operator, title: &str, nav: &'static str) -> Chrome {
        let (flash, error) = match operator.flash.clone() {
            Some(Flash::Done(t)) => (Some(t), None),
            Some(Flash::Failed(t)) => (None, Some(t)),
            None => (None, None),
        };
        Chrome {
            title: title.to_owned(),
            nav,
            operator: Some(operator.name.clone()),
            local: operator.local,
            csrf: operator.csrf.clone(),
            flash,
            error,
        }
    }

    pub fn signed_out(title: &str, error: Option<String>) -> Chrome {
        Chrome {
            title: title.to_owned(),
            nav: "",
            operator: None,
            local: false,
            csrf: String::new(),
            flash: None,
            error,
        }
    }

    pub fn nav(&self) -> &'static [(&'static str, &'static str, &'static str)] {
        NAV
    }
}

/// A rendered page.
pub fn render<T: Template>(status: StatusCode, page: &T) -> Response {
    match page.render() {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "a dashboard page could not be rendered");
            refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                "this page could not be rendered (the gateway's log says why); other pages still work",
            )
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/refused.html")]
struct RefusedPage<'a> {
    chrome: Chrome,
    message: &'a str,
}

/// A page that only says why nothing was done.
pub fn refused(status: StatusCode, message: &str) -> Response {
    let page = RefusedPage {
        chrome: Chrome::signed_out(status.canonical_reason().unwrap_or("Refused"), None),
        message,
    };
    match page.render() {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(_) => (status, message.to_owned()).into_response(),
    }
}

/// Every dashboard answer carries these (pages, assets, errors, streams). The referrer policy is
/// `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` on the
/// pages' own form posts, which the Origin check would then refuse.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Back to a page after an action, with the line it left.
pub async fn after_action(
    state: &DashboardState,
    operator: &Operator,
    to: &str,
    flash: Flash,
) -> Response {
    state.signins.set_flash(&operator.session, &flash).await;
    axum::response::Redirect::to(to).into_response()
}

pub(crate) use crate::audit_commands::shown_ms;
