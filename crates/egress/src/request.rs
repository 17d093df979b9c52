//! Reads and parses one proxy request head from an untrusted server: bounded in bytes and header
//! count, total (every input is a request or a `RequestError`, never a panic), and only the two
//! forms the proxy serves: `CONNECT host:port` and absolute-URI `http://` requests.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest request head (request line and headers) the proxy reads.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Most header lines one request may carry.
pub const MAX_HEADERS: usize = 100;
/// How much is read from the socket at a time while looking for the end of the head.
const READ_CHUNK: usize = 2048;

/// Why a request was answered 400 (or the connection dropped).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("the request head is larger than {MAX_HEAD_BYTES} bytes")]
    HeadTooLarge,
    #[error("the request has more than {MAX_HEADERS} header lines")]
    TooManyHeaders,
    #[error("the connection closed before the request head ended")]
    Truncated,
    #[error("reading the request failed: {0}")]
    Io(String),
    #[error("the request head is not valid UTF-8 text")]
    NotText,
    #[error("the request line {0:?} is not `METHOD TARGET HTTP/1.x`")]
    BadRequestLine(String),
    #[error("the header line {0:?} is not `Name: value`")]
    BadHeader(String),
    #[error(
        "the target {0:?} is neither `CONNECT host:port` nor an absolute http:// URI; set HTTP_PROXY/HTTPS_PROXY so the client sends proxy requests"
    )]
    UnsupportedTarget(String),
    #[error("the target {0:?} has no valid host or port")]
    BadAuthority(String),
}

/// Where a request wants to go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Lowercase host name or address literal (IPv6 without brackets), no trailing dot.
    pub host: String,
    pub port: u16,
}

/// One parsed request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProxyRequest {
    /// `CONNECT host:port`: a tunnel after `200`.
    Connect { target: Target },
    /// `METHOD http://host[:port]/path HTTP/1.x`: forwarded as `head` (origin-form, proxy headers
    /// removed) followed by whatever the client sends after its head.
    Forward { target: Target, head: Vec<u8> },
}

/// Reads up to the end of the head (`\r\n\r\n`). Returns the head and any bytes read past it.
pub async fn read_head<R: AsyncRead + Unpin>(
    reader: &mut R,
) -> Result<(Vec<u8>, Vec<u8>), RequestError> {
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let mut chunk = [0u8; READ_CHUNK];
    loop {
        if let Some(end) = find_head_end(&buf) {
            if end > MAX_HEAD_BYTES {
                return Err(RequestError::HeadTooLarge);
            }
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        // Bounded: at most MAX_HEAD_BYTES + READ_CHUNK bytes are ever held.
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(RequestError::HeadTooLarge);
        }
        let n = reader
            .read(&mut chunk)
            .await
            .map_err(|e| RequestError::Io(e.to_string()))?;
        if n == 0 {
            return Err(RequestError::Truncated);
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses a head read by `read_head` into what the proxy does with it.
pub fn parse(head: &[u8]) -> Result<ProxyRequest, RequestError> {
    let text = std::str::from_utf8(head).map_err(|_| RequestError::NotText)?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(RequestError::BadRequestLine(clip(line)));
    };
    // No control byte anywhere in the line: a bare LF or CR forwarded in a path would end the
    // line early for an origin that accepts bare line ends, and smuggle in headers of its own.
    if method.is_empty()
        || line.bytes().any(|b| b.is_ascii_control())
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !(version == "HTTP/1.1" || version == "HTTP/1.0")
    {
        return Err(RequestError::BadRequestLine(clip(line)));
    }
    let mut headers = Vec::new();
    for header in lines.filter(|l| !l.is_empty()) {
        if headers.len() >= MAX_HEADERS {
            return Err(RequestError::TooManyHeaders);
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(RequestError::BadHeader(clip(header)));
        };
        if name.is_empty()
            || !name.bytes().all(is_token_byte)
            || value.bytes().any(|b| b.is_ascii_control() && b != b'\t')
        {
            return Err(RequestError::BadHeader(clip(header)));
        }
        headers.push((name, value.trim()));
    }
    if method == "CONNECT" {
        let target = authority(target, None)?;
        return Ok(ProxyRequest::Connect { target });
    }
    let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
        return Err(RequestError::UnsupportedTarget(clip(target)));
    };
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    if auth.contains('@') {
        return Err(RequestError::BadAuthority(clip(target)));
    }
    let target = authority(auth, Some(80))?;
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let mut out = format!("{method} {path} {version}\r\n");
    for (name, value) in &headers {
        // Hop-by-hop and proxy headers stay here; the origin gets one request and closes.
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("proxy-") || lower == "connection" || lower == "keep-alive" {
            continue;
        }
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(ProxyRequest::Forward {
        target,
        head: out.into_bytes(),
    })
}

/// `host:port`, `[v6]:port`, or (with a default port) `host`.
fn authority(text: &str, default_port: Option<u16>) -> Result<Target, RequestError> {
    let bad = || RequestError::BadAuthority(clip(text));
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        host.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(bad()),
        };
        (host, port)
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(bad)?,
        None => default_port.ok_or_else(bad)?,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let valid = !host.is_empty()
        && host.len() <= crate::policy::MAX_HOST_LEN
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'));
    if !valid {
        return Err(bad());
    }
    Ok(Target { host, port })
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// At most 80 characters of untrusted text for an error message.
fn clip(text: &str) -> String {
    text.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn t(host: &str, port: u16) -> Target {
        Target {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn connect_and_absolute_uri_parse() {
        assert_eq!(
            parse(b"CONNECT API.github.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap(),
            ProxyRequest::Connect {
                target: t("api.github.com", 443)
            }
        );
        assert_eq!(
            parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap(),
            ProxyRequest::Connect {
                target: t("::1", 8443)
            }
        );
        let ProxyRequest::Forward { target, head } = parse(
            b"GET http://a.test:8080/x?y=1 HTTP/1.1\r\nHost: a.test\r\nProxy-Authorization: s\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap() else {
            panic!("not a forward")
        };
        assert_eq!(target, t("a.test", 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /x?y=1 HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let ProxyRequest::Forward { target, head } =
            parse(b"POST HTTP://b.test?q HTTP/1.0\r\n\r\n").unwrap()
        else {
            panic!("not a forward")
        };
        assert_eq!(target, t("b.test", 80));
        assert!(head.starts_with(b"POST /?q HTTP/1.0\r\n"));
    }

    #[test]
    fn malformed_requests_are_errors_not_panics() {
        let cases: &[&[u8]] = &[
            b"\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
            b"GET https://a.test/ HTTP/1.1\r\n\r\n",
            b"CONNECT a.test HTTP/1.1\r\n\r\n",
            b"CONNECT a.test:0 HTTP/1.1\r\n\r\n",
            b"CONNECT a.test:70000 HTTP/1.1\r\n\r\n",
            b"CONNECT [::1 HTTP/1.1\r\n\r\n",
            b"CONNECT :443 HTTP/1.1\r\n\r\n",
            b"GET http://user@a.test/ HTTP/1.1\r\n\r\n",
            b"GET http://a b/ HTTP/1.1\r\n\r\n",
            b"get http://a.test/ HTTP/1.1\r\n\r\n",
            b"GET http://a.test/ HTTP/2\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1\r\nno colon\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1\r\nBad Name: v\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1\r\n\xff: v\r\n\r\n",
        ];
        for case in cases {
            assert!(parse(case).is_err(), "{:?}", String::from_utf8_lossy(case));
        }
    }

    #[test]
    fn a_bare_line_end_or_control_byte_cannot_smuggle_a_header_to_the_origin() {
        let cases: &[&[u8]] = &[
            b"GET http://a.test/x\nX-Injected:1 HTTP/1.1\r\n\r\n",
            b"GET http://a.test/x\rX-Injected:1 HTTP/1.1\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1\r\nAccept: a\nX-Injected: 1\r\n\r\n",
            b"GET http://a.test/ HTTP/1.1\r\nAccept: a\x00b\r\n\r\n",
        ];
        for case in cases {
            assert!(
                matches!(
                    parse(case),
                    Err(RequestError::BadRequestLine(_) | RequestError::BadHeader(_))
                ),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
        let tab = parse(b"GET http://a.test/ HTTP/1.1\r\nAccept: a\tb\r\n\r\n");
        assert!(tab.is_ok(), "a tab in a header value is allowed: {tab:?}");
    }

    #[test]
    fn header_count_is_bounded() {
        let mut head = String::from("GET http://a.test/ HTTP/1.1\r\n");
        for i in 0..MAX_HEADERS {
            head.push_str(&format!("X-{i}: v\r\n"));
        }
        assert!(parse(format!("{head}\r\n").as_bytes()).is_ok());
        head.push_str("X-last: v\r\n");
        assert_eq!(
            parse(format!("{head}\r\n").as_bytes()),
            Err(RequestError::TooManyHeaders)
        );
    }

    #[tokio::test]
    async fn head_size_is_bounded() {
        let mut fits = b"GET http://a.test/ HTTP/1.1\r\nX: ".to_vec();
        fits.resize(MAX_HEAD_BYTES - 4, b'a');
        fits.extend_from_slice(b"\r\n\r\nBODY");
        let (head, rest) = read_head(&mut fits.as_slice()).await.unwrap();
        assert_eq!(head.len(), MAX_HEAD_BYTES);
        assert!(
            b"BODY".starts_with(&rest),
            "only bytes after the head are left over"
        );
        let small = b"CONNECT a.test:443 HTTP/1.1\r\n\r\nBODY".to_vec();
        let (head, rest) = read_head(&mut small.as_slice()).await.unwrap();
        assert_eq!(
            (head.len(), rest.as_slice()),
            (small.len() - 4, &b"BODY"[..])
        );
        let mut big = b"GET http://a.test/ HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD_BYTES * 2, b'a');
        assert_eq!(
            read_head(&mut big.as_slice()).await,
            Err(RequestError::HeadTooLarge)
        );
        assert_eq!(
            read_head(&mut &b"GET http://a.test/ HTTP/1.1\r\n"[..]).await,
            Err(RequestError::Truncated)
        );
    }
}
