//! Why: some tests must put exact bytes on the wire (a request line, headers, a body no HTTP client
//! library would send as written) and read the status line, headers and body back as they came;
//! each used to open its own TcpStream and split the reply by hand. One driver here: one request
//! per connection (`Connection: close`), the reply read to the end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::error::TestkitError;

/// How long a raw exchange waits for the peer to finish its reply (a hang guard only).
pub const RAW_READ_HANG_GUARD: Duration = Duration::from_secs(60);

/// Sends raw HTTP/1.1 requests to `127.0.0.1:PORT`.
#[derive(Debug, Clone)]
pub struct RawHttp {
    authority: String,
}

impl RawHttp {
    /// A driver for the authority of `url` (`http://127.0.0.1:PORT/...`) or for `127.0.0.1:PORT`.
    pub fn new(url_or_authority: &str) -> RawHttp {
        let rest = url_or_authority
            .strip_prefix("http://")
            .unwrap_or(url_or_authority);
        let authority = rest.split('/').next().unwrap_or(rest).to_owned();
        RawHttp { authority }
    }

    /// `127.0.0.1:PORT`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// Writes `request` as given on a new connection and reads the reply until the peer closes it.
    pub fn exchange(&self, request: &[u8]) -> Result<RawResponse, TestkitError> {
        let io = |source| TestkitError::Io {
            what: format!("raw HTTP exchange with {}", self.authority),
            source,
        };
        let mut stream = TcpStream::connect(&self.authority).map_err(io)?;
        stream
            .set_read_timeout(Some(RAW_READ_HANG_GUARD))
            .map_err(io)?;
        stream.write_all(request).map_err(io)?;
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).map_err(io)?;
        let reply = String::from_utf8_lossy(&reply).into_owned();
        RawResponse::parse(&reply).ok_or_else(|| TestkitError::NotHttp {
            authority: self.authority.clone(),
            reply,
        })
    }

    /// `METHOD PATH HTTP/1.1` with `Host`, `Connection: close`, `headers` as given and, when there
    /// is a body, its `Content-Length`.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<RawResponse, TestkitError> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.authority
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        head.push_str(body);
        self.exchange(head.as_bytes())
    }

    /// `GET PATH` with no other header.
    pub fn get(&self, path: &str) -> Result<RawResponse, TestkitError> {
        self.request("GET", path, &[], "")
    }
}

/// A reply as it came: the status line, the headers in order, and the body after the blank line
/// (still chunk-framed when the reply was chunked; [`RawResponse::decoded_body`] removes that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    pub status: u16,
    pub status_line: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawResponse {
    /// Splits a whole reply; `None` when it does not start with an HTTP status line.
    pub fn parse(reply: &str) -> Option<RawResponse> {
        let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((reply, ""));
        let mut lines = head.split("\r\n");
        let status_line = lines.next()?.to_owned();
        let mut words = status_line.split_whitespace();
        if !words.next()?.starts_with("HTTP/") {
            return None;
        }
        let status = words.next()?.parse().ok()?;
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
            .collect();
        Some(RawResponse {
            status,
            status_line,
            headers,
            body: body.to_owned(),
        })
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body without chunked framing (the body itself when the reply was not chunked).
    pub fn decoded_body(&self) -> String {
        if !self
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            return self.body.clone();
        }
        let mut out = String::new();
        let mut rest = self.body.as_str();
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16);
            let Ok(size) = size else { break };
            let (Some(chunk), Some(next)) = (after.get(..size), after.get(size..)) else {
                break;
            };
            if size == 0 {
                break;
            }
            out.push_str(chunk);
            rest = next.trim_start_matches("\r\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_reply_is_split_into_status_headers_and_body() {
        let r = RawResponse::parse(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nX-A: 1\r\n\r\nnot ready",
        )
        .unwrap();
        assert_eq!(r.status, 503);
        assert_eq!(r.status_line, "HTTP/1.1 503 Service Unavailable");
        assert_eq!(r.header("content-type"), Some("text/plain"));
        assert_eq!(r.body, "not ready");
        assert_eq!(r.decoded_body(), "not ready");
        assert!(RawResponse::parse("SSH-2.0-x\r\n").is_none());
    }

    #[test]
    fn a_chunked_body_is_decoded() {
        let r = RawResponse::parse(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.decoded_body(), "hello world");
    }

    #[test]
    fn the_authority_is_taken_from_a_url() {
        assert_eq!(
            RawHttp::new("http://127.0.0.1:9/mcp").authority(),
            "127.0.0.1:9"
        );
        assert_eq!(RawHttp::new("127.0.0.1:9").authority(), "127.0.0.1:9");
    }
}
