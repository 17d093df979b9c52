//! Argument completion (`completion/complete`) for the prompt and template that take arguments.
//!
//! Candidates are fixed lists filtered by the typed prefix, so a test can predict every answer.

use serde_json::{Value, json};

use crate::catalog::resources::TEMPLATE;

const PROMPT_CANDIDATES: &[&str] = &["paris", "park", "party", "test-value"];
const ID_CANDIDATES: &[&str] = &["1", "2", "3", "123"];

/// The `CompleteResult` for `params` (unknown references complete to nothing).
pub fn complete(params: &Value) -> Value {
    let reference = params.get("ref");
    let kind = reference
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str);
    let argument = params
        .get("argument")
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str);
    let typed = params
        .get("argument")
        .and_then(|a| a.get("value"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let candidates: &[&str] = match (kind, argument) {
        (Some("ref/prompt"), Some("arg1" | "arg2"))
            if reference
                .and_then(|r| r.get("name"))
                .and_then(Value::as_str)
                == Some("test_prompt_with_arguments") =>
        {
            PROMPT_CANDIDATES
        }
        (Some("ref/resource"), Some("id"))
            if reference.and_then(|r| r.get("uri")).and_then(Value::as_str) == Some(TEMPLATE) =>
        {
            ID_CANDIDATES
        }
        _ => &[],
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|c| c.starts_with(typed))
        .collect();
    json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_filtered_by_prefix() {
        let params = json!({
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "par"},
        });
        assert_eq!(
            complete(&params),
            json!({"completion": {"values": ["paris", "park", "party"], "total": 3, "hasMore": false}})
        );
        let params = json!({
            "ref": {"type": "ref/resource", "uri": TEMPLATE},
            "argument": {"name": "id", "value": "1"},
        });
        assert_eq!(
            complete(&params)["completion"]["values"],
            json!(["1", "123"])
        );
        assert_eq!(complete(&json!({}))["completion"]["values"], json!([]));
    }
}
