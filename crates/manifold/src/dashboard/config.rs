//! The configuration: the one in force, as loaded (secrets print as `<redacted>`), and the file,
//! to edit in the page: `check` shows what `manifold check` would (each problem with its line and
//! column) and the diff against the file; `apply` writes the file, and serve's own watch of the
//! file reloads it, exactly as an edit in a text editor would.
//!
//! A literal secret in the file (an `env` or `headers` value, a key, token or password written
//! out rather than as `${env:NAME}`) is not put in the page: its value is replaced by
//! [`REDACTED_MARK`], and a text that still holds the mark is refused, so applying a page never
//! writes the mark over a secret.

use std::path::Path;
use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use toml_edit::{DocumentMut, Item, Value};

use super::page::{self, Chrome};
use super::signin::Operator;
use super::state::DashboardState;

/// What stands in the page for a secret written in the file.
pub const REDACTED_MARK: &str = "<redacted: write the value or a ${env:NAME} reference>";
/// Key names whose string values are secrets wherever they appear.
const SECRET_WORDS: &[&str] = &[
    "secret",
    "token",
    "password",
    "key",
    "authorization",
    "credential",
];
/// Tables whose every string value is a secret.
const SECRET_TABLES: &[&str] = &["env", "headers"];

fn is_reference(text: &str) -> bool {
    let t = text.trim();
    t.starts_with("${") && t.ends_with('}') && t.matches("${").count() == 1
}

fn secret_key(key: &str) -> bool {
    let k = key.to_lowercase();
    SECRET_WORDS.iter().any(|w| k.contains(w))
}

/// Replaces literal secrets in string values below `item`; how many were.
fn redact_item(item: &mut Item, inside_secret_table: bool, key: &str) -> usize {
    match item {
        Item::Table(t) => {
            let secret_table = inside_secret_table || SECRET_TABLES.contains(&key);
            t.iter_mut()
                .map(|(k, v)| redact_item(v, secret_table, k.get()))
                .sum()
        }
        Item::ArrayOfTables(a) => a
            .iter_mut()
            .map(|t| {
                t.iter_mut()
                    .map(|(k, v)| redact_item(v, false, k.get()))
                    .sum::<usize>()
            })
            .sum(),
        Item::Value(v) => redact_value(v, inside_secret_table || secret_key(key), key),
        Item::None => 0,
    }
}

fn redact_value(value: &mut Value, secret: bool, key: &str) -> usize {
    match value {
        Value::String(s)
            if (secret || (key.contains("url") && s.value().contains('@')))
                && !is_reference(s.value()) =>
        {
            let decor = s.decor().clone();
            let mut replaced = toml_edit::Formatted::new(REDACTED_MARK.to_owned());
            *replaced.decor_mut() = decor;
            *value = Value::String(replaced);
            1
        }
        Value::InlineTable(t) => {
            let secret_table = secret || SECRET_TABLES.contains(&key);
            t.iter_mut()
                .map(|(k, v)| redact_value(v, secret_table || secret_key(k.get()), k.get()))
                .sum()
        }
        Value::Array(a) => a.iter_mut().map(|v| redact_value(v, secret, key)).sum(),
        _ => 0,
    }
}

/// The file as the page may show it, and how many secrets were taken out.
pub fn redacted(text: &str) -> (String, usize) {
    let Ok(mut doc) = text.parse::<DocumentMut>() else {
        // Not TOML: nothing can be told apart, so nothing of it is shown.
        return (String::new(), 0);
    };
    let count = doc
        .as_table_mut()
        .iter_mut()
        .map(|(k, v)| redact_item(v, false, k.get()))
        .sum();
    (doc.to_string(), count)
}

#[derive(Template)]
#[template(path = "dashboard/config.html")]
struct ConfigPage {
    chrome: Chrome,
    path: String,
    running: String,
    text: String,
    redactions: usize,
    problems: Vec<String>,
    diff: Option<String>,
    applied: Option<String>,
}

fn file_text(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{} could not be read: {e}", path.display()))
}

fn render(
    state: &DashboardState,
    operator: &Operator,
    text: Option<String>,
    problems: Vec<String>,
    diff: Option<String>,
    applied: Option<String>,
) -> Response {
    let mut chrome = Chrome::new(operator, "Configuration", "config");
    let (path, shown, redactions) = match &state.config_path {
        Some(path) => match file_text(path) {
            Ok(t) => {
                let (r, n) = redacted(&t);
                (path.display().to_string(), r, n)
            }
            Err(e) => {
                chrome.error = Some(e);
                (path.display().to_string(), String::new(), 0)
            }
        },
        None => (String::new(), String::new(), 0),
    };
    page::render(
        StatusCode::OK,
        &ConfigPage {
            chrome,
            path,
            running: format!("{:#?}", state.running.get()),
            text: text.unwrap_or(shown),
            redactions,
            problems,
            diff,
            applied,
        },
    )
}

/// `GET /ui/config`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
) -> Response {
    render(&state, &operator, None, Vec::new(), None, None)
}

#[derive(Deserialize)]
pub struct Edited {
    #[serde(default)]
    config: String,
    #[serde(default)]
    action: String,
}

/// Writes `text` beside `path` and renames it over: a reader (serve's watch) sees the old
/// bytes or the new, never half.
fn replace_file(path: &Path, text: &str) -> Result<(), String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "manifold.toml".to_owned());
    let temporary = path.with_file_name(format!(".{name}.dashboard-{}", std::process::id()));
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            format!("{} was not changed: {e}", path.display())
        })
}

/// `POST /ui/config`: `action=check` or `action=apply`.
pub async fn submit(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Form(edited): Form<Edited>,
) -> Response {
    let Some(path) = state.config_path.clone() else {
        let problems = vec!["serve runs on built-in defaults, with no configuration file to write; start it with --config FILE (or from a directory holding manifold.toml) to edit one here".to_owned()];
        return render(&state, &operator, Some(edited.config), problems, None, None);
    };
    let text = edited.config.replace("\r\n", "\n");
    if text.contains(REDACTED_MARK) {
        let problems = vec![format!(
            "the text still holds {REDACTED_MARK:?} where the file has a secret; write each value (or a ${{env:NAME}} reference) in its place, then check again"
        )];
        return render(&state, &operator, Some(text), problems, None, None);
    }
    let before = file_text(&path).unwrap_or_default();
    let diff = super::catalog::diff(
        &redacted(&before).0,
        &redacted(&text).0,
        "the file now",
        "the edited text",
    );
    if let Err(errors) = crate::config_edit::validate(&text, &path) {
        let problems = errors
            .errors
            .iter()
            .map(|e| {
                let at = if e.line > 0 {
                    format!("line {}, column {}: ", e.line, e.column)
                } else {
                    String::new()
                };
                let field = if e.field.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", e.field)
                };
                let fix = if e.fix.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", e.fix)
                };
                format!("{at}{field}{}{fix}", e.problem)
            })
            .collect();
        return render(&state, &operator, Some(text), problems, Some(diff), None);
    }
    if edited.action != "apply" {
        return render(&state, &operator, Some(text), Vec::new(), Some(diff), None);
    }
    match replace_file(&path, &text) {
        Ok(()) => {
            tracing::info!(operator = %operator.name, file = %path.display(), "the configuration file was written from the dashboard");
            let applied = format!(
                "{} was written; the gateway reloads it within a few seconds (the overview shows the servers; settings that need a restart say so in the gateway's log)",
                path.display()
            );
            render(
                &state,
                &operator,
                None,
                Vec::new(),
                Some(diff),
                Some(applied),
            )
        }
        Err(e) => render(&state, &operator, Some(text), vec![e], Some(diff), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_secrets_are_taken_out_and_references_stay() {
        let file = r#"
[gateway]
session_key = "abcdef"

[servers.gh]
command = "gh-mcp"
env = { GITHUB_TOKEN = "ghp_literal", MODE = "x", REF = "${env:GH}" }

[servers.api]
url = "https://api.example/mcp"
headers = { Authorization = "Bearer s3cret" }

[store]
url = "postgres://u:pw@db/m"
"#;
        let (shown, count) = redacted(file);
        assert_eq!(count, 5, "{shown}");
        for secret in ["abcdef", "ghp_literal", "s3cret", "u:pw"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(
            shown.contains("${env:GH}") && shown.contains("gh-mcp"),
            "{shown}"
        );
        assert!(shown.contains("https://api.example/mcp"), "{shown}");
    }

    #[test]
    fn a_file_that_is_not_toml_is_not_shown() {
        assert_eq!(redacted("[servers\nkey = \"x\"").0, "");
    }
}
