//! HTTP pieces both HTTP transports need: binding and announcing the port, JSON-RPC error
//! bodies, SSE response bodies, the Origin check, and the HTTP-level misbehaviours.

use std::collections::hash_map::RandomState;
use std::convert::Infallible;
use std::hash::BuildHasher;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::behaviour::{Behaviour, Settings};
use crate::error::PeerError;
use crate::jsonrpc::{self, RpcError};
use crate::payloads::MIB;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * MIB;

/// The host `redirect-other-host` sends clients to.
pub const REDIRECT_HOST: &str = "127.0.0.2";

/// Binds 127.0.0.1:`port` and prints `listening on 127.0.0.1:PORT` as the first stdout line.
pub async fn bind_and_announce(port: u16) -> Result<TcpListener, PeerError> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|source| PeerError::Bind { port, source })?;
    let address = listener
        .local_addr()
        .map_err(|source| PeerError::Bind { port, source })?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {address}").map_err(PeerError::Announce)?;
    stdout.flush().map_err(PeerError::Announce)?;
    Ok(listener)
}

/// A hard-to-guess visible-ASCII session id (32 hex digits).
pub fn new_session_id() -> String {
    let first = RandomState::new().hash_one(std::process::id());
    let second = RandomState::new().hash_one(first);
    format!("{first:016x}{second:016x}")
}

/// A response with a JSON body.
pub fn json_body(status: StatusCode, bytes: Vec<u8>) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    (status, headers, Body::from(bytes)).into_response()
}

/// A JSON-RPC error response body with the given HTTP status; `id` null when unknown.
pub fn rpc_error(status: StatusCode, id: Option<&Value>, error: &RpcError) -> Response {
    json_body(
        status,
        jsonrpc::error_message(id.unwrap_or(&Value::Null), error),
    )
}

/// A response with a plain-text body.
pub fn plain(status: StatusCode, text: &str) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    (status, headers, Body::from(text.to_owned())).into_response()
}

/// An SSE response whose body is whatever arrives on `events`, until the sender side closes.
pub fn sse_body(events: mpsc::UnboundedReceiver<Bytes>) -> Response {
    let stream = futures::stream::unfold(events, |mut events| async move {
        events
            .recv()
            .await
            .map(|event| (Ok::<Bytes, Infallible>(event), events))
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    (StatusCode::OK, headers, Body::from_stream(stream)).into_response()
}

/// A header as text, if present and visible ASCII.
pub fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// All headers as (lower-case name, value) pairs, for `seen_headers`.
pub fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Whether an `Origin` header, if any, names this machine (DNS-rebinding protection).
pub fn origin_allowed(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let Some((_, rest)) = origin.split_once("://") else {
        return false;
    };
    let host = if let Some(bracketed) = rest.strip_prefix('[') {
        bracketed.split(']').next().map(|h| format!("[{h}]"))
    } else {
        rest.split(':').next().map(str::to_owned)
    };
    matches!(host.as_deref(), Some("127.0.0.1" | "localhost" | "[::1]"))
}

/// The 403 for a foreign `Origin`.
pub fn forbidden_origin() -> Response {
    rpc_error(
        StatusCode::FORBIDDEN,
        None,
        &RpcError::new(
            jsonrpc::code::BAD_REQUEST,
            "Forbidden: the Origin header names another host; only 127.0.0.1, localhost and [::1] are allowed",
        ),
    )
}

/// The HTTP-level misbehaviours: a fixed status from the `--count`-th request on, or a redirect.
/// `None` lets the request through. Every call counts one request.
pub fn fault(
    settings: &Settings,
    requests_seen: &AtomicU64,
    port: u16,
    uri: &Uri,
) -> Option<Response> {
    let seen = requests_seen.fetch_add(1, Ordering::Relaxed) + 1;
    let failing_from = settings.count_or(1);
    let status = match settings.behaviour {
        Behaviour::Http500 => StatusCode::INTERNAL_SERVER_ERROR,
        Behaviour::Http404 => StatusCode::NOT_FOUND,
        Behaviour::Http405 => StatusCode::METHOD_NOT_ALLOWED,
        Behaviour::RedirectOtherHost => return Some(redirect(port, uri)),
        _ => return None,
    };
    if seen < failing_from {
        return None;
    }
    let text = format!(
        "manifold-test-peer behaviour {}: this request fails on purpose\n",
        settings.behaviour.name()
    );
    let mut response = plain(status, &text);
    if status == StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
    }
    Some(response)
}

fn redirect(port: u16, uri: &Uri) -> Response {
    let path = uri.path_and_query().map_or("/", |pq| pq.as_str());
    let location = format!("http://{REDIRECT_HOST}:{port}{path}");
    match HeaderValue::from_str(&location) {
        Ok(value) => {
            let mut headers = HeaderMap::new();
            headers.insert(header::LOCATION, value);
            (StatusCode::TEMPORARY_REDIRECT, headers, Body::empty()).into_response()
        }
        Err(_) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot build the redirect location\n",
        ),
    }
}

/// How a client's Accept header constrains the reply format.
#[derive(Debug, Clone, Copy)]
pub struct Accepts {
    pub sse: bool,
    pub json: bool,
}

pub fn accepts(headers: &HeaderMap) -> Accepts {
    let accept = header_text(headers, "accept")
        .unwrap_or("")
        .to_ascii_lowercase();
    let anything = accept.trim().is_empty() || accept.contains("*/*");
    Accepts {
        sse: anything || accept.contains("text/event-stream"),
        json: anything || accept.contains("application/json"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn with_origin(origin: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        headers
    }

    #[test]
    fn local_origins_pass_and_foreign_ones_do_not() {
        assert!(origin_allowed(&HeaderMap::new()));
        assert!(origin_allowed(&with_origin("http://127.0.0.1:8080")));
        assert!(origin_allowed(&with_origin("http://localhost")));
        assert!(origin_allowed(&with_origin("http://[::1]:9")));
        assert!(!origin_allowed(&with_origin("http://evil.example")));
        assert!(!origin_allowed(&with_origin(
            "http://127.0.0.1.evil.example"
        )));
        assert!(!origin_allowed(&with_origin("null")));
    }

    #[test]
    fn session_ids_are_32_hex_digits_and_differ() {
        let a = new_session_id();
        let b = new_session_id();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
