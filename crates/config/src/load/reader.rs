//! Reading typed values out of the parsed TOML tree while collecting every problem, each with
//! its position and field path. Type checks, interpolation and "did you mean" live here so that
//! the section readers only say which keys exist and what they mean.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

use crate::did_you_mean::closest;
use crate::duration::parse_duration;
use crate::environment::Environment;
use crate::error::{ConfigError, ConfigErrors, line_and_column};
use crate::interpolate::interpolate;
use crate::paths::resolve_path;
use crate::secret::Secret;
use crate::toml_text::{is_bare_key, toml_string};

pub(crate) type Item<'i> = Spanned<DeValue<'i>>;

/// Every `[servers.NAME]` table's value of `key`, with the server's name: for the readers that
/// take one key of each server in a pass of their own (a server that is not a table, or has no
/// such key, is skipped; the servers' reader reports what is wrong with it).
pub(crate) fn each_server_value<'t, 'i>(
    root: &'t DeTable<'i>,
    key: &'t str,
) -> impl Iterator<Item = (&'t str, &'t Item<'i>)> {
    let servers = match root.get("servers").map(|i| i.get_ref()) {
        Some(DeValue::Table(table)) => Some(table),
        _ => None,
    };
    servers
        .into_iter()
        .flat_map(|table| table.iter())
        .filter_map(move |(name, item)| match item.get_ref() {
            DeValue::Table(server) => server
                .get(key)
                .map(|value| (name.get_ref().as_ref(), value)),
            _ => None,
        })
}
pub(crate) type Key<'i> = Spanned<DeString<'i>>;

/// Whether a value may be echoed in errors. Environment values, headers and keys never are:
/// they are secrets even when written literally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Show {
    Value,
    Hidden,
}

/// A string value as read.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    /// The field path, e.g. `servers.git.args[1]`.
    pub field: String,
    /// After interpolation.
    pub value: String,
    /// As written in the file (safe to echo for [`Show::Value`] fields).
    pub written: String,
    pub interpolated: bool,
    /// A reference was absent (a disabled server): the value cannot be judged.
    pub incomplete: bool,
    pub span: Range<usize>,
    pub show: Show,
}

impl Text {
    /// The quoted written form, when it may be shown.
    pub fn shown(&self) -> Option<String> {
        (self.show == Show::Value).then(|| quote(&self.written))
    }
}

/// One entry of a table of strings.
#[derive(Debug, Clone)]
pub(crate) struct MapEntry {
    pub key: String,
    pub key_span: Range<usize>,
    /// The field path of the entry, e.g. `servers.git.env.TOKEN`.
    pub path: String,
    pub text: Text,
}

/// Longest value echoed in an error.
const MAX_SHOWN_CHARS: usize = 60;

/// A TOML basic string for `s` (cut when long), as errors echo values.
pub(crate) fn quote(s: &str) -> String {
    let mut chars = s.chars();
    let shown: String = chars.by_ref().take(MAX_SHOWN_CHARS).collect();
    let quoted = toml_string(&shown);
    match (chars.next(), quoted.strip_suffix('"')) {
        (Some(_), Some(open)) => format!("{open}…\""),
        _ => quoted,
    }
}

/// `parent.key`, quoting keys that are not bare TOML keys.
pub(crate) fn key_path(parent: &str, key: &str) -> String {
    let key = if is_bare_key(key) {
        key.to_owned()
    } else {
        quote(key)
    };
    if parent.is_empty() {
        key
    } else {
        format!("{parent}.{key}")
    }
}

/// "a string", "an integer", ... for type errors.
fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a number",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// How a scalar value is echoed in an error.
fn written_scalar(v: &DeValue<'_>, show: Show) -> Option<String> {
    if show == Show::Hidden {
        return None;
    }
    match v {
        DeValue::String(s) => Some(quote(s)),
        DeValue::Integer(i) => Some(i.to_string()),
        DeValue::Float(f) => Some(f.to_string()),
        DeValue::Boolean(b) => Some(b.to_string()),
        DeValue::Datetime(d) => Some(d.to_string()),
        DeValue::Array(_) | DeValue::Table(_) => None,
    }
}

/// Collects problems while reading one file.
pub(crate) struct Reader<'t> {
    origin: String,
    text: &'t str,
    pub env: &'t dyn Environment,
    pub base_dir: Option<PathBuf>,
    problems: Vec<(usize, ConfigError)>,
    secrets: Vec<Secret>,
    /// Absent variables and files are not problems (while reading a disabled server).
    pub lenient: bool,
}

impl<'t> Reader<'t> {
    pub fn new(
        origin: &str,
        text: &'t str,
        env: &'t dyn Environment,
        base_dir: Option<&Path>,
    ) -> Reader<'t> {
        Reader {
            origin: origin.to_owned(),
            text,
            env,
            base_dir: base_dir.map(Path::to_path_buf),
            problems: Vec::new(),
            secrets: Vec::new(),
            lenient: false,
        }
    }

    pub fn problem_count(&self) -> usize {
        self.problems.len()
    }

    /// Records a problem at a byte span.
    pub fn report(
        &mut self,
        span: &Range<usize>,
        field: &str,
        written: Option<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let (line, column) = line_and_column(self.text, span.start);
        self.problems.push((
            span.start,
            ConfigError {
                origin: self.origin.clone(),
                line,
                column,
                field: field.to_owned(),
                written,
                problem: problem.into(),
                fix: fix.into(),
            },
        ));
    }

    /// Records a problem that has no place in the file (a default that could not be computed).
    pub fn report_unplaced(
        &mut self,
        field: &str,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.problems.push((
            0,
            ConfigError {
                origin: self.origin.clone(),
                line: 0,
                column: 0,
                field: field.to_owned(),
                written: None,
                problem: problem.into(),
                fix: fix.into(),
            },
        ));
    }

    /// Records a problem about a value, echoing it when allowed.
    pub fn report_value(
        &mut self,
        field: &str,
        item: &Item<'_>,
        show: Show,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let written = written_scalar(item.get_ref(), show);
        self.report(&item.span(), field, written, problem, fix);
    }

    /// Records a problem about a string already read; nothing when the string is incomplete
    /// (part of it is a reference that is absent, which a disabled server may have).
    pub fn report_text(
        &mut self,
        field: &str,
        text: &Text,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        if text.incomplete {
            return;
        }
        self.report(&text.span, field, text.shown(), problem, fix);
    }

    /// The secrets read, or every problem in file order.
    pub fn finish(self) -> Result<Vec<Secret>, ConfigErrors> {
        if self.problems.is_empty() {
            return Ok(self.secrets);
        }
        let mut problems = self.problems;
        problems.sort_by_key(|(offset, e)| (e.line != 0, *offset));
        Err(ConfigErrors {
            origin: self.origin,
            errors: problems.into_iter().map(|(_, e)| e).collect(),
        })
    }

    /// Reports every key of `table` that is not in `known`, with a hint or a suggestion.
    pub fn check_keys(
        &mut self,
        path: &str,
        table: &DeTable<'_>,
        known: &[&str],
        hints: &[(&str, &str)],
    ) {
        for (key, _) in table.iter() {
            let name: &str = key.get_ref();
            if known.contains(&name) {
                continue;
            }
            let field = key_path(path, name);
            let fix = if let Some((_, hint)) = hints.iter().find(|(k, _)| *k == name) {
                (*hint).to_owned()
            } else if let Some(near) = closest(name, known) {
                format!("did you mean {near:?}?")
            } else {
                format!("the keys here are {}", known.join(", "))
            };
            self.report(&key.span(), &field, None, "unknown key", fix);
        }
    }

    /// A table value, or a problem.
    pub fn table<'a, 'i>(
        &mut self,
        field: &str,
        item: &'a Item<'i>,
        fix: &str,
    ) -> Option<&'a DeTable<'i>> {
        match item.get_ref() {
            DeValue::Table(t) => Some(t),
            other => {
                let problem = format!("is {}, but must be a table", type_name(other));
                self.report_value(field, item, Show::Value, problem, fix);
                None
            }
        }
    }

    /// A string value, interpolated.
    pub fn string(
        &mut self,
        field: &str,
        item: &Item<'_>,
        show: Show,
        example: &str,
    ) -> Option<Text> {
        let DeValue::String(raw) = item.get_ref() else {
            let problem = format!("is {}, but must be a string", type_name(item.get_ref()));
            self.report_value(field, item, show, problem, example);
            return None;
        };
        let span = item.span();
        let written = raw.to_string();
        let shown = (show == Show::Value).then(|| quote(&written));
        match interpolate(&written, self.env, self.base_dir.as_deref(), self.lenient) {
            Ok(resolved) => {
                if resolved.interpolated {
                    self.secrets.push(Secret::new(resolved.value.clone()));
                }
                Some(Text {
                    field: field.to_owned(),
                    value: resolved.value,
                    written,
                    interpolated: resolved.interpolated,
                    incomplete: resolved.incomplete,
                    span,
                    show,
                })
            }
            Err(problems) => {
                for (problem, fix) in problems {
                    self.report(&span, field, shown.clone(), problem, fix);
                }
                None
            }
        }
    }

    pub fn boolean(&mut self, field: &str, item: &Item<'_>) -> Option<bool> {
        match item.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            DeValue::String(s) if matches!(s.as_ref(), "true" | "false") => {
                let fix = format!("write {s} without quotes");
                self.report_value(
                    field,
                    item,
                    Show::Value,
                    "is a string, but must be a boolean",
                    fix,
                );
                None
            }
            other => {
                let problem = format!("is {}, but must be a boolean", type_name(other));
                self.report_value(field, item, Show::Value, problem, "write true or false");
                None
            }
        }
    }

    pub fn integer(&mut self, field: &str, item: &Item<'_>, example: &str) -> Option<i64> {
        match item.get_ref() {
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.report_value(field, item, Show::Value, "is too large", example);
                    None
                }
            },
            DeValue::String(s) if s.trim().parse::<i64>().is_ok() => {
                let fix = format!("write {} without quotes", s.trim());
                self.report_value(
                    field,
                    item,
                    Show::Value,
                    "is a string, but must be an integer",
                    fix,
                );
                None
            }
            other => {
                let problem = format!("is {}, but must be an integer", type_name(other));
                self.report_value(field, item, Show::Value, problem, example);
                None
            }
        }
    }

    /// An array of strings; every bad element is reported (`field[i]`) and left out, so the
    /// good ones can still be checked further (each [`Text`] knows its own path).
    pub fn string_list(
        &mut self,
        field: &str,
        item: &Item<'_>,
        show: Show,
        example: &str,
    ) -> Option<Vec<Text>> {
        let DeValue::Array(items) = item.get_ref() else {
            let problem = format!(
                "is {}, but must be an array of strings",
                type_name(item.get_ref())
            );
            self.report_value(field, item, show, problem, example);
            return None;
        };
        Some(
            items
                .iter()
                .enumerate()
                .filter_map(|(i, element)| {
                    self.string(&format!("{field}[{i}]"), element, show, example)
                })
                .collect(),
        )
    }

    /// A table of strings (`env`, `headers`), keys in file-independent (sorted) order; bad
    /// entries are reported and left out.
    pub fn string_map(
        &mut self,
        field: &str,
        item: &Item<'_>,
        show: Show,
        example: &str,
    ) -> Option<Vec<MapEntry>> {
        let table = self.table(field, item, example)?;
        let mut out = Vec::with_capacity(table.len());
        for (key, value) in table.iter() {
            let path = key_path(field, key.get_ref());
            if let Some(text) = self.string(&path, value, show, example) {
                out.push(MapEntry {
                    key: key.get_ref().to_string(),
                    key_span: key.span(),
                    path,
                    text,
                });
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Some(out)
    }

    /// One of a fixed set of words.
    pub fn choice<T: Copy>(
        &mut self,
        field: &str,
        item: &Item<'_>,
        options: &[(&str, T)],
    ) -> Option<T> {
        let words: Vec<&str> = options.iter().map(|(w, _)| *w).collect();
        let listed = words
            .iter()
            .map(|w| format!("{w:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let text = self.string(field, item, Show::Value, &format!("write one of {listed}"))?;
        if let Some((_, v)) = options.iter().find(|(w, _)| *w == text.value) {
            return Some(*v);
        }
        let problem = format!("is not one of {}", words.join(", "));
        let fix = match closest(&text.value, &words).filter(|_| !text.interpolated) {
            Some(near) => format!("did you mean {near:?}?"),
            None => format!("write one of {listed}"),
        };
        self.report_text(field, &text, problem, fix);
        None
    }

    pub fn duration(&mut self, field: &str, item: &Item<'_>) -> Option<(Duration, Text)> {
        let text = self.string(
            field,
            item,
            Show::Value,
            "write a duration as a string, e.g. \"60s\" or \"2m\"",
        )?;
        match parse_duration(&text.value) {
            Ok(d) => Some((d, text)),
            Err(e) => {
                let shown_value = if text.interpolated {
                    "60"
                } else {
                    text.value.as_str()
                };
                let (problem, fix) = e.describe(shown_value);
                self.report_text(field, &text, problem, fix);
                None
            }
        }
    }

    /// A path value resolved against the configuration's directory.
    pub fn path(&mut self, field: &str, text: &Text) -> Option<PathBuf> {
        if text.incomplete {
            return Some(PathBuf::from(&text.value));
        }
        if text.value.is_empty() {
            self.report_text(field, text, "is empty", "write a path, or remove the key");
            return None;
        }
        match resolve_path(&text.value, self.env, self.base_dir.as_deref()) {
            Ok(p) => Some(p),
            Err((problem, fix)) => {
                self.report_text(field, text, problem, fix);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_escapes_and_cuts() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(quote("\u{1}"), "\"\\u0001\"");
        let long = "x".repeat(100);
        assert_eq!(quote(&long), format!("\"{}…\"", "x".repeat(60)));
        let just_fits = "x".repeat(MAX_SHOWN_CHARS);
        assert_eq!(quote(&just_fits), format!("\"{just_fits}\""));
    }

    #[test]
    fn key_paths_quote_odd_keys() {
        assert_eq!(key_path("", "servers"), "servers");
        assert_eq!(key_path("servers", "git"), "servers.git");
        assert_eq!(key_path("servers", "my server"), "servers.\"my server\"");
        assert_eq!(key_path("servers.a.env", "X.Y"), "servers.a.env.\"X.Y\"");
    }
}
