//! `manifold conformance-client URL`: Manifold as the client under test of the official MCP
//! conformance suite (`conformance client --command "manifold conformance-client"`).
//!
//! The suite starts a mock server per scenario and runs this command with the mock's URL and
//! `MCP_CONFORMANCE_SCENARIO` (and sometimes `MCP_CONFORMANCE_CONTEXT`) set. Each scenario expects
//! a client to do a few things: call a named tool, answer elicitation with the schema's defaults,
//! echo a schema back, follow `input_required` rounds. Everything goes through the same
//! manifold-upstream `Connection` the gateway and the CLI use, so a pass is evidence about that
//! stack, and every step also checks what the mock answered, so a run that only sent requests
//! cannot pass here.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_upstream::auth::{Grant, HeadlessConsent, HttpAuth, OAuthClient, OAuthSettings};
use manifold_upstream::paginate::{ListKind, result_or_error};
use manifold_upstream::{
    CallOptions, ClientIdentity, ConnectOptions, Connection, EraChoice, HttpSpec,
    HttpTransportChoice, PeerInfo, ServerRequest, ServerRequestHandler, Target, connect,
};
use manifold_wire::{Era, ErrorCode, ErrorObject, meta};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::report::{CliError, Outcome};

/// The variable the suite names the scenario in.
pub const SCENARIO_VAR: &str = "MCP_CONFORMANCE_SCENARIO";
/// The variable some scenarios pass extra data in (a JSON object, e.g. the tool calls to make).
pub const CONTEXT_VAR: &str = "MCP_CONFORMANCE_CONTEXT";

/// What the client offers: form elicitation, answered from the schema's defaults. Nothing else is
/// declared, so servers do not ask for sampling or roots this client cannot give.
const CAPABILITIES: &str = r#"{"elicitation":{}}"#;

/// Scenarios whose mock server answers only in the modern revision (2026-07-28).
const MODERN_ONLY_MOCKS: &[&str] = &[
    "request-metadata",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "sep-2322-client-request-state",
    "json-schema-ref-no-deref",
];

/// The prefix of the authorization scenarios: their mocks protect the MCP endpoint with OAuth.
const AUTH_SCENARIOS: &str = "auth/";

/// The client ID metadata document URL the suite's authorization server recognises (it is never
/// fetched); used where the server advertises `client_id_metadata_document_supported`.
const CONFORMANCE_CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Where the suite's authorization server redirects after its automatic approval. Nothing
/// listens there: the redirect is read from the authorization endpoint's answer.
const CONFORMANCE_REDIRECT_URI: &str = "http://localhost:3000/callback";

/// Each request's deadline; the suite kills a client after 30 s, so a hang must fail sooner.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// `manifold conformance-client URL`, driven by the scenario named in the environment.
pub async fn run(url: &str) -> Result<Outcome, CliError> {
    let scenario = std::env::var(SCENARIO_VAR).map_err(|_| {
        CliError::with_hint(
            format!("{SCENARIO_VAR} is not set, so there is no scenario to play against {url}"),
            "run this through the suite: conformance client --command \"manifold conformance-client\" --scenario NAME",
        )
    })?;
    let context = read_context()?;
    let answers = Arc::new(SchemaDefaults::default());
    let auth = credentials_for(&scenario, &context)?;
    let session = Session::open(url, Arc::clone(&answers), auth).await?;
    note(&format!(
        "scenario {scenario}: connected to {} ({:?} era, revision {})",
        session
            .info
            .server_name
            .as_deref()
            .unwrap_or("an unnamed server"),
        session.info.era,
        session.info.revision
    ));
    let outcome = play(&scenario, &session, &context, &answers).await;
    session.conn.close().await;
    outcome.map(|()| {
        note(&format!("scenario {scenario}: done"));
        Outcome::Success
    })
}

/// Progress for whoever reads the suite's capture of our stderr when a scenario fails.
fn note(line: &str) {
    eprintln!("conformance-client: {line}");
}

fn failure(message: String) -> CliError {
    CliError::usage(message)
}

/// The credentials a scenario's mock expects: OAuth for `auth/*` (the grant the scenario tests,
/// the pre-registered client its context names, else discovery and registration), with consent
/// given by following the mock's automatic redirect.
fn credentials_for(scenario: &str, context: &Map<String, Value>) -> Result<HttpAuth, CliError> {
    if !scenario.starts_with(AUTH_SCENARIOS) {
        return Ok(HttpAuth::None);
    }
    let text = |k: &str| context.get(k).and_then(Value::as_str).map(str::to_owned);
    let grant = if scenario.starts_with("auth/client-credentials") {
        Grant::ClientCredentials
    } else {
        Grant::AuthorizationCode
    };
    let settings = OAuthSettings {
        grant,
        client_id: text("client_id"),
        client_secret: text("client_secret"),
        client_metadata_url: Some(CONFORMANCE_CLIENT_METADATA_URL.to_owned())
            .filter(|_| grant == Grant::AuthorizationCode),
        client_name: "manifold-conformance-client".to_owned(),
        ..OAuthSettings::default()
    };
    let consent = HeadlessConsent::new(CONFORMANCE_REDIRECT_URI)
        .map_err(|e| failure(format!("could not prepare the consent step: {e}")))?;
    Ok(HttpAuth::OAuth(
        OAuthClient::new(settings).with_consent(Arc::new(consent)),
    ))
}

fn read_context() -> Result<Map<String, Value>, CliError> {
    match std::env::var(CONTEXT_VAR) {
        Err(_) => Ok(Map::new()),
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) | Err(_) => Err(failure(format!(
                "{CONTEXT_VAR} is not a JSON object: {}",
                text.chars().take(200).collect::<String>()
            ))),
        },
    }
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
async fn play(
    scenario: &str,
    s: &Session,
    context: &Map<String, Value>,
    answers: &SchemaDefaults,
) -> Result<(), CliError> {
    // These mocks speak only the modern revision: ending up in the legacy era there is a failure
    // of negotiation even if the steps after it happen to work.
    if MODERN_ONLY_MOCKS.contains(&scenario) && s.info.era != Era::Modern {
        return Err(failure(format!(
            "negotiated the {:?} era (revision {}) with a mock that speaks only the modern revision",
            s.info.era, s.info.revision
        )));
    }
    match scenario {
        // The handshake is the scenario; listing tools shows the session is usable after it.
        "initialize" | "request-metadata" => {
            let tools = s.tools().await?;
            note(&format!("listed {} tool(s)", tools.len()));
            Ok(())
        }
        "json-schema-ref-no-deref" => {
            let tools = s.tools().await?;
            let tool = tools
                .iter()
                .find(|t| t.name == "lookup_user")
                .ok_or_else(|| failure("the server does not list lookup_user".to_owned()))?;
            // The network `$ref` must reach the caller exactly as the server wrote it: neither
            // fetched nor resolved in place.
            let profile = tool
                .input_schema_raw()
                .and_then(|schema| {
                    manifold_wire::patch::get_str(&schema, &["properties", "profile", "$ref"])
                        .ok()
                        .flatten()
                })
                .ok_or_else(|| {
                    failure("lookup_user lost the $ref of its profile property".to_owned())
                })?;
            note(&format!("lookup_user keeps profile.$ref = {profile}"));
            Ok(())
        }
        "tools_call" => {
            s.require_tool("add_numbers").await?;
            let text = s.call_text("add_numbers", r#"{"a":5,"b":3}"#).await?;
            expect_contains(&text, "is 8", "add_numbers(5, 3)")
        }
        "sse-retry" => {
            s.require_tool("test_reconnection").await?;
            let text = s.call_text("test_reconnection", "{}").await?;
            expect_contains(
                &text,
                "Reconnection test completed successfully",
                "test_reconnection (answered on the resumed stream)",
            )
        }
        "elicitation-sep1034-client-defaults" => {
            s.require_tool("test_client_elicitation_defaults").await?;
            let before = answers.answered();
            let text = s
                .call_text("test_client_elicitation_defaults", "{}")
                .await?;
            if answers.answered() == before {
                return Err(failure(
                    "test_client_elicitation_defaults finished without asking for elicitation"
                        .to_owned(),
                ));
            }
            expect_contains(
                &text,
                "Elicitation completed",
                "test_client_elicitation_defaults",
            )
        }
        "sep-2322-client-request-state" => {
            let tools = s.tools().await?;
            let expected = [
                ("test_mrtr_echo_state", "echo-state-ok"),
                ("test_mrtr_unrelated", "unrelated-ok"),
                ("test_mrtr_no_state", "no-state-ok"),
                ("test_mrtr_no_result_type", "no-result-type-test-ok"),
            ];
            for (tool, reply) in expected {
                if !tools.iter().any(|t| t.name == tool) {
                    return Err(failure(format!("the server does not list the tool {tool}")));
                }
                let text = s.call_text(tool, "{}").await?;
                expect_contains(&text, reply, tool)?;
            }
            if answers.answered() < 2 {
                return Err(failure(format!(
                    "the input_required rounds asked for elicitation {} time(s), expected 2",
                    answers.answered()
                )));
            }
            Ok(())
        }
        "http-standard-headers" => standard_headers(s).await,
        "http-custom-headers" => {
            let calls = context_tool_calls(context)?;
            let tools = s.tools().await?;
            for (name, arguments) in &calls {
                if !tools.iter().any(|t| &t.name == name) {
                    return Err(failure(format!(
                        "the server does not list the tool {name:?} the scenario asks to call"
                    )));
                }
                let text = s.call_text(name, &arguments.to_string()).await?;
                expect_contains(&text, "Custom headers test completed", name)?;
            }
            Ok(())
        }
        "json-schema-2020-12-preservation" => {
            let tools = s.tools().await?;
            let focal = tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .ok_or_else(|| {
                    failure("the server does not list json_schema_2020_12_tool".to_owned())
                })?;
            let schema = focal
                .input_schema_raw()
                .ok_or_else(|| failure("json_schema_2020_12_tool has no inputSchema".to_owned()))?;
            // The schema goes back byte for byte as the server sent it: no typed round trip.
            let arguments = format!("{{\"schema\":{schema}}}");
            let text = s.call_text("json_schema_echo", &arguments).await?;
            expect_contains(&text, "echoed", "json_schema_echo")
        }
        // No specific steps known: behave as a plain client that uses every tool it is offered
        // (this is also what http-invalid-tool-headers expects: valid tools used, invalid ones
        // never called).
        other => {
            if other != "http-invalid-tool-headers" && !other.starts_with(AUTH_SCENARIOS) {
                note(&format!(
                    "no specific steps known for {other:?}; calling every listed tool"
                ));
            }
            call_every_tool(s).await
        }
    }
}

fn expect_contains(text: &str, wanted: &str, what: &str) -> Result<(), CliError> {
    if text.contains(wanted) {
        note(&format!("{what}: {text}"));
        Ok(())
    } else {
        Err(failure(format!(
            "{what} answered {text:?}, which does not contain {wanted:?}"
        )))
    }
}

/// Every method that carries `Mcp-Method` (and `Mcp-Name` where it has a name), once at least.
async fn standard_headers(s: &Session) -> Result<(), CliError> {
    let tools = s.tools().await?;
    for tool in &tools {
        let arguments = synthesize_arguments(tool.input_schema().as_ref());
        s.call_text(&tool.name, &arguments.to_string()).await?;
    }
    let resources = s.list(ListKind::Resources).await?;
    for resource in &resources {
        let Some(uri) = resource.get("uri").and_then(Value::as_str) else {
            continue;
        };
        let params = json!({ "uri": uri }).to_string();
        s.request(meta::method::RESOURCES_READ, &params).await?;
        note(&format!("read {uri}"));
    }
    let prompts = s.list(ListKind::Prompts).await?;
    for prompt in &prompts {
        let Some(name) = prompt.get("name").and_then(Value::as_str) else {
            continue;
        };
        let params = json!({ "name": name, "arguments": {} }).to_string();
        s.request(meta::method::PROMPTS_GET, &params).await?;
        note(&format!("got prompt {name}"));
    }
    if tools.is_empty() || resources.is_empty() || prompts.is_empty() {
        return Err(failure(format!(
            "expected tools, resources and prompts to exercise, got {} tool(s), {} resource(s), {} prompt(s)",
            tools.len(),
            resources.len(),
            prompts.len()
        )));
    }
    Ok(())
}

async fn call_every_tool(s: &Session) -> Result<(), CliError> {
    let tools = s.tools().await?;
    for tool in &tools {
        let arguments = synthesize_arguments(tool.input_schema().as_ref());
        let text = s.call_text(&tool.name, &arguments.to_string()).await?;
        note(&format!("{}: {text}", tool.name));
    }
    Ok(())
}

/// One connection to the scenario's mock server.
struct Session {
    conn: Connection,
    info: PeerInfo,
    options: CallOptions,
}

/// A tool as listed, kept raw so its schema can be echoed exactly.
struct Tool {
    name: String,
    raw: Box<RawValue>,
}

impl Tool {
    fn input_schema(&self) -> Option<Value> {
        serde_json::from_str::<Value>(self.raw.get())
            .ok()
            .and_then(|v| v.get("inputSchema").cloned())
    }

    fn input_schema_raw(&self) -> Option<String> {
        manifold_wire::patch::get(self.raw.get(), &["inputSchema"])
            .ok()
            .flatten()
            .map(str::to_owned)
    }
}

impl Session {
    async fn open(
        url: &str,
        answers: Arc<SchemaDefaults>,
        auth: HttpAuth,
    ) -> Result<Session, CliError> {
        let target = Target::Http(HttpSpec {
            url: url.to_owned(),
            transport: HttpTransportChoice::Auto,
            auth,
            ..HttpSpec::default()
        });
        let mut options = ConnectOptions::new(url);
        options.era = EraChoice::Auto;
        options.client = ClientIdentity {
            name: "manifold-conformance-client".to_owned(),
            capabilities: CAPABILITIES.to_owned(),
            ..ClientIdentity::default()
        };
        options.handler = answers;
        let (conn, info) = connect(&target, &options).await?;
        Ok(Session {
            conn,
            info,
            options: CallOptions::with_timeout(REQUEST_TIMEOUT),
        })
    }

    /// The listed tools, minus those the transport refuses (invalid `x-mcp-header`), which a
    /// client must neither offer nor call.
    async fn tools(&self) -> Result<Vec<Tool>, CliError> {
        let raw = self.conn.list_all(ListKind::Tools, self.options).await?;
        let texts: Vec<&str> = raw.iter().map(|r| r.get()).collect();
        let rejected = self.conn.learn_tool_headers(&texts);
        for r in &rejected {
            note(&format!("left out tool {:?}: {}", r.name, r.reason));
        }
        Ok(raw
            .into_iter()
            .filter_map(|raw| {
                let name = manifold_wire::patch::get_str(raw.get(), &["name"])
                    .ok()
                    .flatten()?;
                (!rejected.iter().any(|r| r.name == name)).then_some(Tool { name, raw })
            })
            .collect())
    }

    async fn require_tool(&self, name: &str) -> Result<(), CliError> {
        let tools = self.tools().await?;
        if tools.iter().any(|t| t.name == name) {
            Ok(())
        } else {
            let listed: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            Err(failure(format!(
                "the server does not list the tool {name:?} (it lists {listed:?})"
            )))
        }
    }

    async fn list(&self, kind: ListKind) -> Result<Vec<Value>, CliError> {
        let raw = self.conn.list_all(kind, self.options).await?;
        Ok(raw
            .iter()
            .filter_map(|r| serde_json::from_str(r.get()).ok())
            .collect())
    }

    /// Sends a request, answering `input_required` rounds, and returns the parsed result.
    async fn request(&self, method: &str, params: &str) -> Result<Value, CliError> {
        let response = self
            .conn
            .call_resolving_input(method, Some(params), self.options)
            .await?;
        let raw = result_or_error(&self.conn, method, &response)?;
        serde_json::from_str(raw)
            .map_err(|e| failure(format!("the result of {method} is not JSON: {e}")))
    }

    /// Calls a tool and returns its text content; a tool error is a failure here.
    async fn call_text(&self, tool: &str, arguments: &str) -> Result<String, CliError> {
        let params = format!(
            "{{\"name\":{},\"arguments\":{arguments}}}",
            manifold_wire::id::json_string(tool)
        );
        let result = self.request(meta::method::TOOLS_CALL, &params).await?;
        let text = result
            .get("content")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(failure(format!(
                "the tool {tool} reported an error: {text}"
            )));
        }
        Ok(text)
    }
}

/// Arguments for a tool nobody told us how to call: each required property gets its default,
/// its first allowed value, or a plain value of its type.
fn synthesize_arguments(schema: Option<&Value>) -> Value {
    let Some(schema) = schema else {
        return json!({});
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut out = Map::new();
    for name in required {
        let property = properties.and_then(|p| p.get(name));
        out.insert(name.to_owned(), sample_value(property));
    }
    Value::Object(out)
}

fn sample_value(property: Option<&Value>) -> Value {
    let Some(p) = property else {
        return Value::from("conformance");
    };
    if let Some(d) = p.get("default") {
        return d.clone();
    }
    if let Some(first) = p
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(c) = p.get("const") {
        return c.clone();
    }
    match p.get("type").and_then(Value::as_str) {
        Some("integer") | Some("number") => Value::from(1),
        Some("boolean") => Value::Bool(true),
        Some("object") => json!({}),
        Some("array") => json!([]),
        Some("null") => Value::Null,
        _ => Value::from("conformance"),
    }
}

/// Answers elicitation the way an unattended client should: accept, with every default the
/// requested schema gives (SEP-1034), and a neutral value for a required field without one.
/// URL-mode elicitation needs a person at a browser, so it is declined.
#[derive(Default)]
struct SchemaDefaults {
    answered: AtomicUsize,
}

impl SchemaDefaults {
    fn answered(&self) -> usize {
        self.answered.load(Ordering::Relaxed)
    }
}

impl ServerRequestHandler for SchemaDefaults {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        let answer = if request.method == meta::method::ELICITATION_CREATE {
            self.answered.fetch_add(1, Ordering::Relaxed);
            let params: Value = request
                .params
                .as_deref()
                .and_then(|p| serde_json::from_str(p).ok())
                .unwrap_or(Value::Null);
            let answer = elicitation_answer(&params);
            note(&format!("answered elicitation with {answer}"));
            Ok(answer.to_string())
        } else {
            Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!(
                    "the conformance client does not support {} (it declared only elicitation)",
                    request.method
                ),
            ))
        };
        Box::pin(async move { answer })
    }
}

fn elicitation_answer(params: &Value) -> Value {
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        return json!({ "action": "decline" });
    }
    let schema = params.get("requestedSchema");
    let properties = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, property) in properties.into_iter().flatten() {
        if let Some(d) = property.get("default") {
            content.insert(name.clone(), d.clone());
        } else if required.contains(&name.as_str()) {
            content.insert(name.clone(), neutral_value(property));
        }
    }
    json!({ "action": "accept", "content": content })
}

/// A value of the property's type for a required elicitation field that has no default.
fn neutral_value(property: &Value) -> Value {
    let first_option = property
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first().cloned())
        .or_else(|| {
            property
                .get("oneOf")
                .and_then(Value::as_array)
                .and_then(|o| o.first())
                .and_then(|o| o.get("const").cloned())
        });
    if let Some(v) = first_option {
        return v;
    }
    match property.get("type").and_then(Value::as_str) {
        Some("integer") | Some("number") => property
            .get("minimum")
            .cloned()
            .unwrap_or_else(|| Value::from(0)),
        Some("boolean") => Value::Bool(false),
        Some("array") => json!([]),
        _ => Value::from(""),
    }
}

/// The tool calls a scenario's context asks for, in order: (name, arguments object).
fn context_tool_calls(context: &Map<String, Value>) -> Result<Vec<(String, Value)>, CliError> {
    let calls = context
        .get("toolCalls")
        .and_then(Value::as_array)
        .ok_or_else(|| failure(format!("{CONTEXT_VAR} names no toolCalls")))?;
    calls
        .iter()
        .map(|c| {
            let name = c.get("name").and_then(Value::as_str).ok_or_else(|| {
                failure(format!(
                    "a toolCalls entry in {CONTEXT_VAR} has no name: {c}"
                ))
            })?;
            let arguments = c.get("arguments").cloned().unwrap_or_else(|| json!({}));
            Ok((name.to_owned(), arguments))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn elicitation_accepts_with_every_default_of_the_schema() {
        let params = json!({
            "message": "please accept with defaults",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": { "type": "string", "default": "John Doe" },
                    "age": { "type": "integer", "default": 30 },
                    "score": { "type": "number", "default": 95.5 },
                    "status": { "type": "string", "enum": ["active", "inactive"], "default": "active" },
                    "verified": { "type": "boolean", "default": true },
                    "nickname": { "type": "string" }
                },
                "required": []
            }
        });
        assert_eq!(
            elicitation_answer(&params),
            json!({
                "action": "accept",
                "content": {
                    "name": "John Doe", "age": 30, "score": 95.5,
                    "status": "active", "verified": true
                }
            })
        );
    }

    #[test]
    fn elicitation_fills_required_fields_without_defaults_by_type() {
        let params = json!({
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "confirmed": { "type": "boolean" },
                    "count": { "type": "integer", "minimum": 2 },
                    "color": { "type": "string", "oneOf": [{ "const": "red" }, { "const": "blue" }] },
                    "note": { "type": "string" }
                },
                "required": ["confirmed", "count", "color"]
            }
        });
        assert_eq!(
            elicitation_answer(&params),
            json!({
                "action": "accept",
                "content": { "confirmed": false, "count": 2, "color": "red" }
            })
        );
    }

    #[test]
    fn url_mode_elicitation_is_declined() {
        let params =
            json!({ "mode": "url", "url": "https://example.com/auth", "elicitationId": "e1" });
        assert_eq!(elicitation_answer(&params), json!({ "action": "decline" }));
    }

    #[test]
    fn synthesized_arguments_cover_exactly_the_required_properties() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": { "type": "string", "x-mcp-header": "Region" },
                "n": { "type": "integer" },
                "mode": { "type": "string", "enum": ["fast", "slow"] },
                "level": { "type": "string", "default": "high" },
                "optional": { "type": "string" }
            },
            "required": ["region", "n", "mode", "level"]
        });
        assert_eq!(
            synthesize_arguments(Some(&schema)),
            json!({ "region": "conformance", "n": 1, "mode": "fast", "level": "high" })
        );
        assert_eq!(synthesize_arguments(None), json!({}));
    }

    #[test]
    fn the_raw_input_schema_is_kept_byte_for_byte() {
        let raw = r#"{"name":"t","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"a":{"$anchor":"x"}},"additionalProperties":false}}"#;
        let tool = Tool {
            name: "t".to_owned(),
            raw: RawValue::from_string(raw.to_owned()).unwrap(),
        };
        assert_eq!(
            tool.input_schema_raw().unwrap(),
            r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"a":{"$anchor":"x"}},"additionalProperties":false}"#
        );
    }

    #[test]
    fn auth_scenarios_get_the_grant_and_client_their_mock_expects() {
        assert!(matches!(
            credentials_for("tools_call", &Map::new()).unwrap(),
            HttpAuth::None
        ));
        let context: Map<String, Value> = serde_json::from_str(
            r#"{"name":"auth/pre-registration","client_id":"pre","client_secret":"sec"}"#,
        )
        .unwrap();
        let pre = credentials_for("auth/pre-registration", &context).unwrap();
        let s = pre.oauth_client().unwrap().settings().clone();
        assert_eq!(s.grant, Grant::AuthorizationCode);
        assert_eq!(s.client_id.as_deref(), Some("pre"));
        assert_eq!(s.client_secret.as_deref(), Some("sec"));
        assert_eq!(
            s.client_metadata_url.as_deref(),
            Some(CONFORMANCE_CLIENT_METADATA_URL)
        );
        let cc = credentials_for("auth/client-credentials-basic", &context).unwrap();
        let s = cc.oauth_client().unwrap().settings().clone();
        assert_eq!(s.grant, Grant::ClientCredentials);
        assert_eq!(s.client_metadata_url, None);
        let discovered = credentials_for("auth/metadata-default", &Map::new()).unwrap();
        assert_eq!(
            discovered.oauth_client().unwrap().settings().client_id,
            None
        );
    }

    #[test]
    fn context_tool_calls_keep_order_and_arguments() {
        let context: Map<String, Value> = serde_json::from_str(
            r#"{"name":"http-custom-headers","toolCalls":[{"name":"a","arguments":{"x":"line1\nline2","f":1.0625}},{"name":"b"}]}"#,
        )
        .unwrap();
        let calls = context_tool_calls(&context).unwrap();
        assert_eq!(
            calls,
            vec![
                ("a".to_owned(), json!({ "x": "line1\nline2", "f": 1.0625 })),
                ("b".to_owned(), json!({})),
            ]
        );
        assert_eq!(calls[0].1.to_string(), r#"{"f":1.0625,"x":"line1\nline2"}"#);
        assert!(context_tool_calls(&Map::new()).is_err());
    }
}
