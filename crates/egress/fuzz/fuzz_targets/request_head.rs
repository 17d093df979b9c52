//! Fuzzes the proxy's request reader and parser: a sandboxed server writes whatever it likes to
//! the proxy, in pieces of any size.
//!
//! Pinned here: `read_head` and `parse` never panic; the head `read_head` returns ends at the first
//! `\r\n\r\n` and is at most `MAX_HEAD_BYTES`, whatever the read sizes; a parsed target has a
//! non-empty lowercase host and a non-zero port; a forwarded head is one origin-form request that
//! carries no proxy or hop-by-hop header and ends with `Connection: close`, and parses again to the
//! same target when turned back into an absolute-URI request.
#![no_main]

use std::pin::Pin;
use std::task::{Context, Poll};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use manifold_egress::request::{parse, read_head};
use manifold_egress::{MAX_HEAD_BYTES, ProxyRequest};
use tokio::io::{AsyncRead, ReadBuf};

#[derive(Arbitrary, Debug)]
struct Input {
    cuts: Vec<u8>,
    data: Vec<u8>,
}

/// Hands out `data` in reads of the sizes in `cuts` (each at least one byte).
struct Pieces<'a> {
    data: &'a [u8],
    cuts: &'a [u8],
    next: usize,
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let size = self
            .cuts
            .get(self.next)
            .map_or(usize::MAX, |c| usize::from(*c).max(1));
        self.next += 1;
        let n = size.min(buf.remaining()).min(self.data.len());
        let (now, later) = self.data.split_at(n);
        buf.put_slice(now);
        self.data = later;
        Poll::Ready(Ok(()))
    }
}

fn check_parsed(head: &[u8]) {
    match parse(head) {
        Ok(ProxyRequest::Connect { target }) => {
            assert!(!target.host.is_empty() && target.port != 0, "{target:?}");
            assert_eq!(target.host, target.host.to_ascii_lowercase());
        }
        Ok(ProxyRequest::Forward {
            target,
            head: forwarded,
        }) => {
            assert!(!target.host.is_empty() && target.port != 0, "{target:?}");
            let text = std::str::from_utf8(&forwarded).expect("a forwarded head is text");
            assert!(text.ends_with("Connection: close\r\n\r\n"), "{text:?}");
            assert_eq!(text.matches("\r\n\r\n").count(), 1, "{text:?}");
            let bytes = text.as_bytes();
            for (i, b) in bytes.iter().enumerate() {
                let crlf = (*b == b'\r' && bytes.get(i + 1) == Some(&b'\n'))
                    || (*b == b'\n' && i > 0 && bytes.get(i - 1) == Some(&b'\r'));
                assert!(
                    !b.is_ascii_control() || *b == b'\t' || crlf,
                    "a bare control byte {b:#x} in {text:?}"
                );
            }
            let mut lines = text.split("\r\n");
            let line = lines.next().unwrap_or_default();
            let mut parts = line.split(' ');
            let (method, path, version) = (
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
                parts.next().unwrap_or_default(),
            );
            assert!(path.starts_with('/'), "{line:?}");
            for header in lines.filter(|l| !l.is_empty()) {
                let name = header
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                assert!(
                    !name.starts_with("proxy-") && name != "keep-alive",
                    "{header:?}"
                );
                assert!(
                    name != "connection" || header == "Connection: close",
                    "{header:?}"
                );
            }
            let host = if target.host.contains(':') {
                format!("[{}]", target.host)
            } else {
                target.host.clone()
            };
            let again = format!(
                "{method} http://{host}:{}{path} {version}\r\n\r\n",
                target.port
            );
            match parse(again.as_bytes()) {
                Ok(ProxyRequest::Forward { target: back, .. }) => {
                    assert_eq!(back, target, "{again:?}")
                }
                other => panic!("{again:?} parsed to {other:?}"),
            }
        }
        Err(_) => {}
    }
}

fuzz_target!(|input: Input| {
    check_parsed(&input.data);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let mut reader = Pieces {
        data: &input.data,
        cuts: &input.cuts,
        next: 0,
    };
    if let Ok((head, rest)) = runtime.block_on(read_head(&mut reader)) {
        assert!(head.len() <= MAX_HEAD_BYTES);
        assert!(head.ends_with(b"\r\n\r\n"));
        let end = input
            .data
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|i| i + 4);
        assert_eq!(
            Some(head.len()),
            end,
            "the head ends at the first blank line"
        );
        assert!(input.data.starts_with(&head));
        assert!(input.data[head.len()..].starts_with(&rest));
        check_parsed(&head);
    }
});
