//! Which of an upstream's tools are offered (`[servers.NAME] tools.allow` / `tools.deny`): the
//! gateway applies it to every list the upstream sends, so the type is the gateway's, compiled
//! once (manifold-config builds it while loading, so a bad pattern is a configuration error, not a
//! surprise at run time). Deny wins; an empty allow list allows everything.

use crate::patterns::{BadPattern, NamePatterns};

/// A compiled allow/deny filter over an upstream's own tool names (before any prefix).
/// Compared and printed by its patterns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    allow: NamePatterns,
    deny: NamePatterns,
}

/// A pattern of one of the two lists that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tools.{list}: {bad}")]
pub struct FilterPatternError {
    /// `allow` or `deny`.
    pub list: &'static str,
    pub bad: BadPattern,
}

impl ToolFilter {
    /// Offers every tool.
    pub fn allow_all() -> ToolFilter {
        ToolFilter::default()
    }

    /// Compiles both lists, reporting every pattern that does not compile.
    pub fn new(
        allow: Vec<String>,
        deny: Vec<String>,
    ) -> Result<ToolFilter, Vec<FilterPatternError>> {
        let mut errors = Vec::new();
        let mut compile = |list: &'static str, patterns: Vec<String>| {
            NamePatterns::compile_all(patterns)
                .map_err(|bad| {
                    errors.extend(bad.into_iter().map(|bad| FilterPatternError { list, bad }));
                })
                .ok()
        };
        let allow = compile("allow", allow);
        let deny = compile("deny", deny);
        match (allow, deny) {
            (Some(allow), Some(deny)) => Ok(ToolFilter { allow, deny }),
            _ => Err(errors),
        }
    }

    /// Whether the upstream tool `tool_name` (its own name, before any prefix) is offered.
    pub fn allows(&self, tool_name: &str) -> bool {
        if self.deny.is_match(tool_name) {
            return false;
        }
        self.allow.is_empty() || self.allow.is_match(tool_name)
    }

    pub fn allow_patterns(&self) -> &[String] {
        self.allow.patterns()
    }

    pub fn deny_patterns(&self) -> &[String] {
        self.deny.patterns()
    }

    /// Whether this filter offers everything.
    pub fn is_allow_all(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::patterns::EMPTY_PATTERN;

    fn filter(allow: &[&str], deny: &[&str]) -> ToolFilter {
        ToolFilter::new(
            allow.iter().map(|s| (*s).to_owned()).collect(),
            deny.iter().map(|s| (*s).to_owned()).collect(),
        )
        .unwrap()
    }

    #[test]
    fn no_patterns_allow_everything() {
        let f = ToolFilter::allow_all();
        assert!(f.allows("anything"));
        assert!(f.is_allow_all());
    }

    #[test]
    fn allow_limits_and_deny_wins() {
        let f = filter(&["git_*", "read"], &["git_push*"]);
        assert!(f.allows("git_status"));
        assert!(f.allows("read"));
        assert!(!f.allows("reader"));
        assert!(!f.allows("git_push"));
        assert!(!f.allows("git_push_force"));
        assert!(!f.allows("write"));
    }

    #[test]
    fn deny_alone_allows_the_rest() {
        let f = filter(&[], &["dangerous_*", "rm"]);
        assert!(f.allows("safe"));
        assert!(!f.allows("dangerous_delete"));
        assert!(!f.allows("rm"));
    }

    #[test]
    fn filters_compare_and_print_by_their_patterns() {
        assert_eq!(filter(&["a*"], &["b"]), filter(&["a*"], &["b"]));
        assert_ne!(filter(&["a*"], &[]), filter(&[], &["a*"]));
        assert_eq!(
            format!("{:?}", filter(&["a*"], &["b"])),
            "ToolFilter { allow: [\"a*\"], deny: [\"b\"] }"
        );
    }

    #[test]
    fn bad_patterns_are_all_reported() {
        let errors = ToolFilter::new(
            vec!["ok".into(), "[abc".into()],
            vec!["".into(), "{a".into()],
        )
        .unwrap_err();
        let seen: Vec<(&str, Option<usize>, &str)> = errors
            .iter()
            .map(|e| (e.list, e.bad.index, e.bad.reason.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("allow", Some(1), "unclosed character class; missing ']'"),
                ("deny", Some(0), EMPTY_PATTERN),
                (
                    "deny",
                    Some(1),
                    "unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?)"
                ),
            ]
        );
    }
}
