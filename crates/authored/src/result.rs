//! What a client gets back from an authored tool: stdout as text (or "(no output)"), then
//! `[stderr]`, `[exit N]`, `[timeout]` lines; `isError` when it failed; `structuredContent` when
//! stdout is one JSON value that fits the tool's outputSchema (a misfit is a tool error saying
//! why). Arguments are checked against the inputSchema before anything runs.

use serde_json::{Value, json};

use crate::definition::ToolDefinition;
use crate::runner::{MAX_STDOUT_BYTES, Run};

/// A tool result with one text block.
pub fn text_result(text: &str, is_error: bool) -> String {
    json!({ "content": [{ "type": "text", "text": text }], "isError": is_error }).to_string()
}

/// The first problem of `value` against `schema`, as "where: what (rule)", if any.
pub fn schema_problem(schema: &Value, value: &Value) -> Option<String> {
    let validator = match jsonschema::draft202012::new(schema) {
        Ok(v) => v,
        Err(e) => return Some(format!("the schema cannot be compiled: {e}")),
    };
    let e = validator.iter_errors(value).next()?;
    let at = e.instance_path.to_string();
    let at = if at.is_empty() { "/".to_owned() } else { at };
    Some(format!("{at}: {e} (rule {})", e.schema_path))
}

/// The arguments refused before the tool runs, as a tool error; `None` when they fit.
pub fn check_arguments(def: &ToolDefinition, arguments: &Value) -> Option<String> {
    schema_problem(&def.input_schema, arguments).map(|problem| {
        text_result(
            &format!(
                "the arguments do not match {}'s inputSchema at {problem}; fix them and call again",
                def.name
            ),
            true,
        )
    })
}

/// The result of a finished run.
pub fn of_run(def: &ToolDefinition, run: &Run) -> String {
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let mut text = if stdout.is_empty() {
        "(no output)".to_owned()
    } else {
        stdout.clone().into_owned()
    };
    if run.stdout_truncated {
        text.push_str(&format!("\n[output truncated at {MAX_STDOUT_BYTES} bytes]"));
    }
    if !stderr.trim().is_empty() {
        text.push_str("\n[stderr]\n");
        text.push_str(stderr.trim_end());
    }
    if run.timed_out {
        text.push_str(&format!(
            "\n[timeout] after {} s; the tool and everything it started were killed",
            def.timeout_ms as f64 / 1000.0
        ));
    } else {
        match run.exit {
            Some(0) => {}
            Some(code) => text.push_str(&format!("\n[exit {code}]")),
            None => text.push_str("\n[killed by a signal]"),
        }
    }
    let failed = run.timed_out || run.exit != Some(0);
    if failed {
        return text_result(&text, true);
    }
    let parsed: Option<Value> = (!run.stdout_truncated)
        .then(|| serde_json::from_str(stdout.trim()).ok())
        .flatten();
    match (&def.output_schema, parsed) {
        (Some(schema), Some(value)) => match schema_problem(schema, &value) {
            None => with_structured(&text, value),
            Some(problem) => text_result(
                &format!("{text}\n[output does not match the outputSchema at {problem}]"),
                true,
            ),
        },
        (Some(_), None) => text_result(
            &format!(
                "{text}\n[the tool declares an outputSchema, so it must print one JSON value that matches it]"
            ),
            true,
        ),
        (None, Some(value)) if value.is_object() => with_structured(&text, value),
        (None, _) => text_result(&text, false),
    }
}

fn with_structured(text: &str, value: Value) -> String {
    json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": value,
        "isError": false,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(output_schema: Option<Value>) -> ToolDefinition {
        let mut args = json!({"name": "t", "description": "d", "language": "sh", "code": "true",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}});
        if let Some(s) = output_schema {
            args["outputSchema"] = s;
        }
        ToolDefinition::from_arguments(&args, None).unwrap()
    }

    fn run(stdout: &str, stderr: &str, exit: Option<i32>, timed_out: bool) -> Run {
        Run {
            stdout: stdout.as_bytes().to_vec(),
            stdout_truncated: false,
            stderr: stderr.as_bytes().to_vec(),
            exit,
            timed_out,
        }
    }

    fn parsed(raw: &str) -> Value {
        serde_json::from_str(raw).unwrap()
    }

    #[test]
    fn output_lines_follow_the_contract() {
        let d = def(None);
        let r = parsed(&of_run(&d, &run("", "", Some(0), false)));
        assert_eq!(r["content"][0]["text"], "(no output)");
        assert_eq!(r["isError"], false);
        let r = parsed(&of_run(&d, &run("hi\n", "warn\n", Some(3), false)));
        assert_eq!(r["content"][0]["text"], "hi\n\n[stderr]\nwarn\n[exit 3]");
        assert_eq!(r["isError"], true);
        let r = parsed(&of_run(&d, &run("", "", None, true)));
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("[timeout]")
        );
        assert_eq!(r["isError"], true);
    }

    #[test]
    fn json_stdout_becomes_structured_content_only_when_it_fits_the_output_schema() {
        let schema = json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]});
        let d = def(Some(schema));
        let r = parsed(&of_run(&d, &run("{\"sum\": 3}\n", "", Some(0), false)));
        assert_eq!(r["structuredContent"]["sum"], 3);
        assert_eq!(r["isError"], false);
        let r = parsed(&of_run(&d, &run("{\"sum\": \"x\"}", "", Some(0), false)));
        assert_eq!(r["isError"], true);
        assert!(
            r["content"][0]["text"].as_str().unwrap().contains("/sum"),
            "{r}"
        );
        let r = parsed(&of_run(&d, &run("three", "", Some(0), false)));
        assert_eq!(r["isError"], true);
        let free = parsed(&of_run(&def(None), &run("{\"a\":1}", "", Some(0), false)));
        assert_eq!(free["structuredContent"]["a"], 1);
    }

    #[test]
    fn arguments_are_checked_with_the_path_and_the_rule() {
        let d = def(None);
        assert!(check_arguments(&d, &json!({"n": 2})).is_none());
        let refused = parsed(&check_arguments(&d, &json!({"n": 0})).unwrap());
        let text = refused["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("/n") && text.contains("minimum"), "{text}");
        let missing = parsed(&check_arguments(&d, &json!({})).unwrap());
        assert!(
            missing["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("required")
        );
    }
}
