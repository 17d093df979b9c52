//! The `Content-Type` check every JSON-RPC POST (`/mcp`, `/message`) passes before its body is
//! read.
//!
//! A browser sends a cross-origin POST without a CORS preflight only when its body is a "simple"
//! type (`text/plain`, `application/x-www-form-urlencoded`, `multipart/form-data`) or, for a
//! typeless `Blob`, no `Content-Type` at all. Refusing everything but `application/json` keeps
//! such a request from ever being served, whatever the Origin guard decides. The MCP clients
//! Manifold meets (the TypeScript and Python SDKs, rmcp, the conformance suite, `curl --json`)
//! all send `application/json`, so a missing `Content-Type` is refused too: it is 415, not a
//! guess.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use manifold_telemetry::RejectReason;
use manifold_wire::ErrorCode;

use super::reply;

/// The one media type a JSON-RPC POST may carry (parameters such as `charset` aside).
pub const JSON_MEDIA_TYPE: &str = "application/json";

/// Longest `Content-Type` quoted back in a refusal; a longer one is cut.
pub const MAX_QUOTED_CONTENT_TYPE: usize = 100;

/// The 415 refusal for a POST whose `Content-Type` is not JSON; `None` for any other request.
pub(crate) fn json_refusal(request: &Request) -> Option<Response> {
    if request.method() != Method::POST {
        return None;
    }
    let sent = request
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| quoted(v.to_str().unwrap_or("(not ASCII)")));
    if sent.as_deref().is_some_and(is_json) {
        return None;
    }
    tracing::warn!(content_type = ?sent, path = %request.uri().path(), "refused a POST that is not JSON");
    let why = match sent {
        Some(sent) => format!(
            "Unsupported Media Type: this endpoint takes JSON-RPC as {JSON_MEDIA_TYPE}, the request was sent as {sent:?}; send the header Content-Type: {JSON_MEDIA_TYPE}"
        ),
        None => format!(
            "Unsupported Media Type: this endpoint takes JSON-RPC as {JSON_MEDIA_TYPE}, the request had no Content-Type; send the header Content-Type: {JSON_MEDIA_TYPE}"
        ),
    };
    let mut response = reply::error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        None,
        ErrorCode::InvalidRequest,
        why,
    );
    response
        .extensions_mut()
        .insert(super::metering::Refused(RejectReason::UnsupportedMediaType));
    Some(response)
}

/// A `Content-Type` as a refusal quotes it: at most [`MAX_QUOTED_CONTENT_TYPE`] characters.
fn quoted(content_type: &str) -> String {
    content_type.chars().take(MAX_QUOTED_CONTENT_TYPE).collect()
}

/// Whether a `Content-Type` names JSON: the media type before any `;` parameters, compared
/// without regard to case (RFC 9110 §8.3.1).
pub fn is_json(content_type: &str) -> bool {
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    media_type.eq_ignore_ascii_case(JSON_MEDIA_TYPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_with_parameters_and_any_case_passes_and_simple_types_do_not() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(is_json(" application/json ;charset=UTF-8"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("text/plain;charset=UTF-8"));
        assert!(!is_json("application/x-www-form-urlencoded"));
        assert!(!is_json("multipart/form-data; boundary=x"));
        assert!(!is_json("application/jsonx"));
        assert!(!is_json(""));
    }

    #[test]
    fn a_quoted_content_type_is_cut_at_its_bound() {
        let at_bound = "x".repeat(MAX_QUOTED_CONTENT_TYPE);
        assert_eq!(quoted(&at_bound), at_bound);
        assert_eq!(quoted(&format!("{at_bound}yyy")), at_bound);
    }
}
