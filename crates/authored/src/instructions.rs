//! `manifold_instructions`: how to author a tool here, for the model that will write one. The
//! numbers come from the constants that enforce them.

use crate::definition::{
    DEFAULT_TIMEOUT_MS, MAX_CODE_BYTES, MAX_DESCRIPTION_BYTES, MAX_NAME_LEN, MAX_TIMEOUT_MS,
};
use crate::dependencies::MAX_DEPENDENCIES;
use crate::runner::{MAX_STDERR_BYTES, MAX_STDOUT_BYTES, TOOL_MEMORY, TOOL_PIDS};

/// The instructions text.
pub fn text() -> String {
    format!(
        r#"# Authoring tools in Manifold

A tool you create with manifold_create_tool is offered at once to every client of this gateway,
under its own name (no server prefix), and kept with its history in Manifold's store.

## Fields
- name: letters, digits, '_' and '-', at most {MAX_NAME_LEN} characters; not a built-in's or a server tool's name.
- title (optional), description (required, at most {MAX_DESCRIPTION_BYTES} bytes: say when to use it).
- inputSchema: a JSON Schema 2020-12 object schema (default: no arguments). Arguments are checked
  against it before the code runs.
- outputSchema (optional): an object schema; the code must then print one JSON value matching it,
  which clients get as structuredContent.
- annotations (optional): readOnlyHint, destructiveHint, idempotentHint, openWorldHint, title.
- language: python, node or sh. code: the program, at most {MAX_CODE_BYTES} bytes.
- dependencies (optional, python and node): at most {MAX_DEPENDENCIES} pinned requirements,
  "name==1.2.3" (PyPI) or "name@1.2.3" (npm), installed once and cached.
- timeout (optional): seconds, default {default_timeout}, at most {max_timeout}.

## The call contract
- The arguments arrive as one JSON object on stdin.
- Print the result on stdout; print JSON matching outputSchema when you declared one.
- Exit 0 on success. Any other exit code, or the timeout, makes the call a tool error; stderr is
  shown after a [stderr] line, the code as [exit N].
- Environment: MANIFOLD_TOOL_NAME, MANIFOLD_TOOL_VERSION, HOME=/home/sandbox, TMPDIR=/tmp,
  PATH={path}.

## Where it runs
- In a sandbox: no network, a read-only system, a private /tmp, and /workspace, which is this
  tool's own directory and survives between its calls. Nothing else of the host is visible.
- At most {memory} MiB of memory and {pids} processes; stdout is kept up to {stdout} KiB and
  stderr up to {stderr} KiB.
- A cancelled or timed-out call is killed with everything it started.

## Changing tools
manifold_update_tool (the fields you give replace the old), manifold_disable_tool,
manifold_enable_tool, manifold_delete_tool, manifold_tool_history (versions, authors, times,
diffs) and manifold_rollback_tool (a version's definition becomes the newest).

## Example
{{"name": "word_count", "description": "Counts the words of a text",
 "inputSchema": {{"type": "object", "properties": {{"text": {{"type": "string"}}}}, "required": ["text"]}},
 "outputSchema": {{"type": "object", "properties": {{"words": {{"type": "integer"}}}}, "required": ["words"]}},
 "language": "python",
 "code": "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps({{\"words\": len(args[\"text\"].split())}}))"}}
"#,
        default_timeout = DEFAULT_TIMEOUT_MS / 1000,
        max_timeout = MAX_TIMEOUT_MS / 1000,
        path = crate::runner::TOOL_PATH,
        memory = TOOL_MEMORY / (1024 * 1024),
        pids = TOOL_PIDS,
        stdout = MAX_STDOUT_BYTES / 1024,
        stderr = MAX_STDERR_BYTES / 1024,
    )
}
