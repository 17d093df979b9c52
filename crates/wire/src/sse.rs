//! Server-Sent Events: parsing and writing, as Streamable HTTP and legacy HTTP+SSE use them.
//!
//! Follows the WHATWG event-stream rules (any of CRLF, LF or CR ends a line, one optional space
//! after the colon, multi-line `data`, comments, `retry`) on bytes that arrive in arbitrary pieces.
//! An event that grows past a named size is reported and skipped up to its end, so a giant event
//! cannot exhaust memory and the stream stays usable.

use std::fmt::Write as _;

/// The largest event accepted by default (16 MiB of field data).
pub const DEFAULT_MAX_EVENT: usize = 16 * 1024 * 1024;

/// The UTF-8 byte order mark a stream may open with.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `id` field of this event, if it had one.
    pub id: Option<String>,
    /// The `event` field (absent means "message").
    pub event: Option<String>,
    /// The `data` lines joined by `\n`; `None` when the event had no data field at all.
    pub data: Option<String>,
    /// The `retry` field, in milliseconds.
    pub retry: Option<u64>,
}

impl SseEvent {
    /// An event with only data.
    pub fn message(data: impl Into<String>) -> SseEvent {
        SseEvent {
            data: Some(data.into()),
            ..SseEvent::default()
        }
    }

    /// The event's type, defaulting to "message".
    pub fn kind(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }

    /// Whether this is a priming event: an id (and maybe retry) with empty or no data.
    pub fn is_priming(&self) -> bool {
        self.id.is_some() && self.data.as_deref().is_none_or(str::is_empty)
    }

    /// The event in wire form, ending with the blank line that dispatches it.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Field values cannot hold line breaks; they are cut there rather than corrupting the stream.
        let clean = |s: &str| s.split(['\r', '\n']).next().unwrap_or_default().to_owned();
        if let Some(e) = &self.event {
            let _ = writeln!(out, "event: {}", clean(e));
        }
        if let Some(id) = &self.id {
            let _ = writeln!(out, "id: {}", clean(id));
        }
        if let Some(r) = self.retry {
            let _ = writeln!(out, "retry: {r}");
        }
        if let Some(d) = &self.data {
            if d.is_empty() {
                out.push_str("data:\n");
            }
            for line in d.split("\r\n").flat_map(|l| l.split(['\n', '\r'])) {
                if !d.is_empty() {
                    let _ = writeln!(out, "data: {line}");
                }
            }
        }
        out.push('\n');
        out
    }
}

/// A comment line (keep-alive), in wire form.
pub fn encode_comment(text: &str) -> String {
    let mut out = String::new();
    for line in text.split(['\r', '\n']) {
        let _ = writeln!(out, ": {line}");
    }
    out
}

/// A parsing outcome other than an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseFault {
    #[error("an SSE event grew past {limit} bytes and was skipped")]
    TooLarge { limit: usize },
}

/// Incremental event-stream parser.
#[derive(Debug)]
pub struct SseParser {
    max_event: usize,
    line: Vec<u8>,
    /// Whether the current line had any byte (a skipped line is not a blank line).
    line_seen: bool,
    after_cr: bool,
    at_start: bool,
    pending: Pending,
    skipping: bool,
    ready: std::collections::VecDeque<Result<SseEvent, SseFault>>,
    last_event_id: Option<String>,
}

#[derive(Debug, Default)]
struct Pending {
    event: SseEvent,
    size: usize,
    data_lines: usize,
    touched: bool,
}

impl SseParser {
    pub fn new(max_event: usize) -> SseParser {
        SseParser {
            max_event,
            line: Vec::new(),
            line_seen: false,
            after_cr: false,
            at_start: true,
            pending: Pending::default(),
            skipping: false,
            ready: std::collections::VecDeque::new(),
            last_event_id: None,
        }
    }

    /// The id of the last event that carried one: what `Last-Event-ID` resumes from.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// Feeds bytes read from the stream.
    pub fn push(&mut self, data: &[u8]) {
        if self.at_start {
            // A UTF-8 byte order mark may open the stream; it can only be judged once 3 bytes are
            // in, so the first bytes wait in `line` until then.
            self.line.extend_from_slice(data);
            if self.line.len() < BOM.len() && BOM.starts_with(&self.line) {
                return;
            }
            self.at_start = false;
            let held = std::mem::take(&mut self.line);
            // The held bytes go through the same path as any others, so where the reads were
            // cut cannot change what is parsed.
            self.feed(held.strip_prefix(BOM).unwrap_or(&held));
            return;
        }
        self.feed(data);
    }

    fn feed(&mut self, data: &[u8]) {
        for &b in data {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    let seen = std::mem::take(&mut self.line_seen);
                    self.end_line(&line, seen);
                }
                _ => {
                    self.after_cr = false;
                    self.line_seen = true;
                    if self.skipping {
                        continue;
                    }
                    self.line.push(b);
                    if self.pending.size + self.line.len() > self.max_event {
                        self.fail_event();
                    }
                }
            }
        }
    }

    /// The next parsed event or fault.
    pub fn next_event(&mut self) -> Option<Result<SseEvent, SseFault>> {
        self.ready.pop_front()
    }

    fn fail_event(&mut self) {
        self.skipping = true;
        self.line.clear();
        self.pending = Pending::default();
        self.ready.push_back(Err(SseFault::TooLarge {
            limit: self.max_event,
        }));
    }

    fn end_line(&mut self, line: &[u8], seen: bool) {
        if !seen {
            if self.skipping {
                self.skipping = false;
            } else if self.pending.touched {
                let p = std::mem::take(&mut self.pending);
                self.ready.push_back(Ok(p.event));
            }
            self.pending = Pending::default();
            return;
        }
        if self.skipping || line.first() == Some(&b':') {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = text.get(i + 1..).unwrap_or_default();
                (
                    text.get(..i).unwrap_or_default(),
                    v.strip_prefix(' ').unwrap_or(v),
                )
            }
            None => (text.as_ref(), ""),
        };
        let p = &mut self.pending;
        match field {
            "data" => {
                let d = p.event.data.get_or_insert_with(String::new);
                if p.data_lines > 0 {
                    d.push('\n');
                }
                d.push_str(value);
                p.data_lines += 1;
                p.size += value.len() + 1;
                p.touched = true;
            }
            "event" => {
                p.event.event = Some(value.to_owned());
                p.size += value.len();
                p.touched = true;
            }
            "id" if !value.contains('\0') => {
                p.event.id = Some(value.to_owned());
                self.last_event_id = Some(value.to_owned());
                p.size += value.len();
                p.touched = true;
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                p.event.retry = value.parse().ok();
                p.touched = true;
            }
            _ => {}
        }
        // Invalid UTF-8 is replaced by U+FFFD (three bytes for one), so a line that fitted as
        // bytes can still push the event's text past the limit.
        if self.pending.size > self.max_event {
            self.fail_event();
        }
    }
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::new(DEFAULT_MAX_EVENT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<Result<SseEvent, SseFault>> {
        let mut p = SseParser::new(64);
        let mut out = Vec::new();
        for c in chunks {
            p.push(c);
            out.extend(std::iter::from_fn(|| p.next_event()));
        }
        out
    }

    #[test]
    fn parses_fields_multiline_data_and_comments() {
        let got = parse_all(&[
            b": keep-alive\nevent: message\nid: 7\ndata: {\"a\":\ndata:1}\nretry: 3000\n\n",
        ]);
        assert_eq!(
            got,
            vec![Ok(SseEvent {
                id: Some("7".into()),
                event: Some("message".into()),
                data: Some("{\"a\":\n1}".into()),
                retry: Some(3000),
            })]
        );
    }

    #[test]
    fn handles_every_line_ending_split_across_reads() {
        let got = parse_all(&[b"data: a\r", b"\ndata: b\r\r", b"data: c\n", b"\n"]);
        assert_eq!(
            got,
            vec![Ok(SseEvent::message("a\nb")), Ok(SseEvent::message("c"))]
        );
    }

    #[test]
    fn a_priming_event_is_dispatched_and_sets_the_last_id() {
        let mut p = SseParser::default();
        p.push(b"id: s1-0\nretry: 500\ndata:\n\n");
        let e = p.next_event().unwrap().unwrap();
        assert!(e.is_priming());
        assert_eq!(e.data.as_deref(), Some(""));
        assert_eq!(p.last_event_id(), Some("s1-0"));
    }

    #[test]
    fn a_giant_event_is_reported_and_skipped_in_sync() {
        let big = vec![b'x'; 200];
        let mut chunk = b"data: ".to_vec();
        chunk.extend_from_slice(&big);
        chunk.extend_from_slice(b"\ndata: more\n\ndata: ok\n\n");
        let got = parse_all(&[&chunk]);
        assert_eq!(
            got,
            vec![
                Err(SseFault::TooLarge { limit: 64 }),
                Ok(SseEvent::message("ok"))
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_is_ignored_even_when_split() {
        let got = parse_all(&[b"\xEF", b"\xBB\xBFdata: x\n\n"]);
        assert_eq!(got, vec![Ok(SseEvent::message("x"))]);
    }

    #[test]
    fn encoding_round_trips() {
        let e = SseEvent {
            id: Some("1".into()),
            event: Some("message".into()),
            data: Some("line1\nline2".into()),
            retry: Some(10),
        };
        let mut p = SseParser::default();
        p.push(e.encode().as_bytes());
        assert_eq!(p.next_event(), Some(Ok(e)));
        let priming = SseEvent {
            id: Some("p".into()),
            data: Some(String::new()),
            ..SseEvent::default()
        };
        p.push(priming.encode().as_bytes());
        assert_eq!(p.next_event(), Some(Ok(priming)));
        p.push(encode_comment("ping").as_bytes());
        assert_eq!(p.next_event(), None);
    }

    #[test]
    fn bytes_held_while_judging_a_byte_order_mark_count_against_the_limit() {
        // Found by the sse fuzz target: "\xEF" alone waited for the BOM decision outside the
        // size check, so a split read let a line pass that one read refused.
        let mut whole = SseParser::new(0);
        whole.push(b"\xEF\n");
        let mut split = SseParser::new(0);
        split.push(b"\xEF");
        split.push(b"\n");
        let whole: Vec<_> = std::iter::from_fn(|| whole.next_event()).collect();
        let split: Vec<_> = std::iter::from_fn(|| split.next_event()).collect();
        assert_eq!(whole, vec![Err(SseFault::TooLarge { limit: 0 })]);
        assert_eq!(split, whole);
    }

    #[test]
    fn data_that_grows_when_invalid_utf8_is_replaced_still_obeys_the_limit() {
        // 5 invalid bytes fit a 10-byte limit as bytes but become 15 bytes of U+FFFD.
        let mut p = SseParser::new(10);
        p.push(b"data:\xff\xff\xff\xff\xff\n\ndata: ok\n\n");
        assert_eq!(p.next_event(), Some(Err(SseFault::TooLarge { limit: 10 })));
        assert_eq!(p.next_event(), Some(Ok(SseEvent::message("ok"))));
        assert_eq!(p.next_event(), None);
    }

    #[test]
    fn the_default_limit_is_sixteen_mebibytes() {
        assert_eq!(DEFAULT_MAX_EVENT, 16 * 1024 * 1024);
    }
}
