//! Reading one top-level member of a JSON object without parsing what it holds.
//!
//! A message nested too deep to decode still deserves an error that carries its id, so the caller
//! waiting on that id is answered at once instead of timing out. This scan walks only the top
//! level, skipping nested values by counting brackets (outside strings), with no recursion.

/// Index just past the string starting at `start` (which must be a `"`).
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Index just past the value starting at `start`.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => string_end(bytes, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let mut i = start;
            while let Some(&b) = bytes.get(i) {
                if matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace() {
                    break;
                }
                i += 1;
            }
            Some(i)
        }
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The raw text of member `key` of the top-level object in `text`, if it can be found.
pub fn top_level_member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let bytes = text.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(bytes, i);
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, i)?;
        let name: String = serde_json::from_str(text.get(i..key_end)?).ok()?;
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(bytes, i + 1);
        let end = value_end(bytes, start)?;
        if name == key {
            return text.get(start..end);
        }
        i = skip_ws(bytes, end);
        match bytes.get(i) {
            Some(b',') => i += 1,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_member_after_deeply_nested_ones() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","result":{}"x{{"{},"id":42}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(top_level_member(&deep, "id"), Some("42"));
        assert_eq!(
            top_level_member(r#"{"a":"}","id":"s\"x"}"#, "id"),
            Some(r#""s\"x""#)
        );
        assert_eq!(top_level_member(r#"{"i\u0064":7}"#, "id"), Some("7"));
    }

    #[test]
    fn gives_up_quietly_on_broken_input() {
        for text in [
            "",
            "[",
            "{",
            r#"{"id"}"#,
            r#"{"a":[1,"id":2"#,
            r#"{"a":1 "id":2}"#,
            "{\"\\",
        ] {
            assert_eq!(top_level_member(text, "id"), None, "{text}");
        }
    }
}
