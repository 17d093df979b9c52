//! A deliberately small HTTP/1.1 client over a raw TCP socket, so tests see the peer's HTTP
//! replies byte for byte (status line, headers, chunked bodies, SSE events) with nothing in
//! between that could normalise them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::guarded;

/// A response read to its end.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "body is not JSON ({error}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body split into SSE events (blank-line separated, separators removed).
    pub fn events(&self) -> Vec<Vec<u8>> {
        split_events(&self.body)
    }
}

fn header_in<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

pub fn split_events(body: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut rest = body;
    while let Some(end) = find(rest, b"\n\n") {
        events.push(rest[..end].to_vec());
        rest = &rest[end + 2..];
    }
    assert!(
        rest.is_empty(),
        "trailing bytes after the last event: {:?}",
        String::from_utf8_lossy(rest)
    );
    events
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The `data:` payload of one SSE event (multiple data lines joined by LF).
pub fn event_data(event: &[u8]) -> Vec<u8> {
    let mut data: Vec<Vec<u8>> = Vec::new();
    for line in event.split(|b| *b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"data: ") {
            data.push(rest.to_vec());
        } else if line == b"data:" {
            data.push(Vec::new());
        }
    }
    data.join(&b'\n')
}

/// The JSON of one SSE `message` event.
pub fn event_json(event: &[u8]) -> Value {
    let data = event_data(event);
    serde_json::from_slice(&data).unwrap_or_else(|error| {
        panic!(
            "event data is not JSON ({error}): {:?}",
            String::from_utf8_lossy(event)
        )
    })
}

/// The `id:` of an SSE event, if it has one.
pub fn event_id(event: &[u8]) -> Option<String> {
    event
        .split(|b| *b == b'\n')
        .find_map(|line| line.strip_prefix(b"id: "))
        .map(|id| String::from_utf8_lossy(id).into_owned())
}

/// An HTTP response whose body is read incrementally (for SSE streams).
pub struct Stream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    chunked: bool,
    remaining: Option<usize>,
    buffer: Vec<u8>,
    done: bool,
}

impl Stream {
    pub fn header(&self, name: &str) -> Option<&str> {
        header_in(&self.headers, name)
    }

    async fn next_body_bytes(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        if self.chunked {
            let mut size_line = String::new();
            if self.reader.read_line(&mut size_line).await.ok()? == 0 {
                self.done = true;
                return None;
            }
            let size_text = size_line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_text, 16)
                .unwrap_or_else(|_| panic!("bad chunk size line {size_line:?}"));
            if size == 0 {
                loop {
                    let mut trailer = String::new();
                    let read = self.reader.read_line(&mut trailer).await.ok()?;
                    if read == 0 || trailer == "\r\n" {
                        break;
                    }
                }
                self.done = true;
                return None;
            }
            let mut chunk = vec![0; size];
            self.reader.read_exact(&mut chunk).await.ok()?;
            let mut crlf = [0; 2];
            self.reader.read_exact(&mut crlf).await.ok()?;
            assert_eq!(&crlf, b"\r\n", "chunk not followed by CRLF");
            return Some(chunk);
        }
        let want = match self.remaining {
            Some(0) => {
                self.done = true;
                return None;
            }
            Some(remaining) => remaining.min(64 * 1024),
            None => 64 * 1024,
        };
        let mut piece = vec![0; want];
        let read = self.reader.read(&mut piece).await.ok()?;
        if read == 0 {
            self.done = true;
            return None;
        }
        piece.truncate(read);
        if let Some(remaining) = &mut self.remaining {
            *remaining -= read;
        }
        Some(piece)
    }

    /// The next SSE event (without its blank-line separator); `None` when the body ended.
    pub async fn next_event(&mut self) -> Option<Vec<u8>> {
        guarded("reading an SSE event", async {
            loop {
                if let Some(end) = find(&self.buffer, b"\n\n") {
                    let event = self.buffer[..end].to_vec();
                    self.buffer.drain(..end + 2);
                    return Some(event);
                }
                match self.next_body_bytes().await {
                    Some(bytes) => self.buffer.extend_from_slice(&bytes),
                    None => {
                        assert!(
                            self.buffer.is_empty(),
                            "stream ended inside an event: {:?}",
                            String::from_utf8_lossy(&self.buffer)
                        );
                        return None;
                    }
                }
            }
        })
        .await
    }

    /// The rest of the body.
    pub async fn read_rest(&mut self) -> Vec<u8> {
        guarded("reading an HTTP body", async {
            let mut out = std::mem::take(&mut self.buffer);
            while let Some(bytes) = self.next_body_bytes().await {
                out.extend_from_slice(&bytes);
            }
            out
        })
        .await
    }
}

/// Sends one request on a fresh connection and returns the response with its headers read.
pub async fn open(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Stream {
    guarded("an HTTP request", async {
        let mut socket = TcpStream::connect(address).await.unwrap();
        let mut head =
            format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(body).await.unwrap();
        socket.flush().await.unwrap();
        let mut reader = BufReader::new(socket);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).await.unwrap();
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut response_headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await.unwrap();
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            response_headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let chunked = header_in(&response_headers, "transfer-encoding")
            .is_some_and(|value| value.eq_ignore_ascii_case("chunked"));
        let remaining = header_in(&response_headers, "content-length").map(|n| n.parse().unwrap());
        Stream {
            status,
            headers: response_headers,
            reader,
            chunked,
            remaining,
            buffer: Vec::new(),
            done: false,
        }
    })
    .await
}

/// Sends one request and reads the whole response.
pub async fn send(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut stream = open(address, method, path, headers, body).await;
    let body = stream.read_rest().await;
    Reply {
        status: stream.status,
        headers: stream.headers,
        body,
    }
}

/// Headers of a well-behaved Streamable HTTP POST.
pub const POST_JSON: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];
