//! The dashboard's stylesheet and script, compiled into the binary: nothing to install beside it
//! and nothing fetched from elsewhere (the Content-Security-Policy allows only this address).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const STYLESHEET: &str = include_str!("../../assets/dashboard.css");
const SCRIPT: &str = include_str!("../../assets/dashboard.js");

/// `GET /ui/assets/FILE`.
pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "dashboard.css" => (STYLESHEET, "text/css; charset=utf-8"),
        "dashboard.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such dashboard asset").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}
