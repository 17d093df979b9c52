//! Newline-delimited JSON framing, as stdio transports use it.
//!
//! Reads arrive in arbitrary pieces (a UTF-8 character or a message can be split anywhere), and a
//! hostile peer can send a line that never ends. The framer works on bytes, caps a line at a named
//! size, and after an over-long line discards up to the next newline so the stream stays in sync.
//! While it discards, it reads the line's top-level `id` (`id_scan.rs`) so that the call the line
//! answered can fail at once ([`LineFramer::take_skipped_id`]).

use bytes::{Buf, Bytes, BytesMut};

use crate::id::Id;
use crate::id_scan::TopLevelIdScan;

/// The longest line accepted by default (16 MiB), excluding its line ending.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;

/// One framing outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete, non-blank line without its `\n` or `\r\n`.
    Line(Bytes),
    /// A line grew past the limit; its bytes so far were dropped and the rest will be skipped.
    TooLong { limit: usize, seen: usize },
}

/// Splits a byte stream into lines.
#[derive(Debug)]
pub struct LineFramer {
    buf: BytesMut,
    max: usize,
    /// Bytes of `buf` already known to contain no newline.
    scanned: usize,
    discarding: bool,
    /// The id scan of the over-long line being discarded, until it has its answer.
    id_scan: Option<TopLevelIdScan>,
    /// The id of an over-long line, read and not yet taken.
    skipped_id: Option<Id>,
}

impl LineFramer {
    pub fn new(max_line: usize) -> LineFramer {
        LineFramer {
            buf: BytesMut::new(),
            max: max_line,
            scanned: 0,
            discarding: false,
            id_scan: None,
            skipped_id: None,
        }
    }

    /// The top-level id of the latest over-long line, once it has been read (often by the time
    /// its [`Frame::TooLong`] comes out, at the latest when the line ends); each id is returned
    /// once.
    pub fn take_skipped_id(&mut self) -> Option<Id> {
        self.skipped_id.take()
    }

    /// Feeds discarded bytes to the id scan; `end` says the over-long line ended with them.
    fn scan_discarded(&mut self, bytes: &[u8], end: bool) {
        let Some(scan) = self.id_scan.as_mut() else {
            return;
        };
        scan.feed(bytes);
        if end {
            scan.finish();
        }
        if scan.is_done() {
            self.skipped_id = scan.id().cloned();
            self.id_scan = None;
        }
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next frame, if the buffered bytes hold one.
    pub fn next_frame(&mut self) -> Option<Frame> {
        loop {
            let found = self
                .buf
                .get(self.scanned..)
                .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
                .map(|i| i + self.scanned);
            let Some(nl) = found else {
                self.scanned = self.buf.len();
                if self.discarding {
                    let discarded = std::mem::take(&mut self.buf);
                    self.scan_discarded(&discarded, false);
                    self.scanned = 0;
                    return None;
                }
                // A line may end with "\r" still waiting for its "\n": allow that one byte
                // (saturating, so that a limit of usize::MAX means "no limit").
                if self.buf.len() > self.max.saturating_add(1) {
                    let seen = self.buf.len();
                    self.id_scan = Some(TopLevelIdScan::new());
                    let discarded = std::mem::take(&mut self.buf);
                    self.scan_discarded(&discarded, false);
                    self.scanned = 0;
                    self.discarding = true;
                    return Some(Frame::TooLong {
                        limit: self.max,
                        seen,
                    });
                }
                return None;
            };
            let mut line = self.buf.split_to(nl + 1).freeze();
            self.scanned = 0;
            line.truncate(nl);
            if line.last() == Some(&b'\r') {
                line.truncate(nl - 1);
            }
            if self.discarding {
                self.discarding = false;
                self.scan_discarded(&line, true);
                self.id_scan = None;
                continue;
            }
            if line.len() > self.max {
                self.id_scan = Some(TopLevelIdScan::new());
                self.scan_discarded(&line, true);
                return Some(Frame::TooLong {
                    limit: self.max,
                    seen: line.len(),
                });
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(Frame::Line(line));
        }
    }

    /// At end of stream: the bytes of an unfinished last line, if any (a truncated message).
    pub fn finish(&mut self) -> Option<Bytes> {
        let rest = std::mem::take(&mut self.buf);
        self.scanned = 0;
        if self.discarding || rest.iter().all(u8::is_ascii_whitespace) {
            self.discarding = false;
            self.id_scan = None;
            return None;
        }
        Some(rest.freeze())
    }

    /// Bytes buffered and not yet framed.
    pub fn buffered(&self) -> usize {
        self.buf.remaining()
    }
}

impl Default for LineFramer {
    fn default() -> Self {
        LineFramer::new(DEFAULT_MAX_LINE)
    }
}

/// Encodes one message as a line.
pub fn encode_line(json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 1);
    out.extend_from_slice(json.as_bytes());
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(f: &mut LineFramer) -> Vec<Frame> {
        std::iter::from_fn(|| f.next_frame()).collect()
    }

    fn line(s: &str) -> Frame {
        Frame::Line(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn splits_lines_and_tolerates_crlf_and_blank_lines() {
        let mut f = LineFramer::new(100);
        f.push(b"{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\"");
        assert_eq!(drain(&mut f), vec![line("{\"a\":1}"), line("{\"b\":2}")]);
        f.push(b":3}\n");
        assert_eq!(drain(&mut f), vec![line("{\"c\":3}")]);
        assert_eq!(f.finish(), None);
    }

    #[test]
    fn a_character_split_across_reads_is_rejoined() {
        let mut f = LineFramer::new(100);
        let text = "\"é\"\n".as_bytes();
        f.push(&text[..2]);
        assert_eq!(drain(&mut f), vec![]);
        f.push(&text[2..]);
        assert_eq!(drain(&mut f), vec![line("\"é\"")]);
    }

    #[test]
    fn an_over_long_line_is_reported_once_and_skipped_in_sync() {
        let mut f = LineFramer::new(8);
        f.push(b"0123456789");
        assert_eq!(drain(&mut f), vec![Frame::TooLong { limit: 8, seen: 10 }]);
        f.push(b"abcdef");
        assert_eq!(drain(&mut f), vec![]);
        f.push(b"ghi\n{\"ok\":1}\n");
        assert_eq!(drain(&mut f), vec![line("{\"ok\":1}")]);
    }

    #[test]
    fn an_over_long_line_in_one_read_is_reported() {
        let mut f = LineFramer::new(4);
        f.push(b"123456\nab\n");
        assert_eq!(
            drain(&mut f),
            vec![Frame::TooLong { limit: 4, seen: 6 }, line("ab")]
        );
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes() {
        let mut f = LineFramer::new(4);
        f.push(b"1234\r\n");
        assert_eq!(drain(&mut f), vec![line("1234")]);
    }

    #[test]
    fn the_id_of_an_over_long_line_is_read_while_it_is_skipped() {
        let mut f = LineFramer::new(16);
        // The id comes after the limit: it is read from the discarded bytes.
        f.push(b"{\"result\":{\"text\":\"0123456789abcdef\"},");
        assert_eq!(
            drain(&mut f),
            vec![Frame::TooLong {
                limit: 16,
                seen: 38
            }]
        );
        assert_eq!(f.take_skipped_id(), None);
        f.push(b"\"id\":41}\n{\"ok\":1}\n");
        assert_eq!(drain(&mut f), vec![line("{\"ok\":1}")]);
        assert_eq!(f.take_skipped_id(), Some(Id::Num(41)));
        assert_eq!(f.take_skipped_id(), None);
        // In one read, and with the id first: known as soon as the line is reported.
        f.push(b"{\"id\":\"s\",\"result\":\"0123456789abcdef\"}\n");
        assert_eq!(
            drain(&mut f),
            vec![Frame::TooLong {
                limit: 16,
                seen: 38
            }]
        );
        assert_eq!(f.take_skipped_id(), Some(Id::from("s")));
    }

    #[test]
    fn the_largest_limit_does_not_overflow() {
        // `usize::MAX + 1` used to overflow: a panic in debug builds, and in release a limit
        // of 0 that reported every unfinished line as too long.
        let mut f = LineFramer::new(usize::MAX);
        f.push(b"{\"a\":");
        assert_eq!(drain(&mut f), vec![]);
        f.push(b"1}\n");
        assert_eq!(drain(&mut f), vec![line("{\"a\":1}")]);
    }

    #[test]
    fn the_default_limit_is_sixteen_mebibytes() {
        assert_eq!(DEFAULT_MAX_LINE, 16 * 1024 * 1024);
    }

    #[test]
    fn finish_returns_a_truncated_tail() {
        let mut f = LineFramer::new(100);
        f.push(b"{\"half\":");
        assert_eq!(drain(&mut f), vec![]);
        assert_eq!(f.finish(), Some(Bytes::from_static(b"{\"half\":")));
    }
}
