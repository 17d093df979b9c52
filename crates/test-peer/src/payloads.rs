//! Byte-exact payloads that the fidelity tool and the misbehaviours send.
//!
//! They are built as bytes, never through `serde_json::Value`, because the point of each one is a
//! form a JSON round trip would not preserve (number spellings, key order, escapes, invalid UTF-8,
//! nesting deeper than any parser's recursion limit, sizes past any sane line limit).

/// One mebibyte.
pub const MIB: usize = 1024 * 1024;

/// The `result` object of the `echo_raw` tool, as literal bytes.
///
/// It carries: an unknown top-level member before `isError`, numbers `1`, `1.0`, `1e2`, `-0`,
/// `1.50` and an integer past `u64`, keys out of alphabetical order, a vendor `_meta` key, and the
/// escapes `\u00e9`, `\"`, `\/`, a surrogate pair and `\t`.
pub const ECHO_RAW_RESULT: &[u8] = br#"{"content":[{"type":"text","text":"caf\u00e9 \"quoted\" \/slash\/ \ud83d\ude00 tab\tend"}],"zz_unknown":{"keep":[1,1.0,1e2,-0,1.50,100000000000000000000000000001]},"isError":false,"structuredContent":{"b":1,"a":1.0,"nested":{"z":null,"y":[]}},"_meta":{"com.example/vendor":"kept"}}"#;

/// Nesting depth of the depth-bomb result's `structuredContent.deep` value.
pub const DEPTH_BOMB_LEVELS: usize = 100_000;

/// `{"content":[..],"isError":false,"structuredContent":{"deep":[[[...]]]}}` with
/// [`DEPTH_BOMB_LEVELS`] nested arrays, the innermost one empty.
pub fn depth_bomb_result() -> Vec<u8> {
    let head = br#"{"content":[{"type":"text","text":"depth bomb"}],"isError":false,"structuredContent":{"deep":"#;
    let mut out = Vec::with_capacity(head.len() + 2 * DEPTH_BOMB_LEVELS + 2);
    out.extend_from_slice(head);
    out.resize(out.len() + DEPTH_BOMB_LEVELS, b'[');
    out.resize(out.len() + DEPTH_BOMB_LEVELS, b']');
    out.extend_from_slice(b"}}");
    out
}

/// A tool result whose text holds the two bytes 0xFF 0xFE, which are never valid UTF-8.
pub fn invalid_utf8_result() -> Vec<u8> {
    let mut out = br#"{"content":[{"type":"text","text":"invalid utf-8: "#.to_vec();
    out.extend_from_slice(&[0xFF, 0xFE]);
    out.extend_from_slice(br#" end"}],"isError":false}"#);
    out
}

/// Length of the over-long line, newline excluded.
pub const OVER_LONG_LINE_BYTES: usize = 20 * MIB;

/// A `notifications/message` whose serialised form is exactly [`OVER_LONG_LINE_BYTES`] long.
pub fn over_long_notification() -> Vec<u8> {
    let head = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"over-long-line","data":""#;
    let tail = br#""}}"#;
    let padding = OVER_LONG_LINE_BYTES.saturating_sub(head.len() + tail.len());
    let mut out = Vec::with_capacity(OVER_LONG_LINE_BYTES);
    out.extend_from_slice(head);
    out.resize(out.len() + padding, b'x');
    out.extend_from_slice(tail);
    out
}

/// A `tools/list` answer to `id_text` whose serialised form is exactly [`OVER_LONG_LINE_BYTES`]
/// long, the id last so that it lies past any limit below that length.
pub fn over_long_answer(id_text: &str) -> Vec<u8> {
    let head = br#"{"jsonrpc":"2.0","result":{"tools":[],"padding":""#;
    let tail = format!(r#""}},"id":{id_text}}}"#);
    let padding = OVER_LONG_LINE_BYTES.saturating_sub(head.len() + tail.len());
    let mut out = Vec::with_capacity(OVER_LONG_LINE_BYTES);
    out.extend_from_slice(head);
    out.resize(out.len() + padding, b'x');
    out.extend_from_slice(tail.as_bytes());
    out
}

/// Length of the giant SSE event's text content.
pub const GIANT_TEXT_BYTES: usize = 20 * MIB;

/// A tool result whose single text content is [`GIANT_TEXT_BYTES`] of `x`.
pub fn giant_text_result() -> Vec<u8> {
    let head = br#"{"content":[{"type":"text","text":""#;
    let tail = br#""}],"isError":false}"#;
    let mut out = Vec::with_capacity(head.len() + GIANT_TEXT_BYTES + tail.len());
    out.extend_from_slice(head);
    out.resize(out.len() + GIANT_TEXT_BYTES, b'x');
    out.extend_from_slice(tail);
    out
}

/// The two lines `garbage-lines` writes before every response (newlines added by the writer).
pub const GARBAGE_LINES: [&[u8]; 2] = [b"this line is not JSON", b"{\"truncated\": "];

/// Id of the response `unknown-id` sends before the real one; no client is expected to use it.
pub const UNKNOWN_ID: u64 = 424_242_424;

/// Adds `"resultType":"complete"` as the last member of a raw result object, leaving every other
/// byte alone. A payload that does not end in `}` is returned unchanged.
pub fn with_result_type_complete(raw: &[u8]) -> Vec<u8> {
    match raw.split_last() {
        Some((b'}', body)) => {
            let mut out = Vec::with_capacity(raw.len() + 26);
            out.extend_from_slice(body);
            let is_empty_object =
                body.iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
            if !is_empty_object {
                out.push(b',');
            }
            out.extend_from_slice(br#""resultType":"complete"}"#);
            out
        }
        _ => raw.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn echo_raw_is_valid_json() {
        let parsed: serde_json::Value = serde_json::from_slice(ECHO_RAW_RESULT).unwrap();
        assert_eq!(
            parsed["content"][0]["text"],
            "caf\u{e9} \"quoted\" /slash/ \u{1F600} tab\tend"
        );
    }

    #[test]
    fn over_long_answer_has_the_exact_length_and_its_id_last() {
        let line = over_long_answer("7");
        assert_eq!(line.len(), OVER_LONG_LINE_BYTES);
        let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["id"], 7);
        assert!(line.ends_with(br#","id":7}"#));
    }

    #[test]
    fn over_long_line_has_the_exact_length_and_parses() {
        let line = over_long_notification();
        assert_eq!(line.len(), OVER_LONG_LINE_BYTES);
        let parsed: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(parsed["method"], "notifications/message");
    }

    #[test]
    fn depth_bomb_has_balanced_brackets() {
        let bomb = depth_bomb_result();
        let opens = bomb.iter().filter(|b| **b == b'[').count();
        let closes = bomb.iter().filter(|b| **b == b']').count();
        // The content array adds one pair.
        assert_eq!(opens, DEPTH_BOMB_LEVELS + 1);
        assert_eq!(closes, DEPTH_BOMB_LEVELS + 1);
    }

    #[test]
    fn invalid_utf8_result_is_not_utf8() {
        assert!(std::str::from_utf8(&invalid_utf8_result()).is_err());
    }

    #[test]
    fn result_type_is_appended_last() {
        assert_eq!(
            with_result_type_complete(br#"{"a":1}"#),
            br#"{"a":1,"resultType":"complete"}"#
        );
        assert_eq!(
            with_result_type_complete(b"{}"),
            br#"{"resultType":"complete"}"#
        );
    }
}
