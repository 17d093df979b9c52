//! A nesting-depth guard for JSON text.
//!
//! serde_json refuses deep nesting when it builds values, but raw pass-through never builds them,
//! so a depth bomb must be caught by a cheap byte scan before anything else looks at the text.

/// The deepest nesting of arrays and objects Manifold accepts in one message.
pub const MAX_JSON_DEPTH: usize = 128;

/// Returns the maximum nesting depth of `text`, stopping early once `limit` is exceeded.
///
/// Strings are skipped (with their escapes), so brackets inside strings do not count. The scan does
/// not validate JSON; it only bounds the work a later parser will do.
pub fn max_depth(text: &[u8], limit: usize) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut in_string = false;
    let mut escaped = false;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nesting_and_ignores_brackets_in_strings() {
        assert_eq!(max_depth(br#"{"a":[1,{"b":2}]}"#, 100), 3);
        assert_eq!(max_depth(br#"{"a":"[[[[\"{{{"}"#, 100), 1);
        assert_eq!(max_depth(b"42", 100), 0);
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
