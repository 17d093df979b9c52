//! Finds the top-level `"id"` of a JSON-RPC response fed in pieces, without keeping it.
//!
//! A line over the framer's limit is discarded, but the call it answered must still fail at once
//! rather than wait for its timeout: that needs the line's id, read while its bytes stream past.
//! The scan keeps a few bytes of state (nesting depth, string and escape flags, the current key
//! while it is short enough to matter, the id's own text up to [`MAX_SCANNED_ID`]), so memory
//! stays bounded however long the line is. A top-level `"method"` makes the line a request or a
//! notification from the server, whose id is the server's and names no call: then no id is
//! reported.

use crate::id::Id;

/// The longest id text the scan keeps; a longer id is not one Manifold minted, so the scan gives
/// up on it.
pub const MAX_SCANNED_ID: usize = 256;

/// The longest top-level key the scan tells apart (`method`, `result`).
const MAX_KEY: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the opening `{`.
    Start,
    /// Inside the top-level object, expecting a key, `,` or `}`.
    BeforeKey,
    /// Inside a top-level key.
    InKey {
        escaped: bool,
    },
    /// After a key, expecting `:`.
    BeforeColon,
    /// After `:`, expecting a value.
    BeforeValue,
    /// Inside the `id` value: a string or a bare scalar.
    InIdString {
        escaped: bool,
    },
    InIdScalar,
    /// Skipping another member's value.
    SkipString {
        escaped: bool,
    },
    SkipScalar,
    SkipNested {
        depth: usize,
        in_string: bool,
        escaped: bool,
    },
    /// Found, or gave up.
    Done,
}

/// A streaming scan for the top-level id of one JSON object.
#[derive(Debug, Clone)]
pub struct TopLevelIdScan {
    state: State,
    /// The current key while it is at most [`MAX_KEY`] bytes and unescaped.
    key: Vec<u8>,
    key_readable: bool,
    value_is_id: bool,
    id_text: Vec<u8>,
    /// The id, once read; reported when the line is known to be a response.
    id: Option<Id>,
    saw_outcome: bool,
    saw_method: bool,
    found: Option<Id>,
}

impl Default for TopLevelIdScan {
    fn default() -> Self {
        TopLevelIdScan::new()
    }
}

impl TopLevelIdScan {
    pub fn new() -> TopLevelIdScan {
        TopLevelIdScan {
            state: State::Start,
            key: Vec::with_capacity(MAX_KEY),
            key_readable: true,
            value_is_id: false,
            id_text: Vec::new(),
            id: None,
            saw_outcome: false,
            saw_method: false,
            found: None,
        }
    }

    /// Whether the scan has its answer (an id, or the certainty there is none to read).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The id, once read.
    pub fn id(&self) -> Option<&Id> {
        self.found.as_ref()
    }

    /// Feeds the next bytes of the object.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.state == State::Done {
                return;
            }
            self.state = self.step(b);
        }
    }

    /// At the end of the object's bytes: a bare-scalar id ends there too.
    pub fn finish(&mut self) {
        if self.state == State::Done {
            return;
        }
        if self.state == State::InIdScalar {
            self.settle_id();
        }
        self.state = self.conclude();
    }

    /// The object ended: an id without a `method` is a response's.
    fn conclude(&mut self) -> State {
        if !self.saw_method {
            self.found = self.id.take();
        }
        State::Done
    }

    /// After a member: done early once the line is known to be a response with an id, or a
    /// message that is not one.
    fn after_member(&mut self) -> State {
        if self.saw_method {
            return State::Done;
        }
        if self.saw_outcome && self.id.is_some() {
            return self.conclude();
        }
        State::BeforeKey
    }

    fn step(&mut self, b: u8) -> State {
        match self.state {
            State::Start if b.is_ascii_whitespace() => State::Start,
            State::Start if b == b'{' => State::BeforeKey,
            State::Start => State::Done,
            State::BeforeKey if b.is_ascii_whitespace() || b == b',' => State::BeforeKey,
            State::BeforeKey if b == b'"' => {
                self.key.clear();
                self.key_readable = true;
                State::InKey { escaped: false }
            }
            State::BeforeKey if b == b'}' => self.conclude(),
            State::BeforeKey => State::Done,
            State::InKey { escaped: true } => {
                // An escaped key is never one of the plain names the scan looks for.
                self.key_readable = false;
                State::InKey { escaped: false }
            }
            State::InKey { escaped: false } => match b {
                b'\\' => State::InKey { escaped: true },
                b'"' => {
                    self.classify_key();
                    if self.saw_method {
                        return State::Done;
                    }
                    // The outcome's value, however long, cannot change whose answer this is.
                    if self.saw_outcome && self.id.is_some() {
                        return self.conclude();
                    }
                    State::BeforeColon
                }
                _ => {
                    if self.key_readable && self.key.len() < MAX_KEY {
                        self.key.push(b);
                    } else {
                        self.key_readable = false;
                    }
                    State::InKey { escaped: false }
                }
            },
            State::BeforeColon if b.is_ascii_whitespace() => State::BeforeColon,
            State::BeforeColon if b == b':' => State::BeforeValue,
            State::BeforeColon => State::Done,
            State::BeforeValue if b.is_ascii_whitespace() => State::BeforeValue,
            State::BeforeValue => self.start_value(b),
            State::InIdString { escaped } => {
                if !self.keep_id_byte(b) {
                    return State::Done;
                }
                match (escaped, b) {
                    (true, _) => State::InIdString { escaped: false },
                    (false, b'\\') => State::InIdString { escaped: true },
                    (false, b'"') => {
                        self.settle_id();
                        self.after_member()
                    }
                    _ => State::InIdString { escaped: false },
                }
            }
            State::InIdScalar => {
                if b == b',' || b.is_ascii_whitespace() {
                    self.settle_id();
                    return self.after_member();
                }
                if b == b'}' {
                    self.settle_id();
                    return self.conclude();
                }
                if self.keep_id_byte(b) {
                    State::InIdScalar
                } else {
                    State::Done
                }
            }
            State::SkipString { escaped } => match (escaped, b) {
                (true, _) => State::SkipString { escaped: false },
                (false, b'\\') => State::SkipString { escaped: true },
                (false, b'"') => self.after_member(),
                _ => State::SkipString { escaped: false },
            },
            State::SkipScalar if b == b',' || b.is_ascii_whitespace() => self.after_member(),
            State::SkipScalar if b == b'}' => self.conclude(),
            State::SkipScalar => State::SkipScalar,
            State::SkipNested {
                depth,
                in_string,
                escaped,
            } => match skip_nested(depth, in_string, escaped, b) {
                State::BeforeKey => self.after_member(),
                next => next,
            },
            State::Done => State::Done,
        }
    }

    fn classify_key(&mut self) {
        let key: &[u8] = if self.key_readable { &self.key } else { b"" };
        self.value_is_id = key == b"id";
        self.saw_outcome |= key == b"result" || key == b"error";
        self.saw_method |= key == b"method";
    }

    fn start_value(&mut self, b: u8) -> State {
        if self.value_is_id {
            self.id_text.clear();
            self.id_text.push(b);
            return match b {
                b'"' => State::InIdString { escaped: false },
                b'{' | b'[' => State::Done,
                _ => State::InIdScalar,
            };
        }
        match b {
            b'"' => State::SkipString { escaped: false },
            b'{' | b'[' => State::SkipNested {
                depth: 1,
                in_string: false,
                escaped: false,
            },
            _ => State::SkipScalar,
        }
    }

    /// Keeps one byte of the id's text; false once it is longer than any id worth reading.
    fn keep_id_byte(&mut self, b: u8) -> bool {
        if self.id_text.len() >= MAX_SCANNED_ID {
            return false;
        }
        self.id_text.push(b);
        true
    }

    fn settle_id(&mut self) {
        self.id = std::str::from_utf8(&self.id_text)
            .ok()
            .and_then(|t| Id::from_raw(t).ok());
    }
}

/// One byte of a nested object or array being skipped; its end returns to the top level.
fn skip_nested(depth: usize, in_string: bool, escaped: bool, b: u8) -> State {
    let next = |depth, in_string, escaped| State::SkipNested {
        depth,
        in_string,
        escaped,
    };
    if in_string {
        return match (escaped, b) {
            (true, _) => next(depth, true, false),
            (false, b'\\') => next(depth, true, true),
            (false, b'"') => next(depth, false, false),
            _ => next(depth, true, false),
        };
    }
    match b {
        b'"' => next(depth, true, false),
        b'{' | b'[' => next(depth.saturating_add(1), false, false),
        b'}' | b']' if depth <= 1 => State::BeforeKey,
        b'}' | b']' => next(depth - 1, false, false),
        _ => next(depth, false, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_in_pieces(json: &str, piece: usize) -> Option<Id> {
        let mut s = TopLevelIdScan::new();
        for chunk in json.as_bytes().chunks(piece.max(1)) {
            s.feed(chunk);
        }
        s.finish();
        s.id().cloned()
    }

    #[test]
    fn finds_the_id_before_or_after_a_large_result_in_any_piece_size() {
        let big = format!(
            "{{\"items\":[{}]}}",
            "{\"id\":9,\"s\":\"}\\\"{\"},".repeat(50) + "0"
        );
        let cases = [
            (
                format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{big}}}"),
                Id::Num(7),
            ),
            (
                format!("{{\"result\":{big}, \"id\" : \"a\\\"b\"}}"),
                Id::from("a\"b"),
            ),
            (
                format!("{{\"result\":[{big}],\"jsonrpc\":\"2.0\",\"id\":-3}}"),
                Id::Num(-3),
            ),
            ("{\"ids\":1,\"i\":2,\"id\":12}".to_owned(), Id::Num(12)),
        ];
        for (json, id) in cases {
            for piece in [1, 2, 7, 4096] {
                assert_eq!(scan_in_pieces(&json, piece), Some(id.clone()), "{json}");
            }
        }
    }

    #[test]
    fn the_id_of_a_request_or_notification_from_the_server_is_not_taken() {
        let request =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\",\"params\":{}}";
        let late_method = "{\"id\":1,\"params\":{\"result\":1},\"method\":\"x\"}";
        for json in [request, late_method] {
            for piece in [1, 3, 4096] {
                assert_eq!(scan_in_pieces(json, piece), None, "{json}");
            }
        }
        // An answer is known as one as soon as its id and its outcome have both gone by.
        let mut s = TopLevelIdScan::new();
        s.feed(b"{\"id\":3,\"result\":{\"tools\":[\"xx");
        assert!(s.is_done());
        assert_eq!(s.id(), Some(&Id::Num(3)));
    }

    #[test]
    fn nested_ids_and_unusable_ids_are_not_taken() {
        assert_eq!(scan_in_pieces("{\"result\":{\"id\":5}}", 3), None);
        assert_eq!(scan_in_pieces("{\"id\":null,\"result\":1}", 3), None);
        assert_eq!(scan_in_pieces("{\"id\":{\"n\":1}}", 3), None);
        assert_eq!(scan_in_pieces("[{\"id\":1}]", 3), None);
        assert_eq!(scan_in_pieces("not json", 3), None);
    }

    #[test]
    fn an_id_longer_than_the_bound_is_given_up_and_one_at_it_is_read() {
        let at = format!("\"{}\"", "x".repeat(MAX_SCANNED_ID - 2));
        let json = format!("{{\"id\":{at},\"result\":1}}");
        assert_eq!(
            scan_in_pieces(&json, 5),
            Some(Id::from(&at[1..at.len() - 1]))
        );
        let over = format!("\"{}\"", "x".repeat(MAX_SCANNED_ID));
        let json = format!("{{\"id\":{over},\"result\":1}}");
        assert_eq!(scan_in_pieces(&json, 5), None);
    }
}
