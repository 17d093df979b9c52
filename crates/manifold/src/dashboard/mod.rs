//! The operators' dashboard at `/ui`: what runs, what exists, what happens now, what waits for a
//! yes, served by `manifold serve` from the binary itself (compiled templates, one small script
//! of our own, no build step). Every page reads the same parts the CLI reads (the gateway, the
//! store, the configuration file) and every change goes through the same code the CLI's commands
//! use, so a page can never do what `manifold approvals|keys|pins` would refuse.
//!
//! Sign-in, cookies, CSRF and Origin checks live in `signin.rs`; each page in its own file; the
//! parts that refresh themselves over SSE in `live.rs`.

mod approvals;
mod as_caller;
mod assets;
mod audit;
mod authored;
mod calls;
mod catalog;
mod config;
mod keys;
mod live;
pub(crate) mod operator_sessions;
mod overview;
mod page;
mod playground;
mod signin;
mod state;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

pub use operator_sessions::SignIns;
pub use state::{DashboardState, RunningConfig};

/// Where every page lives.
pub const BASE: &str = "/ui";

/// The dashboard's routes, behind its sign-in (the sign-in page and the assets excepted).
pub fn router(state: Arc<DashboardState>) -> Router {
    let pages = Router::new()
        .route("/ui", get(overview::page))
        .route("/ui/", get(overview::page))
        .route("/ui/live/servers", get(overview::live))
        .route("/ui/catalog", get(catalog::page))
        .route("/ui/catalog/tools/{name}", get(catalog::tool))
        .route(
            "/ui/catalog/pins/{server}/approve",
            post(catalog::approve_pins),
        )
        .route(
            "/ui/playground",
            get(playground::page).post(playground::call),
        )
        .route("/ui/calls", get(calls::page))
        .route("/ui/live/calls", get(calls::live))
        .route("/ui/audit", get(audit::page))
        .route("/ui/audit/export", get(audit::export))
        .route("/ui/audit/verify", post(audit::verify))
        .route("/ui/audit/{seq}", get(audit::record))
        .route("/ui/approvals", get(approvals::page))
        .route("/ui/live/approvals", get(approvals::live))
        .route("/ui/approvals/{id}", get(approvals::one))
        .route("/ui/approvals/{id}/approve", post(approvals::approve))
        .route("/ui/approvals/{id}/deny", post(approvals::deny))
        .route("/ui/authored", get(authored::page))
        .route("/ui/authored/{name}", get(authored::tool))
        .route("/ui/authored/{name}/enable", post(authored::enable))
        .route("/ui/authored/{name}/disable", post(authored::disable))
        .route("/ui/authored/{name}/rollback", post(authored::rollback))
        .route("/ui/keys", get(keys::page).post(keys::create))
        .route("/ui/keys/{name}/revoke", post(keys::revoke))
        .route("/ui/config", get(config::page).post(config::submit))
        .route("/ui/logout", post(signin::sign_out))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            signin::require_operator,
        ));
    Router::new()
        .route("/ui/login", get(signin::sign_in_page).post(signin::sign_in))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            signin::same_origin_posts,
        ))
        .merge(pages)
        .route("/ui/assets/{file}", get(assets::serve))
        .layer(axum::middleware::from_fn(page::security_headers))
        .with_state(state)
}
