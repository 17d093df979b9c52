//! Writing TOML text by hand (for `import`, whose output carries comments a serializer cannot
//! place): strings and keys quoted exactly as TOML requires, and comment text that cannot break
//! out of its comment.

/// A TOML basic string.
pub(crate) fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether TOML allows `k` as a bare key (`A-Za-z0-9_-`, not empty).
pub(crate) fn is_bare_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A key, bare when TOML allows it.
pub(crate) fn toml_key(k: &str) -> String {
    if is_bare_key(k) {
        k.to_owned()
    } else {
        toml_string(k)
    }
}

/// Text safe inside a `#` comment: control characters (line breaks above all) become spaces.
pub(crate) fn comment_text(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_everything_toml_forbids() {
        assert_eq!(toml_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(toml_string("x\ny\u{7f}\u{0}"), "\"x\\ny\\u007F\\u0000\"");
    }

    #[test]
    fn keys_are_bare_only_when_allowed() {
        assert_eq!(toml_key("GITHUB_TOKEN"), "GITHUB_TOKEN");
        assert_eq!(toml_key("a.b"), "\"a.b\"");
        assert_eq!(toml_key(""), "\"\"");
    }

    #[test]
    fn comments_cannot_break_out() {
        assert_eq!(comment_text("a\nb\rc"), "a b c");
    }
}
