//! The HTTP client every HTTP transport shares, and the policy it enforces.
//!
//! Which URLs may be reached (TLS everywhere but loopback), which certificates are trusted, which
//! redirects are followed and how much of a response is read are security decisions; making them
//! once here keeps Streamable HTTP and legacy HTTP+SSE from drifting apart.

use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use url::{Host, Url};

use crate::error::UpstreamError;
use crate::http_spec::HttpSpec;

/// How long establishing a TCP (and TLS) connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Redirects followed in one chain (same origin only).
pub const MAX_REDIRECTS: usize = 3;
/// The largest JSON response body read (a single JSON-RPC message).
pub const MAX_JSON_BODY: usize = 16 * 1024 * 1024;
/// How much of an error response body is kept to explain the failure.
pub const MAX_ERROR_BODY: usize = 4 * 1024;
/// How long reading an error body may take.
pub const ERROR_BODY_TIMEOUT: Duration = Duration::from_secs(5);
/// How much of an error body is quoted in an error message.
pub const ERROR_EXCERPT_CHARS: usize = 300;

/// Checks a configured URL against the transport policy and parses it.
///
/// `https://` is accepted anywhere; `http://` only to this machine (127.0.0.0/8, ::1,
/// `localhost`) unless `allow_insecure_http`, because a gateway sends credentials and tool
/// arguments over it.
pub fn check_url(raw: &str, allow_insecure_http: bool) -> Result<Url, UpstreamError> {
    let refuse = |reason: String| UpstreamError::BadUrl {
        url: raw.to_owned(),
        reason,
    };
    let url = Url::parse(raw.trim()).map_err(|e| {
        refuse(format!(
            "it is not a valid absolute URL ({e}); write it in full, e.g. https://example.com/mcp"
        ))
    })?;
    let host = url.host_str().unwrap_or_default().to_owned();
    let rest = || {
        let mut s = host.clone();
        if let Some(port) = url.port() {
            s.push_str(&format!(":{port}"));
        }
        s.push_str(url.path());
        s
    };
    match url.scheme() {
        "https" => {}
        "http" => {
            if !is_loopback(&url) && !allow_insecure_http {
                return Err(refuse(format!(
                    "plain http:// is only allowed to this machine (127.0.0.1, ::1, localhost), since \
                     credentials and tool arguments would cross the network unencrypted; write \
                     https://{} instead, or allow insecure HTTP for this server explicitly",
                    rest()
                )));
            }
        }
        "ws" | "wss" => {
            return Err(refuse(format!(
                "MCP does not run over WebSocket; write https://{} (Streamable HTTP or HTTP+SSE) instead",
                rest()
            )));
        }
        other => {
            return Err(refuse(format!(
                "the scheme {other:?} is not supported; write an https:// URL (or http:// to this machine), \
                 e.g. https://example.com/mcp"
            )));
        }
    }
    if url.host().is_none() {
        return Err(refuse(
            "it names no host; write e.g. https://example.com/mcp".to_owned(),
        ));
    }
    Ok(url)
}

/// Whether a URL names this machine (`localhost`, 127.0.0.0/8, `::1`, v4-mapped loopback).
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        None => false,
    }
}

/// Why a redirect was not followed.
#[derive(Debug, thiserror::Error)]
enum RedirectRefused {
    #[error(
        "the server redirected to {to}, another origin than {from}; Manifold follows redirects within the same origin only: configure the final URL instead"
    )]
    OtherOrigin { from: String, to: String },
    #[error("the server redirected more than {MAX_REDIRECTS} times; configure the final URL")]
    TooMany,
}

fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        // `previous` starts with the original URL, so its length is the number of hops so far.
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(RedirectRefused::TooMany);
        }
        let Some(first) = attempt.previous().first() else {
            return attempt.follow();
        };
        if first.origin() != attempt.url().origin() {
            let from = first.origin().ascii_serialization();
            let to = attempt.url().to_string();
            return attempt.error(RedirectRefused::OtherOrigin { from, to });
        }
        attempt.follow()
    })
}

/// Builds the client for one server: custom headers, extra trust roots, client identity,
/// same-origin redirects, connect timeout.
pub fn build_client(spec: &HttpSpec, server: &str) -> Result<reqwest::Client, UpstreamError> {
    // Another part of the process may have installed a provider already; either way one is set.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config_error = |reason: String| UpstreamError::Connect {
        server: server.to_owned(),
        reason,
    };
    let mut headers = HeaderMap::new();
    for (name, value) in &spec.headers {
        let header_name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
            config_error(format!(
                "the configured header name {name:?} is not a valid HTTP header name; fix the server's headers"
            ))
        })?;
        let mut header_value = HeaderValue::from_str(value).map_err(|_| {
            config_error(format!(
                "the configured value of header {name:?} holds characters HTTP headers cannot carry (line breaks or control characters); fix the server's headers"
            ))
        })?;
        header_value.set_sensitive(true);
        headers.append(header_name, header_value);
    }
    let mut builder = reqwest::Client::builder()
        .default_headers(headers)
        .redirect(redirect_policy())
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("manifold/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = &spec.ca_bundle {
        let pem = std::fs::read(path).map_err(|e| {
            config_error(format!(
                "could not read the CA bundle {}: {e}; check the path",
                path.display()
            ))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            config_error(format!(
                "the CA bundle {} is not a PEM certificate bundle: {}",
                path.display(),
                describe_error(&e)
            ))
        })?;
        if certs.is_empty() {
            return Err(config_error(format!(
                "the CA bundle {} holds no certificate; it must contain PEM \"CERTIFICATE\" blocks",
                path.display()
            )));
        }
        builder = builder.tls_certs_merge(certs);
    }
    if let Some(path) = &spec.client_identity {
        let pem = std::fs::read(path).map_err(|e| {
            config_error(format!(
                "could not read the client certificate {}: {e}; check the path",
                path.display()
            ))
        })?;
        let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
            config_error(format!(
                "the client identity {} must be one PEM file with the certificate chain and its private key: {}",
                path.display(),
                describe_error(&e)
            ))
        })?;
        builder = builder.identity(identity);
    }
    builder.build().map_err(|e| {
        config_error(format!(
            "could not set up the HTTP client: {}",
            describe_error(&e)
        ))
    })
}

/// An error and its causes in one line: reqwest's own message rarely says what went wrong.
pub fn describe_error(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// The reason a request could not be delivered, for [`UpstreamError::Connect`].
pub fn send_failure(error: &reqwest::Error) -> String {
    // A refused redirect carries our own explanation; show it first and alone.
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<RedirectRefused>() {
            return refused.to_string();
        }
        source = s.source();
    }
    let what = if error.is_connect() {
        "could not connect"
    } else if error.is_timeout() {
        "timed out"
    } else {
        "the request failed"
    };
    // reqwest's own line repeats the URL and hyper's wrappers say nothing; the causes below
    // them are what a user can act on.
    let mut causes: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        let text = s.to_string();
        if !text.starts_with("client error (") && !causes.iter().any(|c| c.contains(&text)) {
            causes.push(text);
        }
        source = s.source();
    }
    let detail = if causes.is_empty() {
        error.to_string()
    } else {
        causes.join(": ")
    };
    let hint = if detail.contains("CertificateRequired") {
        "; the server demands a client certificate: configure a client identity for it"
    } else if detail.contains("UnknownIssuer") || detail.contains("invalid peer certificate") {
        "; if the server uses a private CA, configure its CA bundle"
    } else {
        ""
    };
    format!("{what}: {detail}{hint}")
}

/// Why a bounded body read stopped.
#[derive(Debug)]
pub enum BodyError {
    TooLarge { limit: usize },
    Read(String),
}

/// Reads a whole body, failing once it passes `limit` bytes.
pub async fn read_body_limited(
    response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let mut out = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyError::Read(describe_error(&e)))?;
        if out.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of an error body, for at most [`ERROR_BODY_TIMEOUT`];
/// the rest is not worth waiting for.
pub async fn read_error_body(response: reqwest::Response) -> Vec<u8> {
    let mut out = Vec::new();
    let mut stream = response.bytes_stream();
    let reading = async {
        while let Some(Ok(chunk)) = stream.next().await {
            let room = MAX_ERROR_BODY.saturating_sub(out.len());
            out.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
            if out.len() >= MAX_ERROR_BODY {
                break;
            }
        }
    };
    // A body that stalls keeps what arrived so far.
    let _ = tokio::time::timeout(ERROR_BODY_TIMEOUT, reading).await;
    out
}

/// A short, single-line quote of a body for an error message.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.is_empty() {
        return "(empty body)".to_owned();
    }
    let mut out: String = flat.chars().take(ERROR_EXCERPT_CHARS).collect();
    if flat.chars().count() > ERROR_EXCERPT_CHARS {
        out.push_str("...");
    }
    out
}

/// The media type of a response, lower-cased, without parameters.
pub fn media_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn reason(url: &str, insecure: bool) -> String {
        match check_url(url, insecure) {
            Err(UpstreamError::BadUrl { reason, .. }) => reason,
            other => panic!("expected a refusal for {url}, got {other:?}"),
        }
    }

    #[test]
    fn https_is_accepted_everywhere_and_http_only_on_loopback() {
        for ok in [
            "https://example.com/mcp",
            "http://127.0.0.1:8080/mcp",
            "http://127.1.2.3/mcp",
            "http://[::1]:9/mcp",
            "http://localhost:3000/sse",
            "http://LOCALHOST/mcp",
        ] {
            assert!(check_url(ok, false).is_ok(), "{ok}");
        }
        assert!(
            reason("http://example.com/mcp", false)
                .contains("write https://example.com/mcp instead")
        );
        assert!(check_url("http://example.com/mcp", true).is_ok());
        assert!(reason("http://10.0.0.1:80/x", false).contains("https://10.0.0.1/x"));
    }

    #[test]
    fn other_schemes_say_what_to_write() {
        assert!(reason("ws://127.0.0.1/mcp", false).contains("write https://127.0.0.1/mcp"));
        assert!(reason("ftp://example.com/mcp", false).contains("\"ftp\" is not supported"));
        assert!(reason("example.com/mcp", false).contains("not a valid absolute URL"));
        assert!(reason("file:///tmp/x", true).contains("\"file\""));
    }

    #[test]
    fn excerpts_are_short_single_lines() {
        assert_eq!(excerpt(b""), "(empty body)");
        assert_eq!(excerpt(b"line1\nline2"), "line1 line2");
        let long = vec![b'a'; 1000];
        assert_eq!(excerpt(&long).len(), ERROR_EXCERPT_CHARS + 3);
    }
}
