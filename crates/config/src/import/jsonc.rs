//! VS Code's `mcp.json` and `settings.json` are JSON with comments and trailing commas; this
//! turns them into plain JSON. Every comment character and trailing comma becomes as many spaces
//! as it has bytes (newlines stay), so each remaining byte keeps its offset and the line and
//! column of a JSON error are those of the file as the user sees it.

/// A `/*` comment that runs to the end of the text: named here, where it is known, because the
/// JSON reader would only see spaces and complain about the end of the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a /* comment starting at line {line}, column {column} is never closed")]
pub struct UnclosedComment {
    /// 1-based, as in the JSON reader's errors.
    pub line: usize,
    /// 1-based byte column, as in the JSON reader's errors.
    pub column: usize,
}

/// Removes `//` and `/* */` comments and trailing commas outside strings, and a leading BOM.
pub fn strip_jsonc(text: &str) -> Result<String, UnclosedComment> {
    let text = text.trim_start_matches('\u{feff}');
    let uncommented = without_comments(text).map_err(|at| {
        let before = text.get(..at).unwrap_or_default();
        UnclosedComment {
            line: before.matches('\n').count() + 1,
            column: at - before.rfind('\n').map_or(0, |n| n + 1) + 1,
        }
    })?;
    Ok(without_trailing_commas(&uncommented))
}

/// Spaces for `c`, one per byte, or the newline itself.
fn blank(c: char, out: &mut String) {
    if c == '\n' {
        out.push('\n');
    } else {
        out.extend(std::iter::repeat_n(' ', c.len_utf8()));
    }
}

/// The text with its comments blanked, or the byte offset of a block comment never closed.
fn without_comments(text: &str) -> Result<String, usize> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    let mut in_string = false;
    while let Some((at, c)) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek().map(|(_, n)| *n)) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                out.push(' ');
                while let Some(&(_, n)) = chars.peek() {
                    if n == '\n' {
                        break;
                    }
                    chars.next();
                    blank(n, &mut out);
                }
            }
            ('/', Some('*')) => {
                chars.next();
                out.push_str("  ");
                let mut previous = ' ';
                let mut closed = false;
                for (_, n) in chars.by_ref() {
                    blank(n, &mut out);
                    if previous == '*' && n == '/' {
                        closed = true;
                        break;
                    }
                    previous = n;
                }
                if !closed {
                    return Err(at);
                }
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

fn without_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            out.push(c);
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = chars
                .get(i + 1..)
                .unwrap_or_default()
                .iter()
                .find(|n| !n.is_whitespace());
            if matches!(next, Some('}' | ']')) {
                out.push(' ');
                continue;
            }
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_go_strings_stay() {
        let text = "\u{feff}{\n  // a comment\n  \"a\": \"x // not a comment, /* nor this */\", /* block\n comment */ \"b\": [1, 2,],\n}";
        let json: serde_json::Value = serde_json::from_str(&strip_jsonc(text).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"a": "x // not a comment, /* nor this */", "b": [1, 2]})
        );
        assert_eq!(
            strip_jsonc(text).unwrap().lines().count(),
            text.lines().count()
        );
    }

    #[test]
    fn escaped_quotes_do_not_end_strings() {
        let text = r#"{"a": "say \"hi\", // still string", }"#;
        let json: serde_json::Value = serde_json::from_str(&strip_jsonc(text).unwrap()).unwrap();
        assert_eq!(json["a"], "say \"hi\", // still string");
    }
}
