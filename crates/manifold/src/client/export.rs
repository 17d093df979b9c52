//! `manifold export --format openai|anthropic|gemini TARGET`: a server's tools (or, pointed at
//! Manifold, every exposed tool) as the tool definitions those model APIs take, so a program that
//! calls a model directly can hand it the same tools an MCP client sees. Output is the value of
//! the API's `tools` field, on stdout; a tool whose name the API would refuse is left out and named
//! on stderr.

use serde_json::{Value, json};

use manifold_upstream::paginate::ListKind;

use crate::args::{ExportFormat, TargetArgs};
use crate::report::{CliError, Outcome};

/// Longest function name the three APIs accept.
pub const MAX_FUNCTION_NAME_LEN: usize = 64;

/// Whether `name` is a function name `format` accepts: `[A-Za-z0-9_-]{1,64}` for OpenAI and
/// Anthropic; Gemini also wants a letter or `_` first.
pub fn accepts_name(format: ExportFormat, name: &str) -> bool {
    let charset = !name.is_empty()
        && name.len() <= MAX_FUNCTION_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match format {
        ExportFormat::Gemini => {
            charset && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        }
        ExportFormat::Openai | ExportFormat::Anthropic => charset,
    }
}

/// The `tools` value of `format`'s API for MCP tool definitions `tools`, and the names left out.
pub fn convert(format: ExportFormat, tools: &[Value]) -> (Value, Vec<String>) {
    let mut left_out = Vec::new();
    let mut functions = Vec::new();
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or_default();
        if !accepts_name(format, name) {
            left_out.push(name.to_owned());
            continue;
        }
        let description = tool["description"]
            .as_str()
            .or_else(|| tool["title"].as_str())
            .unwrap_or_default();
        let schema = match &tool["inputSchema"] {
            Value::Object(o) if !o.is_empty() => Value::Object(o.clone()),
            _ => json!({ "type": "object", "properties": {} }),
        };
        functions.push(match format {
            ExportFormat::Openai => json!({
                "type": "function",
                "function": { "name": name, "description": description, "parameters": schema },
            }),
            ExportFormat::Anthropic => json!({
                "name": name, "description": description, "input_schema": schema,
            }),
            ExportFormat::Gemini => json!({
                "name": name, "description": description, "parametersJsonSchema": schema,
            }),
        });
    }
    let value = match format {
        ExportFormat::Gemini => json!([{ "functionDeclarations": functions }]),
        ExportFormat::Openai | ExportFormat::Anthropic => Value::Array(functions),
    };
    (value, left_out)
}

/// The target narrowed to a gateway's tool set: `.../mcp` becomes `.../mcp/NAME`, and
/// `-- manifold stdio ...` gets `--toolset NAME`.
fn in_toolset(args: &TargetArgs, toolset: &str) -> Result<TargetArgs, CliError> {
    let mut narrowed = args.clone();
    if let Some(first) = narrowed.positional.first_mut()
        && (first.starts_with("http://") || first.starts_with("https://"))
    {
        let mut url = url::Url::parse(first)
            .map_err(|e| CliError::usage(format!("{first} is not a URL: {e}")))?;
        if !url.path().trim_end_matches('/').ends_with("/mcp") {
            return Err(CliError::with_hint(
                format!("--toolset needs a Manifold gateway's /mcp URL, not {first}"),
                "write e.g. manifold export --format openai --toolset coding http://127.0.0.1:7391/mcp",
            ));
        }
        let path = format!("{}/{toolset}", url.path().trim_end_matches('/'));
        url.set_path(&path);
        *first = url.to_string();
        return Ok(narrowed);
    }
    let is_manifold_stdio = narrowed
        .command
        .first()
        .is_some_and(|c| c.ends_with("manifold"))
        && narrowed.command.get(1).is_some_and(|a| a == "stdio");
    if is_manifold_stdio {
        narrowed
            .command
            .extend(["--toolset".to_owned(), toolset.to_owned()]);
        return Ok(narrowed);
    }
    Err(CliError::with_hint(
        "--toolset narrows a Manifold gateway: give its /mcp URL, or -- manifold stdio".to_owned(),
        "write e.g. manifold export --format openai --toolset coding http://127.0.0.1:7391/mcp",
    ))
}

/// `manifold export --format FORMAT [--toolset NAME] TARGET`.
pub async fn export(
    format: ExportFormat,
    toolset: Option<&str>,
    args: &TargetArgs,
) -> Result<Outcome, CliError> {
    let narrowed;
    let args = match toolset {
        Some(name) => {
            narrowed = in_toolset(args, name)?;
            &narrowed
        }
        None => args,
    };
    super::with_session(
        args,
        0,
        "manifold export --format openai|anthropic|gemini URL | ... -- COMMAND ARGS...",
        |s, _| async move {
            let result = async {
                let items = s
                    .conn
                    .list_all(ListKind::Tools, s.first_list_options())
                    .await?;
                let tools: Vec<Value> = items
                    .iter()
                    .filter_map(|r| serde_json::from_str(r.get()).ok())
                    .collect();
                let (value, left_out) = convert(format, &tools);
                if !left_out.is_empty() {
                    eprintln!(
                        "left out {} tool(s) whose names the API would refuse (at most {MAX_FUNCTION_NAME_LEN} characters of A-Z a-z 0-9 _ -): {}",
                        left_out.len(),
                        left_out.join(", ")
                    );
                }
                let text = serde_json::to_string_pretty(&value)
                    .map_err(|e| CliError::usage(format!("could not write the tools: {e}")))?;
                println!("{text}");
                Ok(Outcome::Success)
            }
            .await;
            (s.conn, result)
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_toolset_narrows_a_gateway_url_or_its_stdio_command_and_nothing_else() {
        use clap::Parser;
        let target = |words: &[&str]| {
            let mut argv = vec!["manifold", "list", "tools"];
            argv.extend(words);
            match crate::args::Cli::try_parse_from(argv).unwrap().command {
                crate::args::Command::List { target, .. } => target,
                _ => unreachable!(),
            }
        };
        let url = in_toolset(&target(&["http://127.0.0.1:7391/mcp"]), "coding").unwrap();
        assert_eq!(url.positional, ["http://127.0.0.1:7391/mcp/coding"]);
        let stdio = in_toolset(&target(&["--", "/usr/bin/manifold", "stdio"]), "coding").unwrap();
        assert_eq!(
            stdio.command,
            ["/usr/bin/manifold", "stdio", "--toolset", "coding"]
        );
        assert!(in_toolset(&target(&["https://api.example.com/other"]), "x").is_err());
        assert!(in_toolset(&target(&["--", "npx", "server"]), "x").is_err());
    }

    fn tools() -> Vec<Value> {
        vec![
            json!({"name": "git__push", "description": "Push", "inputSchema": {"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]}}),
            json!({"name": "9lives", "title": "Starts with a digit", "inputSchema": {"type": "object"}}),
            json!({"name": "has.dot", "inputSchema": {"type": "object"}}),
        ]
    }

    #[test]
    fn each_format_carries_name_description_and_schema_and_leaves_out_names_it_refuses() {
        let (openai, out) = convert(ExportFormat::Openai, &tools());
        assert_eq!(out, ["has.dot"]);
        assert_eq!(openai[0]["type"], "function");
        assert_eq!(openai[0]["function"]["name"], "git__push");
        assert_eq!(openai[0]["function"]["parameters"]["required"][0], "branch");
        assert_eq!(openai[1]["function"]["description"], "Starts with a digit");
        let (anthropic, _) = convert(ExportFormat::Anthropic, &tools());
        assert_eq!(
            anthropic[0]["input_schema"]["properties"]["branch"]["type"],
            "string"
        );
        let (gemini, out) = convert(ExportFormat::Gemini, &tools());
        assert_eq!(out, ["9lives", "has.dot"]);
        let declarations = gemini[0]["functionDeclarations"].as_array().unwrap();
        assert_eq!(declarations.len(), 1);
        assert_eq!(declarations[0]["parametersJsonSchema"]["type"], "object");
    }
}
