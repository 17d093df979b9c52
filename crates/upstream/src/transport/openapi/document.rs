//! An OpenAPI 3 document (JSON or YAML) read into the tools it offers: each operation one tool,
//! named after its `operationId` (else its method and path), its parameters and JSON request body
//! one input schema with every local `$ref` resolved. Total: a document that is not OpenAPI, or an
//! operation that cannot be read, is an error naming what and where, never a panic.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// Longest tool name made from an operation (the gateway's own limit for exposed names).
pub const MAX_OPERATION_NAME: usize = 64;
/// How deep `$ref`s are followed before a cycle is cut off.
pub const MAX_REF_DEPTH: usize = 32;
/// Most operations read from one document.
pub const MAX_OPERATIONS: usize = 1000;
/// The HTTP methods an OpenAPI path item may hold.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Why a document gives no tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("it is neither JSON nor YAML: {0}")]
    Unreadable(String),
    #[error("it is not an OpenAPI 3 document: {0}")]
    NotOpenApi(String),
    #[error("it has more than {MAX_OPERATIONS} operations")]
    TooLarge,
}

/// Where a parameter goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Path,
    Query,
    Header,
}

/// One parameter of an operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub location: Location,
}

/// One operation, as a tool and as the request it makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub tool: String,
    pub method: String,
    /// The path template, e.g. `/pets/{petId}`.
    pub path: String,
    pub parameters: Vec<Parameter>,
    /// Whether the operation takes a JSON body (the tool's `body` argument).
    pub has_body: bool,
    /// The tool definition `tools/list` carries.
    pub definition: Value,
}

/// The document's text as JSON (a YAML document is converted).
pub fn parse(text: &str) -> Result<Value, DocumentError> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Ok(v);
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(text)
        .map_err(|e| DocumentError::Unreadable(e.to_string()))?;
    let first = docs
        .into_iter()
        .next()
        .ok_or_else(|| DocumentError::Unreadable("the document is empty".to_owned()))?;
    Ok(yaml_to_json(first))
}

fn yaml_to_json(y: yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(r), Value::Number),
        Yaml::Integer(i) => json!(i),
        Yaml::String(s) => Value::String(s),
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Array(a) => Value::Array(a.into_iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.into_iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s,
                        Yaml::Integer(i) => i.to_string(),
                        Yaml::Real(r) => r,
                        Yaml::Boolean(b) => b.to_string(),
                        other => format!("{other:?}"),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
    }
}

/// The value a local `$ref` (`#/components/schemas/Pet`) points at.
fn pointed(document: &Value, reference: &str) -> Option<Value> {
    let pointer = reference.strip_prefix('#')?;
    document.pointer(pointer).cloned()
}

/// `value` with every local `$ref` replaced by what it points at, `depth` levels at most: a
/// cycle is cut off with a schema that says so, a remote `$ref` is left as it is (never fetched).
pub fn resolve(document: &Value, value: &Value, depth: usize) -> Value {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref")
                && r.starts_with('#')
            {
                if depth >= MAX_REF_DEPTH {
                    return json!({ "description": format!("(a {r} nested too deep to show)") });
                }
                return match pointed(document, r) {
                    Some(target) => resolve(document, &target, depth + 1),
                    None => json!({ "description": format!("(the reference {r} points nowhere)") }),
                };
            }
            Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), resolve(document, v, depth)))
                    .collect(),
            )
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| resolve(document, v, depth)).collect())
        }
        other => other.clone(),
    }
}

/// A tool name from an operation id, or from its method and path: `[A-Za-z0-9_-]`, at most
/// [`MAX_OPERATION_NAME`] characters (a longer one ends in a digest of the whole, so two long
/// names stay apart).
pub fn tool_name(operation_id: Option<&str>, method: &str, path: &str) -> String {
    let raw = operation_id.map_or_else(|| format!("{method}_{path}"), str::to_owned);
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while name.contains("__") {
        name = name.replace("__", "_");
    }
    let name = name.trim_matches('_').to_owned();
    let name = if name.is_empty() {
        format!("{method}_root")
    } else {
        name
    };
    if name.len() <= MAX_OPERATION_NAME {
        return name;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, raw.as_bytes());
    let tag: String = digest
        .as_ref()
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}_{tag}", &name[..MAX_OPERATION_NAME - tag.len() - 1])
}

fn annotations(method: &str) -> Value {
    json!({
        "readOnlyHint": matches!(method, "get" | "head" | "options"),
        "destructiveHint": method == "delete",
        "idempotentHint": matches!(method, "get" | "head" | "options" | "put" | "delete"),
        "openWorldHint": true,
    })
}

/// Every operation of `document`, in path order.
pub fn operations(document: &Value) -> Result<Vec<Operation>, DocumentError> {
    let version = document
        .get("openapi")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !version.starts_with('3') {
        return Err(DocumentError::NotOpenApi(
            "its \"openapi\" field is not a 3.x version (Swagger 2.0 documents can be converted with swagger2openapi)".to_owned(),
        ));
    }
    let Some(Value::Object(paths)) = document.get("paths") else {
        return Err(DocumentError::NotOpenApi(
            "it has no \"paths\" object".to_owned(),
        ));
    };
    let mut out = Vec::new();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for (path, item) in paths {
        let item = resolve(document, item, 0);
        let shared: Vec<Value> = item
            .get("parameters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for method in METHODS {
            let Some(op) = item.get(method) else {
                continue;
            };
            if out.len() >= MAX_OPERATIONS {
                return Err(DocumentError::TooLarge);
            }
            let mut tool = tool_name(op.get("operationId").and_then(Value::as_str), method, path);
            let seen = taken.entry(tool.clone()).or_insert(0);
            *seen += 1;
            if *seen > 1 {
                tool = format!("{tool}_{seen}");
            }
            out.push(operation(document, method, path, op, &shared, tool));
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
fn operation(
    document: &Value,
    method: &str,
    path: &str,
    op: &Value,
    shared: &[Value],
    tool: String,
) -> Operation {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut parameters = Vec::new();
    let own: Vec<Value> = op
        .get("parameters")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // An operation's parameter overrides the path item's of the same name and place.
    let mut all: Vec<Value> = Vec::new();
    for p in shared.iter().chain(own.iter()) {
        let p = resolve(document, p, 0);
        let key = (p.get("name").cloned(), p.get("in").cloned());
        all.retain(|q| (q.get("name").cloned(), q.get("in").cloned()) != key);
        all.push(p);
    }
    for p in all {
        let (Some(name), Some(place)) = (
            p.get("name").and_then(Value::as_str),
            p.get("in").and_then(Value::as_str),
        ) else {
            continue;
        };
        let location = match place {
            "path" => Location::Path,
            "query" => Location::Query,
            "header" => Location::Header,
            // Cookies are the browser's business; an API's own auth goes in `headers`.
            _ => continue,
        };
        let mut schema = p
            .get("schema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "string"}));
        if let (Some(d), Value::Object(s)) = (p.get("description"), &mut schema) {
            s.entry("description").or_insert_with(|| d.clone());
        }
        properties.insert(name.to_owned(), schema);
        if location == Location::Path || p.get("required").and_then(Value::as_bool).unwrap_or(false)
        {
            required.push(json!(name));
        }
        parameters.push(Parameter {
            name: name.to_owned(),
            location,
        });
    }
    let body = op
        .get("requestBody")
        .map(|b| resolve(document, b, 0))
        .and_then(|b| {
            let schema = b.pointer("/content/application~1json/schema").cloned()?;
            Some((
                schema,
                b.get("required").and_then(Value::as_bool).unwrap_or(false),
                b.get("description").cloned(),
            ))
        });
    let has_body = body.is_some();
    if let Some((mut schema, needed, description)) = body {
        if let (Some(d), Value::Object(s)) = (description, &mut schema) {
            s.entry("description").or_insert(d);
        }
        properties.insert("body".to_owned(), schema);
        if needed {
            required.push(json!("body"));
        }
    }
    let text = |k: &str| {
        op.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let description = match (text("summary"), text("description")) {
        (s, d) if s.is_empty() => d,
        (s, d) if d.is_empty() => s,
        (s, d) => format!("{s}\n\n{d}"),
    };
    let description = if description.is_empty() {
        format!("{} {path}", method.to_uppercase())
    } else {
        description
    };
    let mut definition = json!({
        "name": tool,
        "description": description,
        "inputSchema": { "type": "object", "properties": properties, "required": required },
        "annotations": annotations(method),
    });
    let summary = text("summary");
    if !summary.is_empty() {
        definition["title"] = json!(summary);
    }
    Operation {
        tool,
        method: method.to_owned(),
        path: path.to_owned(),
        parameters,
        has_body,
        definition,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const PETS: &str = r##"
openapi: 3.0.3
info: {title: Pets, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      summary: List pets
      parameters:
        - {name: limit, in: query, schema: {type: integer}}
    post:
      operationId: createPet
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Pet"}
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: string}, description: the id}
    get:
      summary: One pet
    delete: {}
components:
  schemas:
    Pet:
      type: object
      properties:
        name: {type: string}
        friend: {$ref: "#/components/schemas/Pet"}
"##;

    #[test]
    fn operations_become_tools_with_their_parameters_body_and_hints() {
        let doc = parse(PETS).unwrap();
        let ops = operations(&doc).unwrap();
        let names: Vec<&str> = ops.iter().map(|o| o.tool.as_str()).collect();
        assert_eq!(
            names,
            [
                "listPets",
                "createPet",
                "get_pets_petId",
                "delete_pets_petId"
            ]
        );
        let list = &ops[0];
        assert_eq!(
            list.definition["inputSchema"]["properties"]["limit"]["type"],
            "integer"
        );
        assert_eq!(list.definition["title"], "List pets");
        assert_eq!(list.definition["annotations"]["readOnlyHint"], true);
        let create = &ops[1];
        assert!(create.has_body);
        assert_eq!(
            create.definition["inputSchema"]["required"],
            json!(["body"])
        );
        let pet = &create.definition["inputSchema"]["properties"]["body"];
        assert_eq!(pet["properties"]["name"]["type"], "string");
        // A cycle is cut off, never followed for ever.
        assert!(pet.to_string().contains("nested too deep"), "{pet}");
        let one = &ops[2];
        assert_eq!(
            one.parameters,
            [Parameter {
                name: "petId".into(),
                location: Location::Path
            }]
        );
        assert_eq!(one.definition["inputSchema"]["required"], json!(["petId"]));
        assert_eq!(
            one.definition["inputSchema"]["properties"]["petId"]["description"],
            "the id"
        );
        assert_eq!(ops[3].definition["annotations"]["destructiveHint"], true);
    }

    proptest::proptest! {
        /// Reading is total: any text, and any JSON shape under `paths`, gives tools or an
        /// error, never a panic.
        #[test]
        fn any_text_or_shape_reads_without_a_panic(text in ".{0,400}", key in "[a-z/{}]{0,12}") {
            let _ = parse(&text).map(|d| operations(&d));
            let shaped = json!({"openapi": "3.0.0", "paths": {key.clone(): {"get": {"parameters": [text.clone(), {"name": key, "in": "path"}], "requestBody": text}}}});
            let _ = operations(&shaped);
        }
    }

    #[test]
    fn what_is_not_openapi_is_said_and_names_stay_in_bounds() {
        assert!(matches!(
            parse("{"),
            Err(DocumentError::Unreadable(_)) | Ok(_)
        ));
        assert!(matches!(
            operations(&json!({"swagger": "2.0"})),
            Err(DocumentError::NotOpenApi(_))
        ));
        assert!(matches!(
            operations(&json!({"openapi": "3.1.0"})),
            Err(DocumentError::NotOpenApi(_))
        ));
        let long = tool_name(Some(&"x".repeat(200)), "get", "/");
        assert_eq!(long.len(), MAX_OPERATION_NAME);
        assert_ne!(long, tool_name(Some(&"x".repeat(201)), "get", "/"));
        assert_eq!(tool_name(None, "get", "/a/{b}/c"), "get_a_b_c");
        assert_eq!(tool_name(Some("do it!"), "post", "/"), "do_it");
    }
}
