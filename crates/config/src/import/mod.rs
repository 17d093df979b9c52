//! `manifold import`: turns an MCP client's JSON configuration (Claude Desktop, Cursor, Claude
//! Code's `.mcp.json`, Windsurf: `{"mcpServers": {...}}`; VS Code: `{"servers": {...},
//! "inputs": [...]}`) into Manifold TOML. The output is meant to be read by a person, so it is
//! stable (servers by name, keys in a fixed order) and says in comments what did not carry
//! over. Values are copied as written: references stay references, literal secrets stay
//! literal (with a note), nothing is resolved. Every output loads with `Config::from_str`
//! (given the variables it references). An entry of the official MCP registry (`server.json`)
//! is converted by `registry.rs`.

pub mod jsonc;
mod references;
pub mod registry;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::error::ImportError;
use crate::load::{RESERVED_HEADERS, looks_like_command_line, url_problem, uses_shell_syntax};
use crate::names::{MAX_NAME_LEN, sanitize_name};
use crate::toml_text::{comment_text, toml_key, toml_string};
use jsonc::strip_jsonc;
use references::{input_variable, translate, translate_with_flag};

/// Which client layout the JSON has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `mcpServers`: Claude Desktop, Cursor, Claude Code, Windsurf.
    McpServers,
    /// `servers` (and `inputs`): VS Code.
    VsCode,
}

/// Keys of a client's server entry that the conversion reads.
const READ_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "serverUrl",
    "headers",
    "disabled",
    "enabled",
];

/// Converts a client's JSON configuration into Manifold TOML.
pub fn import(json_text: &str, source_name: &str) -> Result<String, ImportError> {
    let source = comment_text(source_name);
    let plain = strip_jsonc(json_text).map_err(|e| ImportError::NotJson {
        source_name: source_name.to_owned(),
        line: e.line,
        column: e.column,
        reason: e.to_string(),
    })?;
    let json: Value = serde_json::from_str(&plain).map_err(|e| {
        let text = e.to_string();
        let reason = match text.rfind(" at line ") {
            Some(i) => text.get(..i).unwrap_or_default().to_owned(),
            None => text,
        };
        ImportError::NotJson {
            source_name: source_name.to_owned(),
            line: e.line(),
            column: e.column(),
            reason,
        }
    })?;
    if registry::is_registry_entry(&json) {
        return registry::import_entry(&json, source_name);
    }
    let (layout, servers, inputs) = find_servers(&json).ok_or_else(|| ImportError::NoServers {
        source_name: source_name.to_owned(),
        found: describe_top_level(&json),
    })?;

    let mut out = String::new();
    out.push_str(&format!(
        "# Manifold configuration imported from {source} by `manifold import`.\n"
    ));
    out.push_str(
        "# Review it, then run `manifold check` on it. Comments note what did not carry over.\n",
    );
    if layout == Layout::McpServers && json.get("servers").is_some_and(Value::is_object) {
        out.push_str("# The \"servers\" object next to \"mcpServers\" was not imported.\n");
    }
    if let Some(inputs) = inputs {
        write_inputs(&mut out, inputs);
    }

    let mut names: Vec<&String> = servers.keys().collect();
    names.sort_by_key(|n| (n.to_lowercase(), n.as_str()));
    if names.is_empty() {
        out.push_str(&format!("\n# {source} lists no servers.\n"));
    }
    let mut taken = BTreeSet::new();
    for original in names {
        let Some(entry) = servers.get(original) else {
            continue;
        };
        match convert(entry, layout) {
            Ok(server) => {
                let name = unique_name(original, &mut taken);
                write_server(&mut out, original, &name, &source, &server);
            }
            Err(reason) => {
                out.push_str(&format!(
                    "\n# Not imported: {:?}: {}\n",
                    comment_text(original),
                    comment_text(&reason)
                ));
            }
        }
    }
    Ok(out)
}

type Servers<'a> = &'a Map<String, Value>;

fn find_servers(json: &Value) -> Option<(Layout, Servers<'_>, Option<&Vec<Value>>)> {
    if let Some(servers) = json.get("mcpServers").and_then(Value::as_object) {
        return Some((Layout::McpServers, servers, None));
    }
    if let Some((servers, inputs)) = vscode_servers(json) {
        return Some((Layout::VsCode, servers, inputs));
    }
    // VS Code's settings.json nests the same under "mcp".
    json.get("mcp")
        .and_then(vscode_servers)
        .map(|(servers, inputs)| (Layout::VsCode, servers, inputs))
}

fn vscode_servers(v: &Value) -> Option<(Servers<'_>, Option<&Vec<Value>>)> {
    v.get("servers")
        .and_then(Value::as_object)
        .map(|servers| (servers, v.get("inputs").and_then(Value::as_array)))
}

fn describe_top_level(json: &Value) -> String {
    match json.as_object() {
        Some(map) if map.is_empty() => "it is an empty object".to_owned(),
        Some(map) => {
            let keys: Vec<String> = map
                .keys()
                .take(10)
                .map(|k| format!("{:?}", comment_text(k)))
                .collect();
            format!("its top-level keys are {}", keys.join(", "))
        }
        None => "it is not a JSON object".to_owned(),
    }
}

fn write_inputs(out: &mut String, inputs: &[Value]) {
    if inputs.is_empty() {
        return;
    }
    out.push_str("#\n# The client prompted for these inputs; Manifold does not prompt, and reads\n# an environment variable instead of each:\n");
    for input in inputs {
        let id = input.get("id").and_then(Value::as_str).unwrap_or("?");
        let kind = input.get("type").and_then(Value::as_str).unwrap_or("?");
        let mut line = format!("#   input {:?} ({kind}", comment_text(id));
        if input.get("password").and_then(Value::as_bool) == Some(true) {
            line.push_str(", password");
        }
        line.push(')');
        if let Some(d) = input.get("description").and_then(Value::as_str) {
            line.push_str(&format!(" {:?}", comment_text(d)));
        }
        line.push_str(&format!(" -> ${{{}}}", input_variable(id)));
        out.push_str(&comment_text(&line));
        out.push('\n');
    }
}

/// A sanitized name no other server has (ignoring case, since prefixes default to names and
/// must differ ignoring case).
fn unique_name(original: &str, taken: &mut BTreeSet<String>) -> String {
    let base = sanitize_name(original);
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.contains(&candidate.to_ascii_lowercase()) {
        let suffix = format!("_{n}");
        let keep: String = base.chars().take(MAX_NAME_LEN - suffix.len()).collect();
        candidate = format!("{keep}{suffix}");
        n += 1;
    }
    taken.insert(candidate.to_ascii_lowercase());
    candidate
}

/// One converted server.
#[derive(Debug, Default)]
struct Converted {
    /// `key = value` lines of the server's own table, in order.
    lines: Vec<String>,
    env: Vec<(String, String, Option<&'static str>)>,
    headers: Vec<(String, String, Option<&'static str>)>,
    notes: Vec<String>,
}

const SECRET_HINT: &str =
    "looks like a secret: consider ${file:PATH} or ${VARIABLE} instead of the value";

/// Whether a variable or header name suggests its value is a credential. Names are split into
/// words so that e.g. `PATH` is not mistaken for `PAT`.
fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| {
            matches!(word, "PAT" | "KEY" | "PASS" | "PW" | "PWD")
                || [
                    "TOKEN",
                    "SECRET",
                    "PASSWORD",
                    "PASSWD",
                    "APIKEY",
                    "CREDENTIAL",
                    "COOKIE",
                    "AUTH",
                ]
                .iter()
                .any(|w| word.contains(w))
        })
}

/// A JSON scalar as text (strings as they are, numbers and booleans written out).
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn convert(entry: &Value, layout: Layout) -> Result<Converted, String> {
    let Some(obj) = entry.as_object() else {
        return Err("its entry is not a JSON object".to_owned());
    };
    let mut c = Converted::default();
    let kind = obj.get("type").and_then(Value::as_str);
    let command = obj
        .get("command")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty());
    let url = obj
        .get("url")
        .or_else(|| obj.get("serverUrl"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty());
    let http_type = matches!(
        kind,
        Some("sse" | "http" | "streamable-http" | "streamableHttp")
    );
    let stdio = match (kind, command, url) {
        (Some("stdio"), Some(_), _) => true,
        (Some("stdio"), None, _) => {
            return Err("its type is stdio, but it has no command".to_owned());
        }
        (_, _, Some(_)) if http_type => false,
        (_, _, None) if http_type => return Err("its type is HTTP, but it has no url".to_owned()),
        (_, Some(_), _) => true,
        (_, None, Some(_)) => false,
        (_, None, None) => return Err("it has neither command nor url".to_owned()),
    };
    if let Some(k) = kind
        && !matches!(
            k,
            "stdio" | "sse" | "http" | "streamable-http" | "streamableHttp"
        )
    {
        c.notes.push(format!(
            "type {k:?} is unknown; the server was read by its fields"
        ));
    }
    if let Some(t) = obj.get("type").filter(|t| !t.is_string()) {
        c.notes.push(format!(
            "type {t} is not a string; the server was read by its fields"
        ));
    }

    if stdio {
        convert_stdio(obj, command.unwrap_or_default(), &mut c)?;
        if url.is_some() {
            c.notes.push(
                "it also had a url, which was dropped (a Manifold server has command or url)"
                    .to_owned(),
            );
        }
    } else {
        convert_http(obj, url.unwrap_or_default(), kind, layout, &mut c)?;
        if command.is_some() {
            c.notes.push(
                "it also had a command, which was dropped (a Manifold server has command or url)"
                    .to_owned(),
            );
        }
    }

    let disabled = obj.get("disabled").and_then(Value::as_bool) == Some(true)
        || obj.get("enabled").and_then(Value::as_bool) == Some(false);
    if disabled {
        c.lines.push("enabled = false".to_owned());
    }
    let mut others: Vec<&String> = obj
        .keys()
        .filter(|k| !READ_KEYS.contains(&k.as_str()))
        .collect();
    others.sort();
    for key in others {
        let why = match key.as_str() {
            "envFile" => {
                "Manifold does not read env files; copy the variables into env (with ${file:PATH} for secrets)"
            }
            "alwaysAllow" | "autoApprove" | "disabledTools" => {
                "choose exposed tools with tools.allow and tools.deny"
            }
            "timeout" => "set timeout = \"60s\" (idle) and max_timeout = \"10m\" (cap) as needed",
            _ => "Manifold has no equivalent",
        };
        c.notes.push(format!("{key:?} was not carried over: {why}"));
    }
    Ok(c)
}

fn convert_stdio(obj: &Map<String, Value>, command: &str, c: &mut Converted) -> Result<(), String> {
    if uses_shell_syntax(command) {
        return Err("its command uses shell syntax (pipes, redirections, command lists or substitutions), which Manifold does not run through a shell; put it in a script and import again".to_owned());
    }
    let mut words: Vec<String> = vec![command.trim().to_owned()];
    if looks_like_command_line(command) {
        words = command.split_whitespace().map(str::to_owned).collect();
        c.notes.push(
            "command held a whole command line; it was split at spaces into command and args (check any quoting)"
                .to_owned(),
        );
    }
    let mut words = words.into_iter();
    let program = words.next().unwrap_or_default();
    let program = translate(&program, "command", &mut c.notes);
    c.lines.push(format!("command = {}", toml_string(&program)));

    let mut args: Vec<String> = words.map(|w| translate(&w, "args", &mut c.notes)).collect();
    match obj.get("args") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match scalar_text(item) {
                    Some(text) if !text.contains('\0') => {
                        args.push(translate(&text, &format!("args[{i}]"), &mut c.notes));
                    }
                    _ => c
                        .notes
                        .push(format!("args[{i}] is not text; it was dropped")),
                }
            }
        }
        Some(_) => c
            .notes
            .push("args is not an array; it was dropped".to_owned()),
    }
    if !args.is_empty() {
        let quoted: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
        c.lines.push(format!("args = [{}]", quoted.join(", ")));
    }
    if let Some(cwd) = obj
        .get("cwd")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        let cwd = translate(cwd, "cwd", &mut c.notes);
        c.lines.push(format!("cwd = {}", toml_string(&cwd)));
    }
    match obj.get("env") {
        None | Some(Value::Null) => {}
        Some(Value::Object(env)) => {
            let mut keys: Vec<&String> = env.keys().collect();
            keys.sort();
            for key in keys {
                let field = format!("env.{}", toml_key(key));
                if key.is_empty() || key.contains(['=', '\0']) {
                    c.notes.push(format!(
                        "{field} is not a valid variable name; it was dropped"
                    ));
                    continue;
                }
                match env
                    .get(key)
                    .and_then(scalar_text)
                    .filter(|v| !v.contains('\0'))
                {
                    Some(value) => {
                        let hint =
                            (looks_secret(key) && !value.contains("${") && !value.is_empty())
                                .then_some(SECRET_HINT);
                        let value = translate(&value, &field, &mut c.notes);
                        c.env.push((key.clone(), value, hint));
                    }
                    None => c.notes.push(format!("{field} is not text; it was dropped")),
                }
            }
        }
        Some(_) => c
            .notes
            .push("env is not an object; it was dropped".to_owned()),
    }
    Ok(())
}

fn is_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

fn convert_http(
    obj: &Map<String, Value>,
    url: &str,
    kind: Option<&str>,
    layout: Layout,
    c: &mut Converted,
) -> Result<(), String> {
    let literal = url.trim();
    let (url, references) = translate_with_flag(literal, "url", &mut c.notes);
    let mut insecure = false;
    // A URL built from references can only be checked once they are resolved, at load time.
    if !references {
        match url_problem(literal, false) {
            None => {}
            Some(_) if url_problem(literal, true).is_none() => {
                insecure = true;
                c.notes.push(
                    "the url is plain http:// to another machine; allow_insecure_http = true keeps it working, but prefer https"
                        .to_owned(),
                );
            }
            Some((problem, _)) => return Err(format!("its url {problem}")),
        }
    }
    c.lines.push(format!("url = {}", toml_string(&url)));
    let transport = match (kind, layout) {
        (Some("sse"), _) => Some("sse"),
        // Claude Code's "http" is Streamable HTTP; VS Code's "http" tries it and falls back.
        (Some("http" | "streamable-http" | "streamableHttp"), Layout::McpServers) => {
            Some("streamable-http")
        }
        _ => None,
    };
    if let Some(t) = transport {
        c.lines.push(format!("transport = {}", toml_string(t)));
    }
    if insecure {
        c.lines.push("allow_insecure_http = true".to_owned());
    }
    match obj.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(headers)) => {
            let mut keys: Vec<&String> = headers.keys().collect();
            keys.sort();
            for key in keys {
                let field = format!("headers.{}", toml_key(key));
                if !is_header_name(key) {
                    c.notes.push(format!(
                        "{field} is not a valid header name; it was dropped"
                    ));
                    continue;
                }
                if RESERVED_HEADERS.contains(&key.to_ascii_lowercase().as_str()) {
                    c.notes.push(format!(
                        "{field} is set by Manifold's transport itself; it was dropped"
                    ));
                    continue;
                }
                match headers
                    .get(key)
                    .and_then(scalar_text)
                    .filter(|v| !v.contains(['\r', '\n', '\0']))
                {
                    Some(value) => {
                        let secret = key.eq_ignore_ascii_case("authorization") || looks_secret(key);
                        let hint = (secret && !value.contains("${") && !value.is_empty())
                            .then_some(SECRET_HINT);
                        let value = translate(&value, &field, &mut c.notes);
                        c.headers.push((key.clone(), value, hint));
                    }
                    None => c
                        .notes
                        .push(format!("{field} is not a one-line text; it was dropped")),
                }
            }
        }
        Some(_) => c
            .notes
            .push("headers is not an object; it was dropped".to_owned()),
    }
    Ok(())
}

fn write_server(out: &mut String, original: &str, name: &str, source: &str, c: &Converted) {
    out.push('\n');
    if original != name {
        let why = if sanitize_name(original) == original {
            "to differ from another server's name ignoring case (prefixes must)"
        } else if sanitize_name(original) == name {
            "to fit [A-Za-z0-9_-]{1,32}"
        } else {
            "to fit [A-Za-z0-9_-]{1,32} and differ from another server's name ignoring case"
        };
        out.push_str(&format!(
            "# Named {:?} in {source}; renamed {why}.\n",
            comment_text(original)
        ));
    }
    out.push_str(&format!("[servers.{name}]\n"));
    for note in &c.notes {
        out.push_str(&format!("# {}\n", comment_text(note)));
    }
    for line in &c.lines {
        out.push_str(line);
        out.push('\n');
    }
    for (table, entries) in [("env", &c.env), ("headers", &c.headers)] {
        if entries.is_empty() {
            continue;
        }
        out.push_str(&format!("\n[servers.{name}.{table}]\n"));
        for (key, value, hint) in entries {
            out.push_str(&format!("{} = {}", toml_key(key), toml_string(value)));
            if let Some(h) = hint {
                out.push_str(&format!("  # {h}"));
            }
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_ignore_case_and_stay_short() {
        let mut taken = BTreeSet::new();
        assert_eq!(unique_name("git", &mut taken), "git");
        assert_eq!(unique_name("Git", &mut taken), "Git_2");
        assert_eq!(unique_name("g.i.t", &mut taken), "g_i_t");
        let long = "x".repeat(40);
        assert_eq!(unique_name(&long, &mut taken), "x".repeat(32));
        let second = unique_name(&long, &mut taken);
        assert_eq!(second, format!("{}_2", "x".repeat(30)));
    }

    #[test]
    fn secret_looking_names() {
        assert!(looks_secret("GITHUB_PERSONAL_ACCESS_TOKEN"));
        assert!(looks_secret("api_key"));
        assert!(looks_secret("X-Api-Key"));
        assert!(looks_secret("Authorization"));
        assert!(!looks_secret("PORT"));
        assert!(!looks_secret("MEMORY_FILE_PATH"));
        assert!(!looks_secret("KEYBOARD_LAYOUT"));
    }
}
