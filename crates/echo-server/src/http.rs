//! Why: the HTTP -> HTTP latency row and the "direct" contender need the echo server on Streamable
//! HTTP. hyper's HTTP/1.1 server with keep-alive and a JSON answer per POST is the least work that
//! is still the real transport: both eras, legacy sessions, the modern mirrored headers.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::catalog::Catalog;
use crate::protocol::{
    Envelope, Era, MODERN_REVISION, Reply, answer, error_reply, header_mismatch,
};
use crate::sessions::Sessions;

/// The one endpoint.
pub const PATH: &str = "/mcp";
/// Largest body read; a 32 KiB benchmark payload is far below it.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
const SESSION_HEADER: &str = "mcp-session-id";

/// What every connection shares.
pub struct HttpState {
    pub catalog: Catalog,
    pub sessions: Sessions,
}

/// Accepts connections until the process ends. A failed accept (too many open files) is
/// reported and retried after a pause instead of ending the server.
pub async fn serve(listener: TcpListener, state: Arc<HttpState>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                eprintln!("manifold-echo: accept failed: {e}; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, request).await) }
            });
            // A client closing its connection is normal here, not an error worth a line.
            let _ = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn route(state: &HttpState, request: Request<Incoming>) -> Response<Full<Bytes>> {
    if request.uri().path() != PATH {
        return plain(StatusCode::NOT_FOUND, "not found: the endpoint is /mcp");
    }
    match *request.method() {
        Method::POST => post(state, request).await,
        Method::DELETE => delete(state, request.headers()),
        _ => {
            let mut response = plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "this server offers no GET stream; POST requests to /mcp",
            );
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
            response
        }
    }
}

async fn post(state: &HttpState, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the body is too large or was cut",
            );
        }
    };
    let message = match Envelope::parse(&body) {
        Ok(message) => message,
        Err(refusal) => return json(refusal, None),
    };
    let headers = &parts.headers;
    let mut new_session = None;
    match message.era() {
        Era::Modern => {
            if let Some(refusal) = mirrored_header_refusal(&message, headers) {
                return json(refusal, None);
            }
        }
        Era::Legacy if message.method.as_deref() == Some("initialize") => {
            new_session = Some(state.sessions.open());
        }
        // A notification or a response needs no session: there is nothing to answer.
        Era::Legacy if !message.is_request() => return empty(StatusCode::ACCEPTED),
        Era::Legacy => match header(headers, SESSION_HEADER) {
            None if header(headers, "mcp-protocol-version") == Some(MODERN_REVISION) => {
                return json(
                    error_reply(
                        400,
                        message.id,
                        -32602,
                        "a 2026-07-28 request needs params._meta with io.modelcontextprotocol/protocolVersion and clientCapabilities",
                        None,
                    ),
                    None,
                );
            }
            None => {
                return json(
                    error_reply(
                        400,
                        message.id,
                        -32600,
                        "Mcp-Session-Id is required: send initialize first",
                        None,
                    ),
                    None,
                );
            }
            Some(id) if !state.sessions.is_open(id) => {
                return json(
                    error_reply(
                        404,
                        message.id,
                        -32001,
                        "session not found: send initialize again",
                        None,
                    ),
                    None,
                );
            }
            Some(_) => {}
        },
    }
    match answer(&message, &state.catalog) {
        Some(reply) => json(reply, new_session),
        None => empty(StatusCode::ACCEPTED),
    }
}

/// Modern requests mirror the revision, the method and (for `tools/call`) the tool name in headers.
fn mirrored_header_refusal(message: &Envelope<'_>, headers: &HeaderMap) -> Option<Reply> {
    if let Some(revision) = message.modern_revision()
        && header(headers, "mcp-protocol-version") != Some(revision)
    {
        return Some(header_mismatch(
            message.id,
            "MCP-Protocol-Version must equal _meta's protocolVersion",
        ));
    }
    let method = message.method.as_deref()?;
    if header(headers, "mcp-method") != Some(method) {
        return Some(header_mismatch(
            message.id,
            "Mcp-Method must equal the method",
        ));
    }
    if method == "tools/call" {
        let name = message.params.as_ref().and_then(|p| p.name.as_deref());
        if header(headers, "mcp-name") != name {
            return Some(header_mismatch(
                message.id,
                "Mcp-Name must equal params.name",
            ));
        }
    }
    None
}

fn delete(state: &HttpState, headers: &HeaderMap) -> Response<Full<Bytes>> {
    match header(headers, SESSION_HEADER) {
        Some(id) if state.sessions.end(id) => empty(StatusCode::NO_CONTENT),
        Some(_) => plain(StatusCode::NOT_FOUND, "session not found"),
        None => plain(StatusCode::BAD_REQUEST, "Mcp-Session-Id is required"),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn json(reply: Reply, session: Option<String>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(id) = session.and_then(|s| HeaderValue::from_str(&s).ok()) {
        headers.insert(SESSION_HEADER, id);
    }
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}
