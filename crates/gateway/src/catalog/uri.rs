//! Namespaced resource URIs and templates: `{scheme-prefix}+{original}`, exactly reversible.
//!
//! A URI scheme may hold letters, digits, `+`, `-` and `.`, so `git+file:///repo/README.md` is still
//! a URI, a template stays a template (`git+file:///{path}`), and the server is read back from the
//! part before the first `+`. The scheme prefix is derived from the server's prefix.

/// The scheme-safe form of a server prefix: lowercase, `_` as `-`, starting with a letter.
pub fn scheme_prefix(prefix: &str) -> String {
    let mut out: String = prefix
        .chars()
        .map(|c| match c {
            'A'..='Z' => c.to_ascii_lowercase(),
            'a'..='z' | '0'..='9' | '-' | '.' => c,
            _ => '-',
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert(0, 'm');
    }
    out
}

/// The exposed URI (or URI template) of an upstream's URI.
pub fn expose(scheme_prefix: &str, original: &str) -> String {
    format!("{scheme_prefix}+{original}")
}

/// Splits an exposed URI into (scheme prefix, original URI).
pub fn split(exposed: &str) -> Option<(&str, &str)> {
    let (head, rest) = exposed.split_once('+')?;
    if head.is_empty() || rest.is_empty() || head.contains(':') {
        return None;
    }
    Some((head, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_and_templates_round_trip() {
        let p = scheme_prefix("Git_Server");
        assert_eq!(p, "git-server");
        for original in ["file:///repo/a+b.md", "test://item/{id}", "https://x/y?z=1"] {
            let e = expose(&p, original);
            assert_eq!(split(&e), Some((p.as_str(), original)));
        }
        assert_eq!(scheme_prefix("9lives"), "m9lives");
    }

    #[test]
    fn foreign_uris_do_not_split() {
        assert_eq!(split("file:///a+b"), None);
        assert_eq!(split("+x"), None);
        assert_eq!(split("plain"), None);
    }
}
