//! A nesting-depth guard for JSON text.
//!
//! serde_json refuses deep nesting when it builds values, but raw pass-through never builds them,
//! so a depth bomb must be caught by a cheap byte scan before anything else looks at the text.

/// The deepest nesting of arrays and objects Manifold accepts in one message.
pub const MAX_JSON_DEPTH: usize = 128;

/// Returns the maximum nesting depth of `text`, stopping early once `limit` is exceeded.
///
/// Strings are skipped (with their escapes), so brackets inside strings do not count. The scan does
/// not validate JSON; it only bounds the work a later parser will do. It runs on every message, so
/// the inside of a string is crossed with `memchr` (a vectorised search for the next quote or
/// backslash) rather than byte by byte: a 32 KiB string argument costs a few hundred nanoseconds.
pub fn max_depth(text: &[u8], limit: usize) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut at = 0usize;
    while let Some(&b) = text.get(at) {
        at += 1;
        match b {
            b'"' => at = after_string(text, at),
            b'[' | b'{' => {
                depth += 1;
                if depth > deepest {
                    deepest = depth;
                    if deepest > limit {
                        return deepest;
                    }
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The offset just past the closing quote of the string whose contents start at `at` (or the end
/// of `text` when the string never closes).
fn after_string(text: &[u8], mut at: usize) -> usize {
    loop {
        let rest = text.get(at..).unwrap_or_default();
        match memchr::memchr2(b'"', b'\\', rest) {
            None => return text.len(),
            Some(i) => {
                let stop = at + i;
                if text.get(stop) == Some(&b'"') {
                    return stop + 1;
                }
                // A backslash: whatever it escapes (a quote included) is part of the string.
                at = stop + 2;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nesting_and_ignores_brackets_in_strings() {
        assert_eq!(max_depth(br#"{"a":[1,{"b":2}]}"#, 100), 3);
        assert_eq!(max_depth(br#"{"a":"[[[[\"{{{"}"#, 100), 1);
        assert_eq!(max_depth(b"42", 100), 0);
        assert_eq!(max_depth(br#"["a\\",["b\"]"]]"#, 100), 2);
        assert_eq!(max_depth(br#"["unterminated [[["#, 100), 1);
        assert_eq!(max_depth(br#"["ends in a backslash \"#, 100), 1);
    }

    #[test]
    fn agrees_with_a_byte_by_byte_scan() {
        fn naive(text: &[u8]) -> usize {
            let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
            for &b in text {
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_string = false;
                    }
                    continue;
                }
                match b {
                    b'"' => in_string = true,
                    b'[' | b'{' => {
                        depth += 1;
                        deepest = deepest.max(depth);
                    }
                    b']' | b'}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
            deepest
        }
        let pieces: [&[u8]; 8] = [b"[", b"]", b"{", b"}", b"\"", b"\\", b"x", b"\\\""];
        // Every sequence of up to five pieces: enough to cover escapes at string ends, quotes
        // after backslashes and brackets inside and outside strings.
        let mut stack: Vec<(Vec<u8>, usize)> = vec![(Vec::new(), 0)];
        while let Some((text, used)) = stack.pop() {
            assert_eq!(max_depth(&text, 1000), naive(&text), "{text:?}");
            if used < 5 {
                for p in pieces {
                    let mut next = text.clone();
                    next.extend_from_slice(p);
                    stack.push((next, used + 1));
                }
            }
        }
    }

    #[test]
    fn stops_early_past_the_limit() {
        let bomb = "[".repeat(1_000_000);
        assert_eq!(
            max_depth(bomb.as_bytes(), MAX_JSON_DEPTH),
            MAX_JSON_DEPTH + 1
        );
    }
}
