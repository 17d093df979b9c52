//! The errors a configuration can produce, shaped for people: every problem names the file, line,
//! column and field, says what is wrong and what to write instead, and all problems of a file are
//! reported together so one `manifold check` run is enough to fix them.

use std::fmt;

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    /// The file (or the name the text was given), as the user named it.
    pub origin: String,
    /// 1-based line; 0 when the problem has no position (the file could not be read).
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The field path, e.g. `servers.git.timeout`; empty for problems of the whole file.
    pub field: String,
    /// The value as written in the file, already quoted (`"sixty"`), when it may be shown:
    /// never for sensitive fields (environment values, headers, keys).
    pub written: Option<String>,
    /// What is wrong.
    pub problem: String,
    /// What to write instead; may be empty.
    pub fix: String,
}

impl ConfigError {
    /// The compiler-style line: `file:line:col: error: field = value: problem; fix`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(&self.origin);
        if self.line > 0 {
            out.push_str(&format!(":{}:{}", self.line, self.column));
        }
        out.push_str(": error: ");
        if !self.field.is_empty() {
            out.push_str(&self.field);
            if let Some(w) = &self.written {
                out.push_str(" = ");
                out.push_str(w);
            }
            out.push_str(": ");
        }
        out.push_str(&self.problem);
        if !self.fix.is_empty() {
            out.push_str("; ");
            out.push_str(&self.fix);
        }
        out
    }

    /// The message without the location, as the tests and the `check` report quote it.
    pub fn message(&self) -> String {
        let rendered = self.render();
        match rendered.split_once(": error: ") {
            Some((_, rest)) => rest.to_owned(),
            None => rendered,
        }
    }
}

/// Every problem found in one configuration file, in file order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors {
    pub origin: String,
    pub errors: Vec<ConfigError>,
}

impl ConfigErrors {
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.errors.iter()
    }

    /// The messages (without locations), for tests and summaries.
    pub fn messages(&self) -> Vec<String> {
        self.errors.iter().map(ConfigError::message).collect()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.errors {
            writeln!(f, "{}", e.render())?;
        }
        let n = self.errors.len();
        write!(
            f,
            "{n} problem{} in {}; nothing was loaded",
            if n == 1 { "" } else { "s" },
            self.origin
        )
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

/// 1-based line and column (in characters) of a byte offset; offsets past the end or inside a
/// character clamp to the nearest valid position.
pub(crate) fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = text.get(..end).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).unwrap_or_default().chars().count() + 1;
    (line, column)
}

/// A problem with `manifold import`'s input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error(
        "{source_name}:{line}:{column}: error: not valid JSON ({reason}); import reads the JSON configuration of an MCP client (Claude Desktop, Cursor, Claude Code's .mcp.json, VS Code's mcp.json)"
    )]
    NotJson {
        source_name: String,
        line: usize,
        column: usize,
        reason: String,
    },
    #[error(
        "{source_name}: error: found no MCP servers: the JSON has no \"mcpServers\" object (Claude Desktop, Cursor, Claude Code) and no \"servers\" or \"mcp.servers\" object (VS Code); {found}"
    )]
    NoServers { source_name: String, found: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ConfigError {
        ConfigError {
            origin: "manifold.toml".into(),
            line: 3,
            column: 11,
            field: "servers.git.timeout".into(),
            written: Some("\"sixty\"".into()),
            problem: "not a duration".into(),
            fix: "write e.g. \"60s\" or \"2m\"".into(),
        }
    }

    #[test]
    fn renders_like_a_compiler() {
        assert_eq!(
            sample().to_string(),
            "manifold.toml:3:11: error: servers.git.timeout = \"sixty\": not a duration; write e.g. \"60s\" or \"2m\""
        );
        assert_eq!(
            sample().message(),
            "servers.git.timeout = \"sixty\": not a duration; write e.g. \"60s\" or \"2m\""
        );
    }

    #[test]
    fn positionless_and_fieldless_problems_render_without_them() {
        let e = ConfigError {
            line: 0,
            field: String::new(),
            written: None,
            fix: String::new(),
            problem: "could not read it".into(),
            ..sample()
        };
        assert_eq!(e.to_string(), "manifold.toml: error: could not read it");
    }

    #[test]
    fn the_list_ends_with_a_count() {
        let errors = ConfigErrors {
            origin: "manifold.toml".into(),
            errors: vec![sample(), sample()],
        };
        let text = errors.to_string();
        assert!(text.ends_with("\n2 problems in manifold.toml; nothing was loaded"));
        assert_eq!(text.lines().count(), 3);
    }

    #[test]
    fn positions_count_lines_and_characters() {
        let text = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_and_column(text, 0), (1, 1));
        assert_eq!(line_and_column(text, 6), (2, 1));
        // The quote after "bé = " is 6 bytes but 5 characters into the line.
        assert_eq!(line_and_column(text, 12), (2, 6));
        assert_eq!(line_and_column(text, 999), (3, 1));
        // Inside the two bytes of 'é': clamps back to its start.
        assert_eq!(line_and_column(text, 8), (2, 2));
    }
}
