//! Glob patterns over names: the one compiler behind every list of patterns Manifold reads (rules,
//! tool sets, rate limits, a server's `tools.allow` / `tools.deny` and `idempotent_tools`), and
//! behind manifold-config's checks of them, so a pattern `manifold check` accepts is one the
//! gateway compiles, meaning the same thing.
//!
//! Names are not paths: `*` crosses `/`, and case counts. `?`, `[abc]` and `{a,b}` are globset's;
//! an empty pattern is refused, since it could only ever match an empty name.

use std::fmt;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Why an empty pattern is refused.
pub const EMPTY_PATTERN: &str = "an empty pattern matches nothing";

/// A pattern that does not compile, or a list that cannot be compiled as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pattern:?} is not a valid pattern ({reason})")]
pub struct BadPattern {
    /// Its place in the list; `None` when every pattern compiles but the list as a whole does
    /// not (`pattern` then holds the list, joined).
    pub index: Option<usize>,
    pub pattern: String,
    pub reason: String,
}

/// One pattern compiled, or the reason it cannot be.
fn glob(pattern: &str) -> Result<Glob, String> {
    if pattern.is_empty() {
        return Err(EMPTY_PATTERN.to_owned());
    }
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map_err(|e| e.kind().to_string())
}

/// A compiled list of patterns: a name matches when any pattern does; an empty list matches
/// nothing. Compared and printed by the patterns as written.
#[derive(Clone)]
pub struct NamePatterns {
    patterns: Vec<String>,
    set: GlobSet,
}

impl NamePatterns {
    /// No pattern: matches nothing.
    pub fn none() -> NamePatterns {
        NamePatterns {
            patterns: Vec::new(),
            set: GlobSet::empty(),
        }
    }

    /// Compiles `patterns`, refusing the first that does not compile: what the gateway needs,
    /// since the configuration reported every one already.
    pub fn compile(patterns: Vec<String>) -> Result<NamePatterns, BadPattern> {
        let mut builder = GlobSetBuilder::new();
        for (index, pattern) in patterns.iter().enumerate() {
            let compiled = glob(pattern).map_err(|reason| BadPattern {
                index: Some(index),
                pattern: pattern.clone(),
                reason,
            })?;
            builder.add(compiled);
        }
        build(patterns, &builder)
    }

    /// Compiles `patterns`, reporting every one that does not compile, in order: what a check
    /// that shows every problem at once needs.
    pub fn compile_all(patterns: Vec<String>) -> Result<NamePatterns, Vec<BadPattern>> {
        let mut builder = GlobSetBuilder::new();
        let mut bad = Vec::new();
        for (index, pattern) in patterns.iter().enumerate() {
            match glob(pattern) {
                Ok(compiled) => {
                    builder.add(compiled);
                }
                Err(reason) => bad.push(BadPattern {
                    index: Some(index),
                    pattern: pattern.clone(),
                    reason,
                }),
            }
        }
        if !bad.is_empty() {
            return Err(bad);
        }
        build(patterns, &builder).map_err(|e| vec![e])
    }

    /// Whether any pattern matches the whole of `name`.
    pub fn is_match(&self, name: &str) -> bool {
        !self.patterns.is_empty() && self.set.is_match(name)
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns as written.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

fn build(patterns: Vec<String>, builder: &GlobSetBuilder) -> Result<NamePatterns, BadPattern> {
    match builder.build() {
        Ok(set) => Ok(NamePatterns { patterns, set }),
        Err(e) => Err(BadPattern {
            index: None,
            pattern: patterns.join(", "),
            reason: e.kind().to_string(),
        }),
    }
}

impl Default for NamePatterns {
    fn default() -> NamePatterns {
        NamePatterns::none()
    }
}

impl fmt::Debug for NamePatterns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.patterns).finish()
    }
}

impl PartialEq for NamePatterns {
    fn eq(&self, other: &NamePatterns) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for NamePatterns {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn patterns(list: &[&str]) -> NamePatterns {
        NamePatterns::compile(list.iter().map(|s| (*s).to_owned()).collect()).unwrap()
    }

    #[test]
    fn patterns_are_globs_over_whole_names_where_star_crosses_slashes_and_case_counts() {
        let p = patterns(&["get_?", "{list,read}_*", "[ab]x", "a/*"]);
        assert!(p.is_match("get_x"));
        assert!(!p.is_match("get_xy"));
        assert!(p.is_match("list_files"));
        assert!(p.is_match("read_file"));
        assert!(p.is_match("bx"));
        assert!(!p.is_match("cx"));
        assert!(p.is_match("a/b/c"));
        assert!(!p.is_match("Get_x"));
        assert!(patterns(&["[*]"]).is_match("*"));
        assert!(!patterns(&["[*]"]).is_match("x"));
    }

    #[test]
    fn no_pattern_matches_nothing() {
        assert!(!NamePatterns::none().is_match(""));
        assert!(!patterns(&[]).is_match("anything"));
        assert_eq!(patterns(&[]), NamePatterns::default());
    }

    #[test]
    fn the_first_bad_pattern_or_every_one_is_reported() {
        let list = || vec!["ok".to_owned(), "[abc".to_owned(), String::new()];
        assert_eq!(
            NamePatterns::compile(list()).unwrap_err(),
            BadPattern {
                index: Some(1),
                pattern: "[abc".into(),
                reason: "unclosed character class; missing ']'".into()
            }
        );
        let all = NamePatterns::compile_all(list()).unwrap_err();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].index, Some(2));
        assert_eq!(all[1].reason, EMPTY_PATTERN);
        assert_eq!(
            all[0].to_string(),
            "\"[abc\" is not a valid pattern (unclosed character class; missing ']')"
        );
    }

    #[test]
    fn lists_compare_and_print_as_written() {
        assert_eq!(patterns(&["a*", "b"]), patterns(&["a*", "b"]));
        assert_ne!(patterns(&["a*"]), patterns(&["b*"]));
        assert_eq!(format!("{:?}", patterns(&["a*", "b"])), "[\"a*\", \"b\"]");
    }
}
