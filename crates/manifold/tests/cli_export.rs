//! Why: `manifold export` hands a server's tools to programs that call a model API directly, so
//! what it prints must be what each API takes. The real binary exports the Python SDK server's tools
//! (over stdio) in each format, and each output is validated against that API's tool schema as its
//! reference documents it (written here, from the OpenAI Chat Completions, Anthropic Messages and
//! Gemini `FunctionDeclaration` references), with every tool present and its input schema whole.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use manifold_testkit::{peers_dir, python};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// Chat Completions `tools`: `{"type": "function", "function": {name, description?, parameters?, strict?}}`.
fn openai_schema() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["type", "function"],
            "additionalProperties": false,
            "properties": {
                "type": { "const": "function" },
                "function": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": false,
                    "properties": {
                        "name": { "type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$" },
                        "description": { "type": "string" },
                        "parameters": { "type": "object" },
                        "strict": { "type": ["boolean", "null"] }
                    }
                }
            }
        }
    })
}

/// Messages `tools` (client tools): `{name, description?, input_schema}`, `input_schema` an object schema.
fn anthropic_schema() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["name", "input_schema"],
            "additionalProperties": false,
            "properties": {
                "name": { "type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$" },
                "description": { "type": "string" },
                "input_schema": {
                    "type": "object",
                    "required": ["type"],
                    "properties": { "type": { "const": "object" } }
                }
            }
        }
    })
}

/// Gemini `tools`: `[{"functionDeclarations": [{name, description, parameters | parametersJsonSchema}]}]`.
fn gemini_schema() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "functionDeclarations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "additionalProperties": false,
                        "properties": {
                            "name": { "type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$" },
                            "description": { "type": "string" },
                            "parameters": { "type": "object" },
                            "parametersJsonSchema": { "type": "object" }
                        },
                        "not": { "required": ["parameters", "parametersJsonSchema"] }
                    }
                }
            }
        }
    })
}

fn export(format: &str) -> Value {
    let out = Command::new(MANIFOLD)
        .args(["export", "--format", format, "--"])
        .arg(python().unwrap())
        .arg(peers_dir().unwrap().join("python_server.py"))
        .arg("stdio")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{format}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn assert_valid(format: &str, schema: &Value, exported: &Value) {
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(exported)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{format} output is not what the API takes: {errors:?}\n{exported:#}"
    );
}

#[test]
fn exported_tools_match_each_apis_tool_schema_and_keep_every_tool_whole() {
    let openai = export("openai");
    assert_valid("openai", &openai_schema(), &openai);
    let names: Vec<&str> = openai
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for tool in ["echo", "add", "slow"] {
        assert!(names.contains(&tool), "{tool} missing from {names:?}");
    }
    let add = openai
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "add")
        .unwrap();
    assert_eq!(add["function"]["description"], "Add two numbers.");
    assert!(
        add["function"]["parameters"]["properties"]["a"].is_object(),
        "{add}"
    );

    let anthropic = export("anthropic");
    assert_valid("anthropic", &anthropic_schema(), &anthropic);
    assert_eq!(anthropic.as_array().unwrap().len(), names.len());

    let gemini = export("gemini");
    assert_valid("gemini", &gemini_schema(), &gemini);
    assert_eq!(
        gemini[0]["functionDeclarations"].as_array().unwrap().len(),
        names.len()
    );
}
