//! Which of an upstream's tools are exposed: `tools.allow` and `tools.deny` glob patterns,
//! compiled once at load time so a bad pattern is a configuration error, not a runtime surprise.
//! Deny wins; an empty allow list allows everything.

use std::fmt;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// A compiled allow/deny filter over tool names.
#[derive(Clone)]
pub struct ToolFilter {
    allow: Vec<String>,
    deny: Vec<String>,
    allow_set: Option<GlobSet>,
    deny_set: Option<GlobSet>,
}

/// A pattern that does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// `allow` or `deny`.
    pub list: &'static str,
    pub index: usize,
    pub reason: String,
}

impl ToolFilter {
    /// Exposes every tool.
    pub fn allow_all() -> ToolFilter {
        ToolFilter {
            allow: Vec::new(),
            deny: Vec::new(),
            allow_set: None,
            deny_set: None,
        }
    }

    /// Compiles both lists, reporting every pattern that does not compile.
    pub fn new(allow: Vec<String>, deny: Vec<String>) -> Result<ToolFilter, Vec<PatternError>> {
        let mut errors = Vec::new();
        let allow_set = compile("allow", &allow, &mut errors);
        let deny_set = compile("deny", &deny, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ToolFilter {
            allow,
            deny,
            allow_set,
            deny_set,
        })
    }

    /// Whether the upstream tool `tool_name` (its own name, before any prefix) is exposed.
    pub fn allows(&self, tool_name: &str) -> bool {
        if self
            .deny_set
            .as_ref()
            .is_some_and(|deny| deny.is_match(tool_name))
        {
            return false;
        }
        match &self.allow_set {
            Some(allow) => allow.is_match(tool_name),
            None => true,
        }
    }

    pub fn allow_patterns(&self) -> &[String] {
        &self.allow
    }

    pub fn deny_patterns(&self) -> &[String] {
        &self.deny
    }

    /// Whether this filter exposes everything.
    pub fn is_allow_all(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

fn compile(
    list: &'static str,
    patterns: &[String],
    errors: &mut Vec<PatternError>,
) -> Option<GlobSet> {
    if patterns.is_empty() {
        return None;
    }
    let mut set = GlobSetBuilder::new();
    for (index, pattern) in patterns.iter().enumerate() {
        if pattern.is_empty() {
            errors.push(PatternError {
                list,
                index,
                reason: "an empty pattern matches no tool".to_owned(),
            });
            continue;
        }
        match GlobBuilder::new(pattern).literal_separator(false).build() {
            Ok(glob) => {
                set.add(glob);
            }
            Err(e) => errors.push(PatternError {
                list,
                index,
                reason: e.kind().to_string(),
            }),
        }
    }
    match set.build() {
        Ok(set) => Some(set),
        Err(e) => {
            errors.push(PatternError {
                list,
                index: 0,
                reason: e.kind().to_string(),
            });
            None
        }
    }
}

impl fmt::Debug for ToolFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolFilter")
            .field("allow", &self.allow)
            .field("deny", &self.deny)
            .finish()
    }
}

impl PartialEq for ToolFilter {
    fn eq(&self, other: &ToolFilter) -> bool {
        self.allow == other.allow && self.deny == other.deny
    }
}

impl Eq for ToolFilter {}

impl Default for ToolFilter {
    fn default() -> ToolFilter {
        ToolFilter::allow_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn patterns_are_globs_over_whole_names() {
        let f = filter(&["get_?", "{list,read}_*", "[ab]x", "a/*"], &[]);
        assert!(f.allows("get_x"));
        assert!(!f.allows("get_xy"));
        assert!(f.allows("list_files"));
        assert!(f.allows("read_file"));
        assert!(f.allows("bx"));
        assert!(!f.allows("cx"));
        // Tool names are not paths: * crosses '/'.
        assert!(f.allows("a/b/c"));
        assert!(!f.allows("Get_x"));
    }

    #[test]
    fn bad_patterns_are_all_reported() {
        let errors = ToolFilter::new(
            vec!["ok".into(), "[abc".into()],
            vec!["".into(), "{a".into()],
        )
        .unwrap_err();
        assert_eq!(
            errors,
            vec![
                PatternError {
                    list: "allow",
                    index: 1,
                    reason: "unclosed character class; missing ']'".into()
                },
                PatternError {
                    list: "deny",
                    index: 0,
                    reason: "an empty pattern matches no tool".into()
                },
                PatternError {
                    list: "deny",
                    index: 1,
                    reason: "unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?)"
                        .into()
                },
            ]
        );
    }
}
