//! The one rule for server names and prefixes, `[A-Za-z0-9_-]{1,32}`, shared by the loader (which
//! refuses other names) and `import` (which rewrites them), so both always agree.

/// Longest server name or prefix.
pub const MAX_NAME_LEN: usize = 32;

/// Whether `s` is a valid server name or tool prefix.
pub fn is_valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_LEN && s.chars().all(is_name_char)
}

pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The closest valid name: other characters become `_`, runs of `_` collapse, the result is cut
/// to [`MAX_NAME_LEN`]; an empty result is `server`.
pub fn sanitize_name(s: &str) -> String {
    let mut out = String::new();
    for c in s.trim().chars() {
        let c = if is_name_char(c) { c } else { '_' };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    let trimmed: String = out.trim_matches('_').chars().take(MAX_NAME_LEN).collect();
    if trimmed.is_empty() {
        "server".to_owned()
    } else {
        trimmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_rule() {
        assert!(is_valid_name("git"));
        assert!(is_valid_name("my-server_2"));
        assert!(is_valid_name(&"a".repeat(32)));
        assert!(!is_valid_name(&"a".repeat(33)));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("my.server"));
        assert!(!is_valid_name("my server"));
        assert!(!is_valid_name("ünï"));
    }

    #[test]
    fn sanitizing_gives_valid_names() {
        assert_eq!(sanitize_name("my.server"), "my_server");
        assert_eq!(sanitize_name("GitHub (work)"), "GitHub_work");
        assert_eq!(sanitize_name("@scope/pkg"), "scope_pkg");
        assert_eq!(sanitize_name("..."), "server");
        assert_eq!(sanitize_name(&"x".repeat(40)).len(), 32);
        for raw in ["a b", "ü", "", "x/y/z", "--ok--"] {
            assert!(is_valid_name(&sanitize_name(raw)), "{raw:?}");
        }
    }
}
