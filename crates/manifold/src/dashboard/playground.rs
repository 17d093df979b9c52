//! The playground: call any tool from a form made from its input schema, as the signed-in
//! operator or as any API key's identity (so an operator sees exactly what that caller's rules
//! allow), and read the result, the progress and the log lines the call produced.

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use manifold_gateway::Caller;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::as_caller::{caller_of_operator, list_all, request};
use super::page::{self, Chrome};
use super::signin::Operator;
use super::state::DashboardState;

/// The progress token the playground's calls carry.
const PROGRESS_TOKEN: &str = "dashboard-playground";

/// One input of the form.
pub struct Field {
    pub name: String,
    pub kind: String,
    pub required: bool,
    pub description: String,
    pub choices: Vec<String>,
    pub value: String,
}

/// What a call produced.
pub struct Outcome {
    pub result: String,
    pub is_error: bool,
    pub structured: Option<String>,
    pub progress: Vec<String>,
    pub log: Vec<String>,
}

#[derive(Template)]
#[template(path = "dashboard/playground.html")]
struct PlaygroundPage {
    chrome: Chrome,
    tools: Vec<String>,
    tool: String,
    identities: Vec<String>,
    chosen: String,
    fields: Vec<Field>,
    arguments: String,
    outcome: Option<Outcome>,
}

#[derive(Deserialize, Default)]
pub struct Chosen {
    #[serde(default)]
    tool: String,
    #[serde(default, rename = "as")]
    identity: String,
}

/// The identity a call is made as: the operator (`""`), or an active key's name.
async fn caller_for(
    state: &DashboardState,
    operator: &Operator,
    chosen: &str,
) -> Result<Option<Arc<Caller>>, String> {
    if chosen.is_empty() {
        return Ok(caller_of_operator(operator));
    }
    let keys = state.keys.list().await.map_err(|e| e.to_string())?;
    let key = keys
        .into_iter()
        .find(|k| k.name == chosen && k.is_active())
        .ok_or_else(|| {
            format!("there is no active API key named {chosen:?}; pick another identity")
        })?;
    Ok(Some(Arc::new(Caller {
        name: key.name,
        groups: key.groups,
        scopes: key.scopes,
        bearer: None,
    })))
}

async fn identities(state: &DashboardState) -> Vec<String> {
    let mut names: Vec<String> = state
        .keys
        .list()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|k| k.is_active())
        .map(|k| k.name)
        .collect();
    names.sort();
    names.dedup();
    names
}

fn kind_of(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string")
            .to_owned(),
        _ => "json".to_owned(),
    }
}

/// The form's inputs: one per top-level property of the input schema.
fn fields(tool: Option<&Value>, given: &Map<String, Value>) -> Vec<Field> {
    let Some(schema) = tool.and_then(|t| t.get("inputSchema")) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, p)| Field {
            name: name.clone(),
            kind: kind_of(p),
            required: required.contains(&name.as_str()),
            description: p
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            choices: p
                .get("enum")
                .and_then(Value::as_array)
                .map(|e| {
                    e.iter()
                        .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            // A field's value as typed, shown again after the call.
            value: given_text(given.get(name)),
        })
        .collect()
}

fn given_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The arguments from the form: the raw JSON when given, else each field by its schema's type.
fn arguments_from(form: &[(String, String)], fields: &[Field]) -> Result<Value, String> {
    let raw = form
        .iter()
        .find(|(k, _)| k == "arguments")
        .map(|(_, v)| v.trim())
        .unwrap_or_default();
    if !raw.is_empty() {
        let value: Value =
            serde_json::from_str(raw).map_err(|e| format!("the arguments are not JSON: {e}"))?;
        if !value.is_object() {
            return Err("the arguments must be a JSON object".to_owned());
        }
        return Ok(value);
    }
    let mut arguments = Map::new();
    for field in fields {
        let key = format!("arg.{}", field.name);
        let Some((_, text)) = form.iter().find(|(k, _)| *k == key) else {
            continue;
        };
        if text.is_empty() && field.kind != "boolean" {
            continue;
        }
        let value = match field.kind.as_str() {
            "string" => Value::String(text.clone()),
            "boolean" => Value::Bool(matches!(text.as_str(), "true" | "on")),
            "integer" => text
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("{}: {text:?} is not an integer", field.name))?,
            "number" => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("{}: {text:?} is not a number", field.name))?,
            _ => {
                serde_json::from_str(text).map_err(|e| format!("{}: not JSON: {e}", field.name))?
            }
        };
        arguments.insert(field.name.clone(), value);
    }
    Ok(Value::Object(arguments))
}

/// What the call's answer and notifications say, as text.
fn outcome_of(answered: super::as_caller::Answered) -> Outcome {
    let mut progress = Vec::new();
    let mut log = Vec::new();
    for n in &answered.notifications {
        let params: Value = n
            .params()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        match n.method() {
            Some("notifications/progress") => progress.push(format!(
                "{}{}{}",
                params
                    .get("progress")
                    .map(Value::to_string)
                    .unwrap_or_default(),
                params
                    .get("total")
                    .map(|t| format!(" of {t}"))
                    .unwrap_or_default(),
                params
                    .get("message")
                    .and_then(Value::as_str)
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default(),
            )),
            Some("notifications/message") => log.push(format!(
                "[{}] {}",
                params
                    .get("level")
                    .and_then(Value::as_str)
                    .unwrap_or("info"),
                params
                    .get("data")
                    .map(|d| d.as_str().map_or_else(|| d.to_string(), str::to_owned))
                    .unwrap_or_default(),
            )),
            _ => {}
        }
    }
    match answered.result {
        Ok(result) => {
            let texts: Vec<String> = result
                .get("content")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .map(|item| match item.get("text").and_then(Value::as_str) {
                            Some(t) => t.to_owned(),
                            None => serde_json::to_string_pretty(item).unwrap_or_default(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            Outcome {
                result: texts.join("\n"),
                is_error: result
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                structured: result
                    .get("structuredContent")
                    .map(|s| serde_json::to_string_pretty(s).unwrap_or_default()),
                progress,
                log,
            }
        }
        Err(error) => Outcome {
            result: error.message,
            is_error: true,
            structured: None,
            progress,
            log,
        },
    }
}

async fn render(
    state: &DashboardState,
    operator: &Operator,
    chosen: Chosen,
    given: Map<String, Value>,
    raw: String,
    outcome: Option<Outcome>,
    error: Option<String>,
) -> Response {
    let caller = caller_for(state, operator, &chosen.identity)
        .await
        .ok()
        .flatten()
        .or_else(|| caller_of_operator(operator));
    let listed = list_all(state, caller, "tools/list", "tools")
        .await
        .unwrap_or_default();
    let tool = listed
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(chosen.tool.as_str()));
    let fields = fields(tool, &given);
    let mut chrome = Chrome::new(operator, "Playground", "playground");
    if error.is_some() {
        chrome.error = error;
    }
    let tools = listed
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    page::render(
        StatusCode::OK,
        &PlaygroundPage {
            chrome,
            tools,
            tool: chosen.tool,
            identities: identities(state).await,
            chosen: chosen.identity,
            fields,
            arguments: raw,
            outcome,
        },
    )
}

/// `GET /ui/playground?tool=NAME&as=IDENTITY`.
pub async fn page(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Query(chosen): Query<Chosen>,
) -> Response {
    render(
        &state,
        &operator,
        chosen,
        Map::new(),
        String::new(),
        None,
        None,
    )
    .await
}

/// `POST /ui/playground`: makes the call and shows what it produced.
pub async fn call(
    State(state): State<Arc<DashboardState>>,
    Extension(operator): Extension<Arc<Operator>>,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let field = |k: &str| {
        form.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let chosen = Chosen {
        tool: field("tool"),
        identity: field("as"),
    };
    let raw = field("arguments");
    let caller = match caller_for(&state, &operator, &chosen.identity).await {
        Ok(c) => c,
        Err(e) => return render(&state, &operator, chosen, Map::new(), raw, None, Some(e)).await,
    };
    let listed = list_all(&state, caller.clone(), "tools/list", "tools")
        .await
        .unwrap_or_default();
    let tool = listed
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(chosen.tool.as_str()));
    let schema_fields = fields(tool, &Map::new());
    let arguments = match arguments_from(&form, &schema_fields) {
        Ok(a) => a,
        Err(e) => return render(&state, &operator, chosen, Map::new(), raw, None, Some(e)).await,
    };
    let params = json!({
        "name": chosen.tool,
        "arguments": arguments,
        "_meta": { "progressToken": PROGRESS_TOKEN },
    });
    let answered = request(&state, caller, "tools/call", &params).await;
    let given = arguments.as_object().cloned().unwrap_or_default();
    render(
        &state,
        &operator,
        chosen,
        given,
        raw,
        Some(outcome_of(answered)),
        None,
    )
    .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn fields_follow_the_schema_and_values_take_its_types() {
        let tool = json!({"inputSchema": {"type": "object", "required": ["text"], "properties": {
            "text": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
            "loud": {"type": "boolean"}, "tags": {"type": "array"}, "mode": {"type": "string", "enum": ["a", "b"]}
        }}});
        let f = fields(Some(&tool), &Map::new());
        assert_eq!(f.len(), 6);
        assert!(f.iter().any(|f| f.name == "text" && f.required));
        assert!(
            f.iter()
                .any(|f| f.name == "mode" && f.choices == ["a", "b"])
        );
        let args = arguments_from(
            &form(&[
                ("arg.text", "hi"),
                ("arg.n", "3"),
                ("arg.x", "1.5"),
                ("arg.loud", "on"),
                ("arg.tags", "[1]"),
                ("arg.mode", ""),
            ]),
            &f,
        )
        .unwrap();
        assert_eq!(
            args,
            json!({"text": "hi", "n": 3, "x": 1.5, "loud": true, "tags": [1]})
        );
        let bad = arguments_from(&form(&[("arg.n", "three")]), &f).unwrap_err();
        assert!(bad.contains("n: \"three\" is not an integer"), "{bad}");
    }

    #[test]
    fn raw_json_wins_and_must_be_an_object() {
        let f = fields(
            Some(&json!({"inputSchema": {"properties": {"a": {"type": "string"}}}})),
            &Map::new(),
        );
        let args = arguments_from(
            &form(&[("arguments", r#"{"a": "raw"}"#), ("arg.a", "field")]),
            &f,
        )
        .unwrap();
        assert_eq!(args, json!({"a": "raw"}));
        assert!(
            arguments_from(&form(&[("arguments", "[1]")]), &f)
                .unwrap_err()
                .contains("object")
        );
        assert!(
            arguments_from(&form(&[("arguments", "{")]), &f)
                .unwrap_err()
                .contains("not JSON")
        );
    }
}
