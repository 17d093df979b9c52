//! Human renderings of MCP results: tables for lists, text for content.
//!
//! Rendering parses results into `serde_json::Value` because it only displays them; nothing
//! rendered here is ever forwarded.

use std::fmt::Write as _;
use std::io::IsTerminal;

use serde_json::Value;

/// Styles text only when the stream is a terminal.
#[derive(Clone, Copy)]
pub struct Style {
    colour: bool,
}

impl Style {
    pub fn stdout() -> Style {
        Style {
            colour: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    pub fn bold(&self, s: &str) -> String {
        if self.colour {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    pub fn dim(&self, s: &str) -> String {
        if self.colour {
            format!("\x1b[2m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    pub fn red(&self, s: &str) -> String {
        if self.colour {
            format!("\x1b[31m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
}

fn one_line(s: &str, max: usize) -> String {
    let first = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if first.chars().count() <= max {
        first.to_owned()
    } else {
        let cut: String = first.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// A two-or-more-column table with a bold header; the last column is not padded.
pub fn table(style: Style, header: &[&str], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(cols) {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>, out: &mut String, bold: bool| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                let pad = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(cell.chars().count());
                let _ = write!(text, "{cell}{}  ", " ".repeat(pad));
            } else {
                text.push_str(cell);
            }
        }
        let text = text.trim_end().to_owned();
        out.push_str(&if bold { style.bold(&text) } else { text });
        out.push('\n');
    };
    line(
        header.iter().map(|h| (*h).to_owned()).collect(),
        &mut out,
        true,
    );
    for row in rows {
        line(row.clone(), &mut out, false);
    }
    out
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Rows for `list tools`.
pub fn tools(style: Style, items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|t| {
            vec![
                str_of(t, "name").to_owned(),
                one_line(str_of(t, "description"), 100),
            ]
        })
        .collect();
    table(style, &["NAME", "DESCRIPTION"], &rows)
}

/// Rows for `list resources`.
pub fn resources(style: Style, items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|r| {
            vec![
                str_of(r, "uri").to_owned(),
                str_of(r, "name").to_owned(),
                str_of(r, "mimeType").to_owned(),
            ]
        })
        .collect();
    table(style, &["URI", "NAME", "MIME TYPE"], &rows)
}

/// Rows for `list templates`.
pub fn templates(style: Style, items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|r| {
            vec![
                str_of(r, "uriTemplate").to_owned(),
                str_of(r, "name").to_owned(),
                one_line(str_of(r, "description"), 80),
            ]
        })
        .collect();
    table(style, &["URI TEMPLATE", "NAME", "DESCRIPTION"], &rows)
}

/// Rows for `list prompts`.
pub fn prompts(style: Style, items: &[Value]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|p| {
            let args = p
                .get("arguments")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|arg| {
                            let name = str_of(arg, "name");
                            if arg.get("required").and_then(Value::as_bool) == Some(true) {
                                name.to_owned()
                            } else {
                                format!("[{name}]")
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            vec![
                str_of(p, "name").to_owned(),
                args,
                one_line(str_of(p, "description"), 80),
            ]
        })
        .collect();
    table(style, &["NAME", "ARGUMENTS", "DESCRIPTION"], &rows)
}

/// One content block (tool results, prompt messages).
pub fn content_block(style: Style, block: &Value) -> String {
    match str_of(block, "type") {
        "text" => str_of(block, "text").to_owned(),
        "image" | "audio" => style.dim(&format!(
            "[{} {}, {} bytes of base64]",
            str_of(block, "type"),
            str_of(block, "mimeType"),
            str_of(block, "data").len()
        )),
        "resource_link" => style.dim(&format!(
            "[resource link {} {}]",
            str_of(block, "uri"),
            str_of(block, "name")
        )),
        "resource" => match block.get("resource") {
            Some(r) => resource_contents(style, r),
            None => String::new(),
        },
        other => style.dim(&format!("[{other} content] {}", block)),
    }
}

fn resource_contents(style: Style, r: &Value) -> String {
    match r.get("text").and_then(Value::as_str) {
        Some(t) => t.to_owned(),
        None => style.dim(&format!(
            "[blob {} {}, {} bytes of base64]",
            str_of(r, "uri"),
            str_of(r, "mimeType"),
            str_of(r, "blob").len()
        )),
    }
}

/// A tool result: its content, or its structured content when it has none.
pub fn tool_result(style: Style, result: &Value) -> String {
    let mut out = String::new();
    let content = result.get("content").and_then(Value::as_array);
    for block in content.into_iter().flatten() {
        out.push_str(&content_block(style, block));
        out.push('\n');
    }
    if content.is_none_or(|c| c.is_empty())
        && let Some(s) = result.get("structuredContent")
    {
        out.push_str(&serde_json::to_string_pretty(s).unwrap_or_default());
        out.push('\n');
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        out = format!("{}\n{out}", style.red("the tool reported an error:"));
    }
    out
}

/// A `resources/read` result.
pub fn read_result(style: Style, result: &Value) -> String {
    let mut out = String::new();
    for r in result
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push_str(&resource_contents(style, r));
        out.push('\n');
    }
    out
}

/// A `prompts/get` result.
pub fn prompt_result(style: Style, result: &Value) -> String {
    let mut out = String::new();
    if let Some(d) = result.get("description").and_then(Value::as_str) {
        out.push_str(&style.dim(d));
        out.push('\n');
    }
    for m in result
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = str_of(m, "role");
        let body = m
            .get("content")
            .map(|c| content_block(style, c))
            .unwrap_or_default();
        let _ = writeln!(out, "{}: {body}", style.bold(role));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAIN: Style = Style { colour: false };

    #[test]
    fn tables_align_columns() {
        let t = table(
            PLAIN,
            &["NAME", "DESCRIPTION"],
            &[
                vec!["a".into(), "first".into()],
                vec!["long-name".into(), "second".into()],
            ],
        );
        assert_eq!(
            t,
            "NAME       DESCRIPTION\na          first\nlong-name  second\n"
        );
    }

    #[test]
    fn tool_results_show_text_structure_and_errors() {
        let r = json!({"content":[{"type":"text","text":"hi"},{"type":"image","mimeType":"image/png","data":"AAAA"}]});
        assert_eq!(
            tool_result(PLAIN, &r),
            "hi\n[image image/png, 4 bytes of base64]\n"
        );
        let r = json!({"content":[],"structuredContent":{"sum":3}});
        assert_eq!(tool_result(PLAIN, &r), "{\n  \"sum\": 3\n}\n");
        let r = json!({"content":[{"type":"text","text":"boom"}],"isError":true});
        assert_eq!(
            tool_result(PLAIN, &r),
            "the tool reported an error:\nboom\n"
        );
    }

    #[test]
    fn prompts_list_marks_optional_arguments() {
        let p = prompts(
            PLAIN,
            &[
                json!({"name":"greet","arguments":[{"name":"who","required":true},{"name":"tone"}],"description":"Say hi"}),
            ],
        );
        assert_eq!(
            p,
            "NAME   ARGUMENTS   DESCRIPTION\ngreet  who [tone]  Say hi\n"
        );
    }
}
