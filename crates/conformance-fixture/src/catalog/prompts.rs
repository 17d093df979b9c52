//! The fixture's prompts: definitions (`prompts/list`) and their messages (`prompts/get`).
//!
//! `test_input_required_result_prompt` shows that asking the client for input is not limited to
//! tools: it needs a context from the user before it can render.

use serde_json::{Map, Value, json};

use crate::catalog::media::RED_PIXEL_PNG;
use crate::error::RpcError;
use crate::interaction::{InputMethod, InputRequest, Interaction, Interrupt};

/// Every prompt the fixture knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptId {
    Simple,
    WithArguments,
    EmbeddedResource,
    WithImage,
    AskFirst,
    Dynamic,
}

/// One prompt's definition.
#[derive(Debug)]
pub struct PromptSpec {
    pub id: PromptId,
    pub name: &'static str,
    pub description: &'static str,
    /// `(name, description)` of each required argument.
    pub arguments: &'static [(&'static str, &'static str)],
}

pub static PROMPTS: &[PromptSpec] = &[
    PromptSpec {
        id: PromptId::Simple,
        name: "test_simple_prompt",
        description: "A prompt without arguments.",
        arguments: &[],
    },
    PromptSpec {
        id: PromptId::WithArguments,
        name: "test_prompt_with_arguments",
        description: "A prompt that substitutes two arguments.",
        arguments: &[
            ("arg1", "First test argument"),
            ("arg2", "Second test argument"),
        ],
    },
    PromptSpec {
        id: PromptId::EmbeddedResource,
        name: "test_prompt_with_embedded_resource",
        description: "A prompt that embeds a resource.",
        arguments: &[("resourceUri", "URI of the resource to embed")],
    },
    PromptSpec {
        id: PromptId::WithImage,
        name: "test_prompt_with_image",
        description: "A prompt with an image.",
        arguments: &[],
    },
    PromptSpec {
        id: PromptId::AskFirst,
        name: "test_input_required_result_prompt",
        description: "A prompt that first asks the user for a context (input key user_context).",
        arguments: &[],
    },
];

/// The prompt `test_trigger_prompt_change` adds and removes.
pub static DYNAMIC_PROMPT: PromptSpec = PromptSpec {
    id: PromptId::Dynamic,
    name: "test_dynamic_prompt",
    description: "Listed only while test_trigger_prompt_change has switched it on.",
    arguments: &[],
};

pub fn listed(dynamic: bool) -> impl Iterator<Item = &'static PromptSpec> {
    PROMPTS
        .iter()
        .chain(std::iter::once(&DYNAMIC_PROMPT).filter(move |_| dynamic))
}

pub fn find(name: &str, dynamic: bool) -> Option<&'static PromptSpec> {
    listed(dynamic).find(|p| p.name == name)
}

/// A prompt's entry in `prompts/list`.
pub fn definition(spec: &PromptSpec) -> Value {
    let arguments: Vec<Value> = spec
        .arguments
        .iter()
        .map(|(name, description)| json!({ "name": name, "description": description, "required": true }))
        .collect();
    let mut prompt = json!({ "name": spec.name, "description": spec.description });
    if !arguments.is_empty()
        && let Some(obj) = prompt.as_object_mut()
    {
        obj.insert("arguments".to_owned(), Value::Array(arguments));
    }
    prompt
}

fn user_text(text: impl Into<String>) -> Value {
    json!({ "role": "user", "content": { "type": "text", "text": text.into() } })
}

/// Renders a prompt (`GetPromptResult`).
pub async fn get(
    spec: &PromptSpec,
    args: &Map<String, Value>,
    cx: &mut Interaction,
) -> Result<Value, Interrupt> {
    let arg = |name: &str| -> Result<String, Interrupt> {
        match args.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(Interrupt::Failed(RpcError::invalid_params(format!(
                "prompt {} needs the string argument {name:?}",
                spec.name
            )))),
        }
    };
    let messages = match spec.id {
        PromptId::Simple => vec![user_text("This is a simple prompt for testing.")],
        PromptId::WithArguments => {
            let (a, b) = (arg("arg1")?, arg("arg2")?);
            vec![user_text(format!(
                "Prompt with arguments: arg1='{a}', arg2='{b}'"
            ))]
        }
        PromptId::EmbeddedResource => {
            let uri = arg("resourceUri")?;
            vec![
                json!({
                    "role": "user",
                    "content": {
                        "type": "resource",
                        "resource": {
                            "uri": uri,
                            "mimeType": "text/plain",
                            "text": "Embedded resource content for testing.",
                        },
                    },
                }),
                user_text("Please process the embedded resource above."),
            ]
        }
        PromptId::WithImage => vec![
            json!({
                "role": "user",
                "content": { "type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png" },
            }),
            user_text("Please analyze the image above."),
        ],
        PromptId::AskFirst => {
            let schema = json!({
                "type": "object",
                "properties": { "context": { "type": "string" } },
                "required": ["context"],
            });
            let request = InputRequest::new(
                "user_context",
                InputMethod::Elicitation,
                json!({ "message": "What context should the prompt use?", "requestedSchema": schema }),
            );
            let answers = cx.ask(vec![request]).await?;
            let context = answers
                .get("user_context")
                .filter(|a| a.get("action").and_then(Value::as_str) == Some("accept"))
                .and_then(|a| a.get("content"))
                .and_then(|c| c.get("context"))
                .and_then(Value::as_str)
                .unwrap_or("(no context given)")
                .to_owned();
            vec![user_text(format!("Answer using this context: {context}"))]
        }
        PromptId::Dynamic => vec![user_text("test_dynamic_prompt rendered.")],
    };
    Ok(json!({ "description": spec.description, "messages": messages }))
}
