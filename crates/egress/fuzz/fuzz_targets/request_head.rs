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
use manifold_egress::MAX_HEAD_BYTES;
use manifold_egress::request::read_head;
use tokio::io::{AsyncRead, ReadBuf};

// The same checks the test suite's properties run (crates/egress/tests/request_properties.rs).
#[path = "../../tests/parsed_request/mod.rs"]
mod parsed_request;
use parsed_request::check_parsed;

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
