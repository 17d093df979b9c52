//! Typing `--arg key=value` by the tool's input schema.
//!
//! A shell gives only strings; a tool wants numbers, booleans, objects. The schema says which, so
//! `--arg count=3` becomes `3` for an integer property and `"3"` for a string one.

use serde_json::{Map, Value};

use crate::report::CliError;

/// Builds the arguments object from `--json-args` and `--arg` pairs (pairs win).
pub fn build(
    schema: Option<&Value>,
    json_args: Option<&str>,
    pairs: &[String],
) -> Result<Map<String, Value>, CliError> {
    let mut out = match json_args {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(CliError::usage(
                    "--json arguments must be a JSON object, like '{\"message\":\"hi\"}'",
                ));
            }
            Err(e) => {
                return Err(CliError::usage(format!(
                    "--json arguments are not valid JSON: {e}"
                )));
            }
        },
    };
    for pair in pairs {
        let (key, raw) = pair
            .split_once('=')
            .ok_or_else(|| CliError::usage(format!("--arg {pair:?} is not key=value")))?;
        let kind = schema
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get(key))
            .and_then(property_type);
        out.insert(key.to_owned(), typed(key, raw, kind.as_deref())?);
    }
    Ok(out)
}

/// The JSON type a property takes (the first non-null one of a type list).
fn property_type(prop: &Value) -> Option<String> {
    match prop.get("type")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .map(str::to_owned),
        _ => None,
    }
}

fn typed(key: &str, raw: &str, kind: Option<&str>) -> Result<Value, CliError> {
    let bad = |what: &str| {
        CliError::usage(format!(
            "--arg {key}={raw:?}: the tool's schema says {key} is {what}"
        ))
    };
    match kind {
        Some("integer") => raw
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| bad("an integer")),
        Some("number") => serde_json::from_str::<serde_json::Number>(raw)
            .map(Value::Number)
            .map_err(|_| bad("a number")),
        Some("boolean") => match raw {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(bad("a boolean (true or false)")),
        },
        Some("object") | Some("array") => {
            serde_json::from_str::<Value>(raw).map_err(|_| bad("JSON (an object or array)"))
        }
        Some("null") => Ok(Value::Null),
        _ => Ok(Value::String(raw.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_follow_the_schema() {
        let schema = json!({"properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
            "o": {"type": "object"}, "s": {"type": "string"}, "maybe": {"type": ["null", "integer"]}
        }});
        let pairs: Vec<String> = [
            "n=3",
            "x=2.5",
            "b=true",
            "o={\"k\":[1]}",
            "s=42",
            "free=hi",
            "maybe=7",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let got = build(Some(&schema), None, &pairs).unwrap();
        assert_eq!(
            Value::Object(got),
            json!({"n": 3, "x": 2.5, "b": true, "o": {"k": [1]}, "s": "42", "free": "hi", "maybe": 7})
        );
    }

    #[test]
    fn pairs_override_json_args_and_bad_values_are_named() {
        let schema = json!({"properties": {"n": {"type": "integer"}}});
        let got = build(
            Some(&schema),
            Some(r#"{"n":1,"m":"keep"}"#),
            &["n=2".to_string()],
        )
        .unwrap();
        assert_eq!(Value::Object(got), json!({"n": 2, "m": "keep"}));
        let err = build(Some(&schema), None, &["n=two".to_string()]).unwrap_err();
        assert!(err.message.contains("n is an integer"), "{}", err.message);
        assert!(build(None, Some("[1]"), &[]).is_err());
        assert!(build(None, None, &["novalue".to_string()]).is_err());
    }
}
