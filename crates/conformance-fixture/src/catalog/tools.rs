//! The fixture's tools: their definitions (`tools/list`) and what each one does when called.
//!
//! Names, arguments and contents follow the conformance suite's scenario descriptions. Tools that
//! need client input ask for it through [`Interaction::ask`]; tools that take long return a
//! [`Job`], which runs as a task when the client negotiated the tasks extension and inline
//! otherwise. The list order is fixed (the modern era asks for a deterministic order), and
//! `test_simple_text`, which needs no arguments, comes first because header-validation scenarios
//! call whichever tool is listed first.

use serde_json::{Value, json};

use crate::catalog::media::{RED_PIXEL_PNG, SILENCE_WAV};
use crate::error::RpcError;
use crate::interaction::{InputMethod, InputRequest, Interaction, Interrupt};
use crate::log_level::LogLevel;
use crate::subscriptions::Change;

/// Every tool the fixture knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolId {
    SimpleText,
    Image,
    Audio,
    EmbeddedResource,
    MixedContent,
    WithLogging,
    LoggingTool,
    ErrorResult,
    WithProgress,
    Sampling,
    Elicitation,
    ElicitationDefaults,
    ElicitationEnums,
    JsonSchema2020,
    Reconnection,
    MissingCapability,
    StreamingElicitation,
    TriggerToolChange,
    TriggerPromptChange,
    TriggerResourceUpdate,
    CustomHeader,
    AskElicitation,
    AskSampling,
    AskRoots,
    AskWithState,
    AskMultiple,
    AskMultiRound,
    AskTamperProof,
    AskByCapability,
    Greet,
    SlowCompute,
    FailingJob,
    ProtocolErrorJob,
    ConfirmDelete,
    MultiInput,
    AskThenTask,
    Dynamic,
}

/// Whether a tool may (or must) run as a task in the modern era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Always answers inline.
    Forbidden,
    /// Runs as a task when the client negotiated the extension, inline otherwise.
    Optional,
    /// Refused (-32021) in the modern era unless the client negotiated the extension.
    Required,
}

/// One tool's definition.
#[derive(Debug)]
pub struct ToolSpec {
    pub id: ToolId,
    pub name: &'static str,
    pub description: &'static str,
    pub input_schema: fn() -> Value,
    pub tasks: TaskSupport,
}

fn no_arguments() -> Value {
    json!({ "type": "object", "properties": {} })
}

fn prompt_argument() -> Value {
    json!({
        "type": "object",
        "properties": { "prompt": { "type": "string", "description": "The prompt to send to the LLM" } },
        "required": ["prompt"],
    })
}

fn message_argument() -> Value {
    json!({
        "type": "object",
        "properties": { "message": { "type": "string", "description": "The message to show the user" } },
        "required": ["message"],
    })
}

fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": { "street": { "type": "string" }, "city": { "type": "string" } },
            },
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" },
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": {
            "properties": { "contactMethod": { "const": "phone" } },
            "required": ["contactMethod"],
        },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false,
    })
}

fn uri_argument() -> Value {
    json!({
        "type": "object",
        "properties": { "uri": { "type": "string", "description": "The resource that changed (default test://watched-resource)" } },
    })
}

fn region_header_argument() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "description": "A region name; mirrored into the Mcp-Param-Region header over HTTP",
                "x-mcp-header": "Region",
            },
        },
        "required": ["region"],
    })
}

fn name_argument() -> Value {
    json!({
        "type": "object",
        "properties": { "name": { "type": "string", "description": "Who to greet" } },
        "required": ["name"],
    })
}

fn slow_compute_arguments() -> Value {
    json!({
        "type": "object",
        "properties": {
            "seconds": { "type": "number", "minimum": 0, "description": "How long to work (at most 300)" },
            "label": { "type": "string", "description": "A label echoed in the result" },
        },
        "required": ["seconds"],
    })
}

fn filename_argument() -> Value {
    json!({
        "type": "object",
        "properties": { "filename": { "type": "string", "description": "The file to (pretend to) delete" } },
        "required": ["filename"],
    })
}

const fn tool(
    id: ToolId,
    name: &'static str,
    description: &'static str,
    input_schema: fn() -> Value,
    tasks: TaskSupport,
) -> ToolSpec {
    ToolSpec {
        id,
        name,
        description,
        input_schema,
        tasks,
    }
}

use TaskSupport::{Forbidden, Optional, Required};

/// The tools in listing order (the dynamic tool, when present, is listed last).
pub static TOOLS: &[ToolSpec] = &[
    tool(
        ToolId::SimpleText,
        "test_simple_text",
        "Returns a simple text content block.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::Image,
        "test_image_content",
        "Returns an image content block (a 1x1 red PNG).",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::Audio,
        "test_audio_content",
        "Returns an audio content block (a short WAV).",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::EmbeddedResource,
        "test_embedded_resource",
        "Returns an embedded text resource.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::MixedContent,
        "test_multiple_content_types",
        "Returns text, image and embedded resource content together.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::WithLogging,
        "test_tool_with_logging",
        "Sends three info log messages while it runs (legacy: as the session's level allows; modern: only when _meta names a logLevel).",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::LoggingTool,
        "test_logging_tool",
        "Like test_tool_with_logging: logs only as the request's log level allows.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::ErrorResult,
        "test_error_handling",
        "Always fails with a tool execution error (isError: true).",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::WithProgress,
        "test_tool_with_progress",
        "Reports progress 0, 50 and 100 of 100 when the request carries a progress token.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::Sampling,
        "test_sampling",
        "Asks the client's LLM to answer the prompt (sampling/createMessage) and returns the answer.",
        prompt_argument,
        Forbidden,
    ),
    tool(
        ToolId::Elicitation,
        "test_elicitation",
        "Asks the user for a username and an email (elicitation/create) and returns the answer.",
        message_argument,
        Forbidden,
    ),
    tool(
        ToolId::ElicitationDefaults,
        "test_elicitation_sep1034_defaults",
        "Elicits a form whose string, integer, number, enum and boolean fields carry defaults (SEP-1034).",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::ElicitationEnums,
        "test_elicitation_sep1330_enums",
        "Elicits a form using all five enum schema variants (SEP-1330).",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::JsonSchema2020,
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        json_schema_2020_12,
        Forbidden,
    ),
    tool(
        ToolId::Reconnection,
        "test_reconnection",
        "Over Streamable HTTP (legacy era), closes its SSE stream after the priming event and delivers the result when the client resumes with Last-Event-ID.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::MissingCapability,
        "test_missing_capability",
        "Needs the client's sampling capability; a modern request that does not declare it gets -32021.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::StreamingElicitation,
        "test_streaming_elicitation",
        "Asks the user for a name; in the modern era the question travels as an InputRequiredResult, never as a request on the response stream.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::TriggerToolChange,
        "test_trigger_tool_change",
        "Adds or removes test_dynamic_tool and announces notifications/tools/list_changed.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::TriggerPromptChange,
        "test_trigger_prompt_change",
        "Adds or removes test_dynamic_prompt and announces notifications/prompts/list_changed.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::TriggerResourceUpdate,
        "test_trigger_resource_update",
        "Changes a resource and announces notifications/resources/updated to its subscribers.",
        uri_argument,
        Forbidden,
    ),
    tool(
        ToolId::CustomHeader,
        "test_custom_header",
        "Echoes its region argument, which Streamable HTTP mirrors into the Mcp-Param-Region header (SEP-2243).",
        region_header_argument,
        Forbidden,
    ),
    tool(
        ToolId::AskElicitation,
        "test_input_required_result_elicitation",
        "Asks for the user's name (input key user_name) and greets them.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::AskSampling,
        "test_input_required_result_sampling",
        "Asks the client's LLM for the capital of France (input key capital_question).",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::AskRoots,
        "test_input_required_result_list_roots",
        "Asks for the client's roots (input key client_roots) and lists them.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::AskWithState,
        "test_input_required_result_request_state",
        "Asks for a confirmation (input key confirm); the result says state-ok once the sealed requestState came back intact.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::AskMultiple,
        "test_input_required_result_multiple_inputs",
        "Asks for an elicitation, a sampling and the roots at once.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::AskMultiRound,
        "test_input_required_result_multi_round",
        "Asks for a name (step1), then a favourite colour (step2), then answers.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::AskTamperProof,
        "test_input_required_result_tampered_state",
        "Asks for a confirmation with an HMAC-sealed requestState; an altered state is refused with -32602.",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::AskByCapability,
        "test_input_required_result_capabilities",
        "Asks only for inputs the client declared capabilities for (elicitation, sampling, roots).",
        no_arguments,
        Forbidden,
    ),
    tool(
        ToolId::Greet,
        "greet",
        "Returns Hello, {name}! at once (never a task).",
        name_argument,
        Forbidden,
    ),
    tool(
        ToolId::SlowCompute,
        "slow_compute",
        "Works for the given number of seconds, then answers; a task when the tasks extension is negotiated.",
        slow_compute_arguments,
        Optional,
    ),
    tool(
        ToolId::FailingJob,
        "failing_job",
        "Fails with a tool execution error after about a second; needs the tasks extension in the modern era.",
        no_arguments,
        Required,
    ),
    tool(
        ToolId::ProtocolErrorJob,
        "protocol_error_job",
        "Fails with a protocol error (-32603); a task when the tasks extension is negotiated.",
        no_arguments,
        Optional,
    ),
    tool(
        ToolId::ConfirmDelete,
        "confirm_delete",
        "Asks the user to confirm deleting a file (elicitation), then reports the choice; a task when the tasks extension is negotiated.",
        filename_argument,
        Optional,
    ),
    tool(
        ToolId::MultiInput,
        "multi_input",
        "Asks two questions at once (two elicitations), then reports both answers; a task when the tasks extension is negotiated.",
        no_arguments,
        Optional,
    ),
    tool(
        ToolId::AskThenTask,
        "test_tool_with_task",
        "Asks for a name first (input key user_name), then greets in a task; needs the tasks extension in the modern era.",
        no_arguments,
        Required,
    ),
];

/// The tool `test_trigger_tool_change` adds and removes.
pub static DYNAMIC_TOOL: ToolSpec = tool(
    ToolId::Dynamic,
    "test_dynamic_tool",
    "Listed only while test_trigger_tool_change has switched it on.",
    no_arguments,
    Forbidden,
);

/// The listed tools, in order.
pub fn listed(dynamic: bool) -> impl Iterator<Item = &'static ToolSpec> {
    TOOLS
        .iter()
        .chain(std::iter::once(&DYNAMIC_TOOL).filter(move |_| dynamic))
}

/// Finds a listed tool by name.
pub fn find(name: &str, dynamic: bool) -> Option<&'static ToolSpec> {
    listed(dynamic).find(|t| t.name == name)
}

/// A tool's entry in `tools/list`.
pub fn definition(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": (spec.input_schema)(),
    })
}

/// Work that may outlive its request (run as a task when possible).
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    SlowCompute { seconds: f64, label: String },
    FailingJob,
    ProtocolErrorJob,
    ConfirmDelete { filename: String },
    MultiInput,
    DelayedGreeting { name: String },
}

/// How a tool call ends.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// A `CallToolResult`.
    Done(Value),
    /// Long work: a task if the client negotiated tasks, inline otherwise.
    Escalate(Job),
}

fn text(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }] })
}

fn tool_error(message: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": message.into() }], "isError": true })
}

fn string_arg<'a>(args: &'a Value, name: &str, tool: &str) -> Result<&'a str, Interrupt> {
    args.get(name).and_then(Value::as_str).ok_or_else(|| {
        Interrupt::Failed(RpcError::invalid_params(format!(
            "tool {tool} needs the string argument {name:?}"
        )))
    })
}

fn text_schema(field: &str) -> Value {
    json!({
        "type": "object",
        "properties": { field: { "type": "string" } },
        "required": [field],
    })
}

fn elicit(key: &str, message: &str, requested_schema: Value) -> InputRequest {
    InputRequest::new(
        key,
        InputMethod::Elicitation,
        json!({ "message": message, "requestedSchema": requested_schema }),
    )
}

fn sample(key: &str, prompt: &str, max_tokens: u64) -> InputRequest {
    InputRequest::new(
        key,
        InputMethod::Sampling,
        json!({
            "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
            "maxTokens": max_tokens,
        }),
    )
}

fn list_roots(key: &str) -> InputRequest {
    InputRequest::new(key, InputMethod::Roots, json!({}))
}

/// What the user answered to an elicitation, for echoing.
fn describe_elicitation(answer: &Value) -> String {
    let action = answer
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("cancel");
    let content = answer.get("content").cloned().unwrap_or(json!({}));
    format!("action={action}, content={content}")
}

/// A string field of an accepted elicitation.
fn accepted_field(answer: &Value, field: &str) -> Option<String> {
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    answer
        .get("content")
        .and_then(|c| c.get(field))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
}

/// The text of a sampling answer.
fn sampled_text(answer: &Value) -> String {
    answer
        .get("content")
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| "(no text)".to_owned())
}

fn root_uris(answer: &Value) -> String {
    let uris: Vec<&str> = answer
        .get("roots")
        .and_then(Value::as_array)
        .map(|roots| {
            roots
                .iter()
                .filter_map(|r| r.get("uri").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if uris.is_empty() {
        "(none)".to_owned()
    } else {
        uris.join(", ")
    }
}

fn answer<'a>(answers: &'a crate::interaction::Answers, key: &str) -> Result<&'a Value, Interrupt> {
    answers.get(key).ok_or_else(|| {
        Interrupt::Failed(RpcError::internal(format!(
            "the answer for {key:?} went missing"
        )))
    })
}

/// Runs a tool.
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub async fn call(
    spec: &ToolSpec,
    args: &Value,
    cx: &mut Interaction,
) -> Result<ToolOutcome, Interrupt> {
    use ToolOutcome::{Done, Escalate};
    let name = spec.name;
    let outcome = match spec.id {
        ToolId::SimpleText => Done(text("This is a simple text response for testing.")),
        ToolId::Image => Done(json!({
            "content": [{ "type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png" }],
        })),
        ToolId::Audio => Done(json!({
            "content": [{ "type": "audio", "data": SILENCE_WAV, "mimeType": "audio/wav" }],
        })),
        ToolId::EmbeddedResource => Done(json!({
            "content": [{
                "type": "resource",
                "resource": {
                    "uri": "test://embedded-resource",
                    "mimeType": "text/plain",
                    "text": "This is an embedded resource content.",
                },
            }],
        })),
        ToolId::MixedContent => Done(json!({
            "content": [
                { "type": "text", "text": "Multiple content types test:" },
                { "type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png" },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "test://mixed-content-resource",
                        "mimeType": "application/json",
                        "text": "{\"test\":\"data\",\"value\":123}",
                    },
                },
            ],
        })),
        ToolId::WithLogging | ToolId::LoggingTool => {
            cx.log(LogLevel::Info, "Tool execution started").await;
            cx.pause(50).await?;
            cx.log(LogLevel::Info, "Tool processing data").await;
            cx.pause(50).await?;
            cx.log(LogLevel::Info, "Tool execution completed").await;
            Done(text("Tool with logging executed successfully"))
        }
        ToolId::ErrorResult => Done(tool_error(
            "This tool intentionally returns an error for testing",
        )),
        ToolId::WithProgress => {
            cx.progress(0, 100, "started").await;
            cx.pause(50).await?;
            cx.progress(50, 100, "half way").await;
            cx.pause(50).await?;
            cx.progress(100, 100, "done").await;
            Done(text("Tool with progress executed successfully"))
        }
        ToolId::Sampling => {
            let prompt = string_arg(args, "prompt", name)?;
            let answers = cx.ask(vec![sample("sampling", prompt, 100)]).await?;
            Done(text(format!(
                "LLM response: {}",
                sampled_text(answer(&answers, "sampling")?)
            )))
        }
        ToolId::Elicitation => {
            let message = string_arg(args, "message", name)?;
            let schema = json!({
                "type": "object",
                "properties": {
                    "username": { "type": "string", "description": "User's response" },
                    "email": { "type": "string", "description": "User's email address" },
                },
                "required": ["username", "email"],
            });
            let answers = cx.ask(vec![elicit("user_info", message, schema)]).await?;
            Done(text(format!(
                "User response: {}",
                describe_elicitation(answer(&answers, "user_info")?)
            )))
        }
        ToolId::ElicitationDefaults => {
            let schema = json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "default": "John Doe" },
                    "age": { "type": "integer", "default": 30 },
                    "score": { "type": "number", "default": 95.5 },
                    "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
                    "verified": { "type": "boolean", "default": true },
                },
            });
            let request = elicit(
                "profile",
                "Please review and update the form fields with defaults",
                schema,
            );
            let answers = cx.ask(vec![request]).await?;
            Done(text(format!(
                "Elicitation completed: {}",
                describe_elicitation(answer(&answers, "profile")?)
            )))
        }
        ToolId::ElicitationEnums => {
            let schema = json!({
                "type": "object",
                "properties": {
                    "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                    "titledSingle": {
                        "type": "string",
                        "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" },
                        ],
                    },
                    "legacyEnum": {
                        "type": "string",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"],
                    },
                    "untitledMulti": {
                        "type": "array",
                        "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
                    },
                    "titledMulti": {
                        "type": "array",
                        "items": {
                            "anyOf": [
                                { "const": "value1", "title": "First Choice" },
                                { "const": "value2", "title": "Second Choice" },
                                { "const": "value3", "title": "Third Choice" },
                            ],
                        },
                    },
                },
            });
            let answers = cx
                .ask(vec![elicit(
                    "choices",
                    "Please pick from each list",
                    schema,
                )])
                .await?;
            Done(text(format!(
                "Elicitation completed: {}",
                describe_elicitation(answer(&answers, "choices")?)
            )))
        }
        ToolId::JsonSchema2020 => {
            let who = args
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("(no name)");
            Done(text(format!(
                "json_schema_2020_12_tool received name={who}"
            )))
        }
        ToolId::Reconnection => {
            // Let the priming event out first, then drop the live stream; the result follows on
            // the resumed stream.
            cx.pause(50).await?;
            cx.close_stream().await;
            cx.pause(200).await?;
            Done(text(
                "Reconnection test completed: the result arrived after the stream was closed",
            ))
        }
        ToolId::MissingCapability => {
            let answers = cx.ask(vec![sample("probe", "Say anything.", 10)]).await?;
            Done(text(format!(
                "The client declared sampling and answered: {}",
                sampled_text(answer(&answers, "probe")?)
            )))
        }
        ToolId::StreamingElicitation => {
            let request = elicit("user_name", "What is your name?", text_schema("name"));
            let answers = cx.ask(vec![request]).await?;
            let who = accepted_field(answer(&answers, "user_name")?, "name")
                .unwrap_or_else(|| "stranger".to_owned());
            Done(text(format!("Hello, {who}!")))
        }
        ToolId::TriggerToolChange => {
            let listed = cx.fixture.catalog.toggle_dynamic_tool();
            cx.announce(Change::ToolsListChanged);
            Done(text(format!(
                "test_dynamic_tool is now {}; notifications/tools/list_changed was announced",
                if listed { "listed" } else { "removed" }
            )))
        }
        ToolId::TriggerPromptChange => {
            let listed = cx.fixture.catalog.toggle_dynamic_prompt();
            cx.announce(Change::PromptsListChanged);
            Done(text(format!(
                "test_dynamic_prompt is now {}; notifications/prompts/list_changed was announced",
                if listed { "listed" } else { "removed" }
            )))
        }
        ToolId::TriggerResourceUpdate => {
            let uri = args
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or(crate::catalog::resources::WATCHED);
            if uri == crate::catalog::resources::WATCHED {
                cx.fixture.catalog.bump_watched();
            }
            cx.announce(Change::ResourceUpdated(uri.to_owned()));
            Done(text(format!(
                "notifications/resources/updated was announced for {uri}"
            )))
        }
        ToolId::CustomHeader => {
            let region = string_arg(args, "region", name)?;
            Done(text(format!("Region: {region}")))
        }
        ToolId::AskElicitation => {
            let request = elicit("user_name", "What is your name?", text_schema("name"));
            let answers = cx.ask(vec![request]).await?;
            let who = accepted_field(answer(&answers, "user_name")?, "name")
                .unwrap_or_else(|| "stranger".to_owned());
            Done(text(format!("Hello, {who}!")))
        }
        ToolId::AskSampling => {
            let answers = cx
                .ask(vec![sample(
                    "capital_question",
                    "What is the capital of France?",
                    100,
                )])
                .await?;
            Done(text(format!(
                "The model answered: {}",
                sampled_text(answer(&answers, "capital_question")?)
            )))
        }
        ToolId::AskRoots => {
            let answers = cx.ask(vec![list_roots("client_roots")]).await?;
            Done(text(format!(
                "The client's roots: {}",
                root_uris(answer(&answers, "client_roots")?)
            )))
        }
        ToolId::AskWithState => {
            let schema = json!({
                "type": "object",
                "properties": { "ok": { "type": "boolean" } },
                "required": ["ok"],
            });
            let answers = cx
                .ask(vec![elicit("confirm", "Please confirm", schema)])
                .await?;
            let confirmed = describe_elicitation(answer(&answers, "confirm")?);
            if cx.state_verified() {
                Done(text(format!(
                    "state-ok: the sealed requestState verified ({confirmed})"
                )))
            } else {
                Done(text(format!(
                    "state-missing: the answer came without the requestState this server sent ({confirmed})"
                )))
            }
        }
        ToolId::AskMultiple => {
            let answers = cx
                .ask(vec![
                    elicit("user_name", "What is your name?", text_schema("name")),
                    sample("greeting", "Generate a greeting", 50),
                    list_roots("client_roots"),
                ])
                .await?;
            let who = accepted_field(answer(&answers, "user_name")?, "name")
                .unwrap_or_else(|| "stranger".to_owned());
            Done(text(format!(
                "name={who}; greeting={}; roots={}",
                sampled_text(answer(&answers, "greeting")?),
                root_uris(answer(&answers, "client_roots")?)
            )))
        }
        ToolId::AskMultiRound => {
            let first = cx
                .ask(vec![elicit(
                    "step1",
                    "Step 1: What is your name?",
                    text_schema("name"),
                )])
                .await?;
            let who = accepted_field(answer(&first, "step1")?, "name")
                .unwrap_or_else(|| "stranger".to_owned());
            let second = cx
                .ask(vec![elicit(
                    "step2",
                    "Step 2: What is your favorite color?",
                    text_schema("color"),
                )])
                .await?;
            let color = accepted_field(answer(&second, "step2")?, "color")
                .unwrap_or_else(|| "no colour".to_owned());
            Done(text(format!("{who} likes {color}")))
        }
        ToolId::AskTamperProof => {
            let schema = json!({
                "type": "object",
                "properties": { "ok": { "type": "boolean" } },
                "required": ["ok"],
            });
            let answers = cx
                .ask(vec![elicit(
                    "confirm",
                    "Please confirm (state is sealed)",
                    schema,
                )])
                .await?;
            Done(text(format!(
                "Confirmed with an intact requestState: {}",
                describe_elicitation(answer(&answers, "confirm")?)
            )))
        }
        ToolId::AskByCapability => {
            let mut requests = Vec::new();
            if cx.declares("elicitation") {
                requests.push(elicit(
                    "user_name",
                    "What is your name?",
                    text_schema("name"),
                ));
            }
            if cx.declares("sampling") {
                requests.push(sample("greeting", "Generate a greeting", 50));
            }
            if cx.declares("roots") {
                requests.push(list_roots("client_roots"));
            }
            if requests.is_empty() {
                Done(text(
                    "The client declared none of elicitation, sampling and roots, so nothing was asked",
                ))
            } else {
                let answers = cx.ask(requests).await?;
                let keys: Vec<&str> = answers.keys().map(String::as_str).collect();
                Done(text(format!("Answered inputs: {}", keys.join(", "))))
            }
        }
        ToolId::Greet => {
            let who = string_arg(args, "name", name)?;
            Done(text(format!("Hello, {who}!")))
        }
        ToolId::SlowCompute => {
            let seconds = args.get("seconds").and_then(Value::as_f64).ok_or_else(|| {
                Interrupt::Failed(RpcError::invalid_params(
                    "tool slow_compute needs the number argument \"seconds\"",
                ))
            })?;
            let label = args
                .get("label")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            Escalate(Job::SlowCompute {
                seconds: seconds.clamp(0.0, 300.0),
                label,
            })
        }
        ToolId::FailingJob => Escalate(Job::FailingJob),
        ToolId::ProtocolErrorJob => Escalate(Job::ProtocolErrorJob),
        ToolId::ConfirmDelete => {
            let filename = string_arg(args, "filename", name)?.to_owned();
            Escalate(Job::ConfirmDelete { filename })
        }
        ToolId::MultiInput => Escalate(Job::MultiInput),
        ToolId::AskThenTask => {
            let answers = cx
                .ask(vec![elicit(
                    "user_name",
                    "What is your name?",
                    text_schema("name"),
                )])
                .await?;
            let who = accepted_field(answer(&answers, "user_name")?, "name")
                .unwrap_or_else(|| "stranger".to_owned());
            Escalate(Job::DelayedGreeting { name: who })
        }
        ToolId::Dynamic => Done(text(
            "test_dynamic_tool answered; test_trigger_tool_change removes it again",
        )),
    };
    Ok(outcome)
}

/// Runs long work to its `CallToolResult`.
pub async fn run_job(job: &Job, cx: &mut Interaction) -> Result<Value, Interrupt> {
    match job {
        Job::SlowCompute { seconds, label } => {
            // Whole milliseconds; the argument was clamped to 0..=300 s.
            let ms = (seconds * 1000.0).round();
            let ms = if ms.is_finite() && ms > 0.0 {
                ms as u64
            } else {
                0
            };
            cx.pause(ms).await?;
            Ok(text(format!(
                "slow_compute finished after {seconds} s (label: {label:?})"
            )))
        }
        Job::FailingJob => {
            cx.pause(1000).await?;
            Ok(tool_error(
                "failing_job failed on purpose: a tool execution error, reported as a result",
            ))
        }
        Job::ProtocolErrorJob => {
            cx.pause(200).await?;
            Err(Interrupt::Failed(RpcError::internal(
                "protocol_error_job failed on purpose with a protocol-level error",
            )))
        }
        Job::ConfirmDelete { filename } => {
            let schema = json!({
                "type": "object",
                "properties": { "confirm": { "type": "boolean", "description": "Delete it?" } },
                "required": ["confirm"],
            });
            let answers = cx
                .ask(vec![elicit(
                    "confirm",
                    &format!("Delete {filename}?"),
                    schema,
                )])
                .await?;
            let confirmed = answer(&answers, "confirm")?;
            let yes = confirmed.get("action").and_then(Value::as_str) == Some("accept")
                && confirmed
                    .get("content")
                    .and_then(|c| c.get("confirm"))
                    .and_then(Value::as_bool)
                    == Some(true);
            Ok(text(if yes {
                format!("Deleted {filename} (pretend)")
            } else {
                format!("Kept {filename}: {}", describe_elicitation(confirmed))
            }))
        }
        Job::MultiInput => {
            let answers = cx
                .ask(vec![
                    elicit("first", "First question: your name?", text_schema("name")),
                    elicit(
                        "second",
                        "Second question: your nickname?",
                        text_schema("name"),
                    ),
                ])
                .await?;
            Ok(text(format!(
                "first: {}; second: {}",
                describe_elicitation(answer(&answers, "first")?),
                describe_elicitation(answer(&answers, "second")?)
            )))
        }
        Job::DelayedGreeting { name } => {
            cx.pause(300).await?;
            Ok(text(format!("Hello, {name}! (greeted from a task)")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_valid_and_the_first_tool_needs_no_arguments() {
        let mut seen = std::collections::HashSet::new();
        for spec in listed(true) {
            assert!(seen.insert(spec.name), "duplicate tool {}", spec.name);
            assert!(
                !spec.name.is_empty()
                    && spec.name.len() <= 128
                    && spec
                        .name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)),
                "bad tool name {}",
                spec.name
            );
            assert_eq!((spec.input_schema)()["type"], "object", "{}", spec.name);
        }
        assert_eq!(TOOLS.first().map(|t| t.name), Some("test_simple_text"));
        assert!(find("test_dynamic_tool", false).is_none());
        assert!(find("test_dynamic_tool", true).is_some());
    }
}
