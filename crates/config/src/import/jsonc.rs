//! VS Code's `mcp.json` and `settings.json` are JSON with comments and trailing commas; this
//! turns them into plain JSON (comments become spaces, so line numbers in errors still match).

/// Removes `//` and `/* */` comments and trailing commas outside strings, and a leading BOM.
pub(crate) fn strip_jsonc(text: &str) -> String {
    without_trailing_commas(&without_comments(text.trim_start_matches('\u{feff}')))
}

fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(escaped) = chars.next() {
                    out.push(escaped);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                while let Some(&n) = chars.peek() {
                    if n == '\n' {
                        break;
                    }
                    chars.next();
                    out.push(' ');
                }
                out.push(' ');
            }
            ('/', Some('*')) => {
                chars.next();
                out.push_str("  ");
                let mut previous = ' ';
                for n in chars.by_ref() {
                    out.push(if n == '\n' { '\n' } else { ' ' });
                    if previous == '*' && n == '/' {
                        break;
                    }
                    previous = n;
                }
            }
            _ => out.push(c),
        }
    }
    out
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
        let json: serde_json::Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"a": "x // not a comment, /* nor this */", "b": [1, 2]})
        );
        assert_eq!(strip_jsonc(text).lines().count(), text.lines().count());
    }

    #[test]
    fn escaped_quotes_do_not_end_strings() {
        let text = r#"{"a": "say \"hi\", // still string", }"#;
        let json: serde_json::Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(json["a"], "say \"hi\", // still string");
    }
}
