//! The person at the terminal: progress bars, and answers to a server's elicitation and sampling
//! requests when `--interactive` is given.
//!
//! Without `--interactive` the client declares no capabilities and refuses such requests with a
//! clear reason (the upstream crate's `RefuseServerRequests`).

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use futures::future::BoxFuture;
use manifold_upstream::{ServerRequest, ServerRequestHandler};
use manifold_wire::{ErrorCode, ErrorObject};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

/// Capabilities declared with `--interactive`.
pub const INTERACTIVE_CAPABILITIES: &str =
    r#"{"elicitation":{},"sampling":{},"roots":{"listChanged":false}}"#;

/// Answers server requests by asking on stderr and reading stdin, one question at a time.
#[derive(Default)]
pub struct TerminalHandler {
    turn: Arc<Mutex<()>>,
}

async fn ask(question: String) -> Result<String, ErrorObject> {
    tokio::task::spawn_blocking(move || {
        let mut err = std::io::stderr();
        let _ = write!(err, "{question}");
        let _ = err.flush();
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
        }
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| {
        ErrorObject::new(
            ErrorCode::InternalError,
            "no answer: standard input is closed",
        )
    })
}

fn typed_answer(raw: &str, prop: &Value) -> Value {
    match prop.get("type").and_then(Value::as_str) {
        Some("integer") => raw
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(raw)),
        Some("number") => raw
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(raw)),
        Some("boolean") => Value::Bool(matches!(raw, "true" | "yes" | "y")),
        _ => Value::from(raw),
    }
}

async fn elicit(params: Value) -> Result<String, ErrorObject> {
    let message = params
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("The server asks for input.");
    eprintln!("\nThe server asks: {message}");
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        let url = params.get("url").and_then(Value::as_str).unwrap_or("");
        eprintln!("  open: {url}");
        let yes = ask("  done? [y/N] ".to_owned()).await?;
        let action = if matches!(yes.as_str(), "y" | "yes") {
            "accept"
        } else {
            "decline"
        };
        return Ok(json!({ "action": action }).to_string());
    }
    let props = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, prop) in &props {
        let kind = prop.get("type").and_then(Value::as_str).unwrap_or("string");
        let hint = prop
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let raw = ask(format!("  {name} ({kind}) {hint}: ")).await?;
        if !raw.is_empty() {
            content.insert(name.clone(), typed_answer(&raw, prop));
        }
    }
    Ok(json!({ "action": "accept", "content": content }).to_string())
}

async fn sample(params: Value) -> Result<String, ErrorObject> {
    eprintln!("\nThe server asks for a completion (sampling). Its messages:");
    for m in params
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        let text = m
            .pointer("/content/text")
            .and_then(Value::as_str)
            .unwrap_or("[non-text content]");
        eprintln!("  {role}: {text}");
    }
    let reply = ask("  your reply: ".to_owned()).await?;
    Ok(json!({
        "role": "assistant",
        "content": { "type": "text", "text": reply },
        "model": "manifold-cli-user",
        "stopReason": "endTurn"
    })
    .to_string())
}

impl ServerRequestHandler for TerminalHandler {
    fn handle(&self, request: ServerRequest) -> BoxFuture<'static, Result<String, ErrorObject>> {
        let turn = Arc::clone(&self.turn);
        Box::pin(async move {
            let _one_at_a_time = turn.lock().await;
            let params: Value = request
                .params
                .as_deref()
                .and_then(|p| serde_json::from_str(p).ok())
                .unwrap_or(Value::Null);
            match request.method.as_str() {
                "elicitation/create" => elicit(params).await,
                "sampling/createMessage" => sample(params).await,
                "roots/list" => {
                    let cwd = std::env::current_dir()
                        .map(|d| d.display().to_string())
                        .unwrap_or_default();
                    Ok(json!({ "roots": [{ "uri": format!("file://{cwd}"), "name": "working directory" }] }).to_string())
                }
                other => Err(ErrorObject::new(
                    ErrorCode::MethodNotFound,
                    format!("this client does not handle {other}"),
                )),
            }
        })
    }
}

/// A one-line progress bar on stderr, drawn only on a terminal.
pub struct ProgressBar {
    enabled: bool,
    drawn: bool,
}

impl ProgressBar {
    pub fn new() -> ProgressBar {
        ProgressBar {
            enabled: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    /// Draws a `notifications/progress` params object.
    pub fn update(&mut self, params: &Value) {
        if !self.enabled {
            return;
        }
        let progress = params
            .get("progress")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let total = params.get("total").and_then(Value::as_f64);
        let message = params.get("message").and_then(Value::as_str).unwrap_or("");
        const WIDTH: usize = 30;
        let line = match total {
            Some(t) if t > 0.0 => {
                let frac = (progress / t).clamp(0.0, 1.0);
                // Truncation is the intent: a partly filled cell shows as empty.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let filled = (frac * WIDTH as f64) as usize;
                format!(
                    "[{}{}] {:>3.0}% {message}",
                    "#".repeat(filled),
                    "-".repeat(WIDTH - filled.min(WIDTH)),
                    frac * 100.0
                )
            }
            _ => format!("[{progress}] {message}"),
        };
        eprint!("\r\x1b[2K{line}");
        self.drawn = true;
    }

    /// Ends the bar's line so later output starts clean.
    pub fn finish(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}
