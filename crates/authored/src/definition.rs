//! What an authored tool is: the fields a user gives `manifold_create_tool`, each checked with a
//! clear error before anything is stored, and the tool definition clients list. Every bound is a
//! named constant here, so the instructions and the errors quote the same numbers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::dependencies::{self, Dependency};
pub use crate::language::Language;

/// Longest tool name (the limit clients put on exposed names).
pub const MAX_NAME_LEN: usize = 64;
pub const MAX_TITLE_BYTES: usize = 256;
pub const MAX_DESCRIPTION_BYTES: usize = 8 * 1024;
/// Largest input or output schema, as JSON text.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
pub const MAX_ANNOTATIONS_BYTES: usize = 4 * 1024;
pub const MAX_CODE_BYTES: usize = 256 * 1024;
/// Shortest and longest run a tool may ask for, and what it gets when it does not say.
pub const MIN_TIMEOUT_MS: u64 = 100;
pub const MAX_TIMEOUT_MS: u64 = 10 * 60 * 1000;
pub const DEFAULT_TIMEOUT_MS: u64 = 30 * 1000;

/// An authored tool as stored: what a client lists plus how it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDefinition {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    pub language: Language,
    pub code: String,
    #[serde(default)]
    pub dependencies: Vec<String>,
    pub timeout_ms: u64,
}

/// Why a definition was refused; nothing is stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct Invalid {
    pub field: &'static str,
    pub reason: String,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Invalid {
    Invalid {
        field,
        reason: reason.into(),
    }
}

/// Whether `name` may name an authored tool: `[A-Za-z0-9_-]`, 1 to [`MAX_NAME_LEN`] characters.
pub fn check_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(invalid(
            "name",
            format!("must be 1 to {MAX_NAME_LEN} characters, not {}", name.len()),
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(invalid(
            "name",
            format!("{name:?} has {bad:?}; use letters, digits, '_' and '-' only"),
        ));
    }
    Ok(())
}

fn text_field(
    args: &Map<String, Value>,
    field: &'static str,
    max: usize,
) -> Result<Option<String>, Invalid> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() > max => Err(invalid(
            field,
            format!("is {} bytes; at most {max}", s.len()),
        )),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(invalid(
            field,
            format!("must be a string, not {}", kind(other)),
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks a schema against the JSON Schema 2020-12 meta-schema (no remote `$ref` is fetched) and
/// that it describes an object, as MCP requires of both schemas.
fn check_schema(field: &'static str, schema: &Value) -> Result<(), Invalid> {
    let size = schema.to_string().len();
    if size > MAX_SCHEMA_BYTES {
        return Err(invalid(
            field,
            format!("is {size} bytes; at most {MAX_SCHEMA_BYTES}"),
        ));
    }
    if !schema.is_object() {
        return Err(invalid(
            field,
            format!("must be a JSON Schema object, not {}", kind(schema)),
        ));
    }
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(invalid(field, "must have \"type\": \"object\""));
    }
    if let Err(e) = jsonschema::draft202012::meta::validate(schema) {
        return Err(invalid(
            field,
            format!(
                "is not a valid JSON Schema 2020-12: {e} (at {})",
                pointer_or_root(&e.instance_path.to_string())
            ),
        ));
    }
    if let Err(e) = jsonschema::draft202012::new(schema) {
        return Err(invalid(field, format!("cannot be compiled: {e}")));
    }
    Ok(())
}

fn pointer_or_root(pointer: &str) -> String {
    if pointer.is_empty() {
        "the root".to_owned()
    } else {
        pointer.to_owned()
    }
}

/// The annotations MCP defines: booleans, plus a title.
fn check_annotations(annotations: &Value) -> Result<(), Invalid> {
    let Some(map) = annotations.as_object() else {
        return Err(invalid(
            "annotations",
            format!("must be an object, not {}", kind(annotations)),
        ));
    };
    if annotations.to_string().len() > MAX_ANNOTATIONS_BYTES {
        return Err(invalid(
            "annotations",
            format!("at most {MAX_ANNOTATIONS_BYTES} bytes"),
        ));
    }
    for (key, value) in map {
        match key.as_str() {
            "readOnlyHint" | "destructiveHint" | "idempotentHint" | "openWorldHint" => {
                if !value.is_boolean() {
                    return Err(invalid(
                        "annotations",
                        format!("{key} must be true or false"),
                    ));
                }
            }
            "title" if value.is_string() => {}
            other => {
                return Err(invalid(
                    "annotations",
                    format!(
                        "{other:?} is not one of title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The fields a create or update may carry; anything else is a mistake worth naming.
const FIELDS: &[&str] = &[
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "language",
    "code",
    "dependencies",
    "timeout",
];

impl ToolDefinition {
    /// A definition from `manifold_create_tool`'s arguments, or, with `base`, the definition
    /// `manifold_update_tool`'s arguments make of it (fields given replace the old; `null`
    /// removes an optional one). Everything is checked; the first problem is the error.
    #[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
    pub fn from_arguments(
        args: &Value,
        base: Option<&ToolDefinition>,
    ) -> Result<ToolDefinition, Invalid> {
        let Some(map) = args.as_object() else {
            return Err(invalid(
                "arguments",
                format!("must be an object, not {}", kind(args)),
            ));
        };
        if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(invalid(
                "arguments",
                format!(
                    "{unknown:?} is not a field; the fields are {}",
                    FIELDS.join(", ")
                ),
            ));
        }
        let name = match (text_field(map, "name", MAX_NAME_LEN * 4)?, base) {
            (Some(name), _) => name,
            (None, Some(base)) => base.name.clone(),
            (None, None) => return Err(invalid("name", "is required")),
        };
        check_name(&name)?;
        let title = match (map.contains_key("title"), base) {
            (true, _) | (false, None) => text_field(map, "title", MAX_TITLE_BYTES)?,
            (false, Some(b)) => b.title.clone(),
        };
        let description = match (text_field(map, "description", MAX_DESCRIPTION_BYTES)?, base) {
            (Some(d), _) => d,
            (None, Some(b)) => b.description.clone(),
            (None, None) => return Err(invalid("description", "is required")),
        };
        if description.trim().is_empty() {
            return Err(invalid(
                "description",
                "is empty; say what the tool does, so a model knows when to call it",
            ));
        }
        let input_schema = match (map.get("inputSchema"), base) {
            (Some(s), _) if !s.is_null() => s.clone(),
            (_, Some(b)) => b.input_schema.clone(),
            (_, None) => serde_json::json!({"type": "object", "properties": {}}),
        };
        check_schema("inputSchema", &input_schema)?;
        let output_schema = match (map.get("outputSchema"), base) {
            (Some(Value::Null), _) => None,
            (Some(s), _) => Some(s.clone()),
            (None, Some(b)) => b.output_schema.clone(),
            (None, None) => None,
        };
        if let Some(schema) = &output_schema {
            check_schema("outputSchema", schema)?;
        }
        let annotations = match (map.get("annotations"), base) {
            (Some(Value::Null), _) => None,
            (Some(a), _) => Some(a.clone()),
            (None, Some(b)) => b.annotations.clone(),
            (None, None) => None,
        };
        if let Some(a) = &annotations {
            check_annotations(a)?;
        }
        let language = match (map.get("language"), base) {
            (Some(Value::String(l)), _) => Language::parse(l).ok_or_else(|| {
                invalid("language", format!("{l:?} is not one of python, node, sh"))
            })?,
            (Some(other), _) => {
                return Err(invalid(
                    "language",
                    format!(
                        "must be \"python\", \"node\" or \"sh\", not {}",
                        kind(other)
                    ),
                ));
            }
            (None, Some(b)) => b.language,
            (None, None) => return Err(invalid("language", "is required: python, node or sh")),
        };
        let code = match (text_field(map, "code", MAX_CODE_BYTES)?, base) {
            (Some(c), _) => c,
            (None, Some(b)) => b.code.clone(),
            (None, None) => return Err(invalid("code", "is required")),
        };
        if code.trim().is_empty() {
            return Err(invalid("code", "is empty"));
        }
        let dependencies = match (map.get("dependencies"), base) {
            (Some(Value::Null), _) => Vec::new(),
            (Some(Value::Array(items)), _) => items
                .iter()
                .map(|d| {
                    d.as_str().map(str::to_owned).ok_or_else(|| {
                        invalid("dependencies", format!("must be strings, not {}", kind(d)))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            (Some(other), _) => {
                return Err(invalid(
                    "dependencies",
                    format!("must be an array of strings, not {}", kind(other)),
                ));
            }
            (None, Some(b)) => b.dependencies.clone(),
            (None, None) => Vec::new(),
        };
        dependencies::parse_all(language, &dependencies)
            .map_err(|reason| invalid("dependencies", reason))?;
        let timeout_ms = match (map.get("timeout"), base) {
            (Some(Value::Number(n)), _) => {
                let seconds = n.as_f64().unwrap_or(-1.0);
                let ms = (seconds * 1000.0).round();
                if !(ms >= MIN_TIMEOUT_MS as f64 && ms <= MAX_TIMEOUT_MS as f64) {
                    return Err(invalid(
                        "timeout",
                        format!(
                            "is {n} seconds; give {} to {} seconds",
                            MIN_TIMEOUT_MS as f64 / 1000.0,
                            MAX_TIMEOUT_MS / 1000
                        ),
                    ));
                }
                ms as u64
            }
            (Some(Value::Null), _) | (None, None) => DEFAULT_TIMEOUT_MS,
            (Some(other), _) => {
                return Err(invalid(
                    "timeout",
                    format!("must be a number of seconds, not {}", kind(other)),
                ));
            }
            (None, Some(b)) => b.timeout_ms,
        };
        Ok(ToolDefinition {
            name,
            title,
            description,
            input_schema,
            output_schema,
            annotations,
            language,
            code,
            dependencies,
            timeout_ms,
        })
    }

    /// The parsed dependencies (checked when the definition was made).
    pub fn parsed_dependencies(&self) -> Vec<Dependency> {
        dependencies::parse_all(self.language, &self.dependencies).unwrap_or_default()
    }

    /// The definition `tools/list` shows: name, title, description, schemas, annotations.
    pub fn listing(&self) -> Value {
        let mut tool = Map::new();
        tool.insert("name".into(), Value::String(self.name.clone()));
        if let Some(t) = &self.title {
            tool.insert("title".into(), Value::String(t.clone()));
        }
        tool.insert(
            "description".into(),
            Value::String(self.description.clone()),
        );
        tool.insert("inputSchema".into(), self.input_schema.clone());
        if let Some(s) = &self.output_schema {
            tool.insert("outputSchema".into(), s.clone());
        }
        if let Some(a) = &self.annotations {
            tool.insert("annotations".into(), a.clone());
        }
        Value::Object(tool)
    }

    /// The fields as `manifold_tool_history` shows a version (the code included).
    pub fn shown(&self) -> Value {
        let mut shown = self.listing();
        if let Some(map) = shown.as_object_mut() {
            map.insert(
                "language".into(),
                Value::String(self.language.as_str().into()),
            );
            map.insert("code".into(), Value::String(self.code.clone()));
            map.insert(
                "dependencies".into(),
                Value::from(self.dependencies.clone()),
            );
            map.insert(
                "timeout".into(),
                serde_json::json!(self.timeout_ms as f64 / 1000.0),
            );
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> Value {
        json!({"name": "add", "description": "Adds", "language": "python", "code": "print(1)"})
    }

    #[test]
    fn a_minimal_definition_gets_an_empty_object_schema_and_the_default_timeout() {
        let d = ToolDefinition::from_arguments(&minimal(), None).unwrap();
        assert_eq!(d.input_schema, json!({"type": "object", "properties": {}}));
        assert_eq!(d.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(d.listing()["name"], "add");
        assert!(d.listing().get("code").is_none());
    }

    #[test]
    fn an_update_replaces_what_it_gives_and_null_removes_an_optional_field() {
        let mut args = minimal();
        args["title"] = json!("Add");
        let base = ToolDefinition::from_arguments(&args, None).unwrap();
        let next = ToolDefinition::from_arguments(
            &json!({"code": "print(2)", "title": null}),
            Some(&base),
        )
        .unwrap();
        assert_eq!(next.code, "print(2)");
        assert_eq!(next.title, None);
        assert_eq!(next.description, "Adds");
    }

    #[test]
    fn each_field_is_checked_with_its_own_error() {
        let cases: Vec<(Value, &str, &str)> = vec![
            (json!({"name": "a b"}), "name", "' '"),
            (
                json!({"name": "x".repeat(MAX_NAME_LEN + 1)}),
                "name",
                "1 to 64",
            ),
            (json!({"language": "ruby"}), "language", "ruby"),
            (
                json!({"inputSchema": {"type": "string"}}),
                "inputSchema",
                "\"type\": \"object\"",
            ),
            (
                json!({"inputSchema": {"type": "object", "minProperties": -1}}),
                "inputSchema",
                "2020-12",
            ),
            (
                json!({"outputSchema": {"type": "array"}}),
                "outputSchema",
                "\"type\": \"object\"",
            ),
            (
                json!({"annotations": {"readOnlyHint": "yes"}}),
                "annotations",
                "true or false",
            ),
            (json!({"timeout": 0.01}), "timeout", "seconds"),
            (json!({"dependencies": ["requests"]}), "dependencies", "=="),
            (
                json!({"code": "x".repeat(MAX_CODE_BYTES + 1)}),
                "code",
                "at most",
            ),
            (json!({"description": " "}), "description", "empty"),
            (json!({"color": "red"}), "arguments", "not a field"),
            (
                json!({"title": "t".repeat(MAX_TITLE_BYTES + 1)}),
                "title",
                "at most",
            ),
            (
                json!({"description": "d".repeat(MAX_DESCRIPTION_BYTES + 1)}),
                "description",
                "at most",
            ),
            (
                json!({"inputSchema": {"type": "object", "description": "s".repeat(MAX_SCHEMA_BYTES)}}),
                "inputSchema",
                "at most",
            ),
            (
                json!({"annotations": {"title": "a".repeat(MAX_ANNOTATIONS_BYTES)}}),
                "annotations",
                "at most",
            ),
            (json!({"timeout": 601}), "timeout", "seconds"),
        ];
        for (patch, field, words) in cases {
            let mut args = minimal();
            for (k, v) in patch.as_object().unwrap() {
                args[k] = v.clone();
            }
            let e = ToolDefinition::from_arguments(&args, None).unwrap_err();
            assert_eq!(e.field, field, "{patch}: {e}");
            assert!(e.to_string().contains(words), "{patch}: {e}");
        }
    }

    #[test]
    fn a_stored_definition_round_trips() {
        let d = ToolDefinition::from_arguments(&minimal(), None).unwrap();
        let text = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<ToolDefinition>(&text).unwrap(), d);
    }
}
