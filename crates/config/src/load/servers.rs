//! Reads the `[servers.NAME]` sections: one upstream each, stdio (`command`) or HTTP (`url`),
//! validated field by field and then as a whole (exactly one of command/url, keys that belong to
//! the other kind, timeout against max_timeout, prefixes unique across servers).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{EraChoice, HttpSpec, HttpTransportChoice};
use toml::de::{DeTable, DeValue};
use url::Url;

use super::patterns::{PATTERN_FIX, report_bad};
use super::reader::{Item, Key, MapEntry, Reader, Show, Text, key_path, quote};
use crate::duration::format_duration;
use crate::names::{is_valid_name, sanitize_name};
use crate::server::{
    DEFAULT_MAX_TIMEOUT, DEFAULT_TIMEOUT, Interpolated, OnChange, Scope, ServerConfig, ServerKind,
    Startup, ToolFilter,
};
use crate::settings::{GatewaySection, MIN_TOOL_NAME_ROOM, NamingMode, PREFIX_SEPARATOR};

pub(crate) const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "env_allow",
    "cwd",
    "scope",
    "url",
    "openapi",
    "base_url",
    "transport",
    "headers",
    "ca_bundle",
    "client_cert",
    "allow_insecure_http",
    "enabled",
    "era",
    "timeout",
    "max_timeout",
    "prefix",
    "tools",
    "startup",
    // Read by load/sandbox.rs.
    "sandbox",
    // Read by load/upstream_credentials.rs.
    "oauth",
    "token_passthrough",
    "on_change",
    // Read by load/lifecycle.rs.
    "idle_shutdown",
    // Read by load/retry_policy.rs.
    "retries",
    "idempotent_tools",
    // Read by load/overrides.rs.
    "overrides",
    // Read by load/result_cache.rs.
    "cache_ttl",
];

const STDIO_ONLY: &[&str] = &["args", "env", "env_allow", "cwd", "scope", "idle_shutdown"];
const HTTP_ONLY: &[&str] = &[
    "transport",
    "headers",
    "ca_bundle",
    "client_cert",
    "allow_insecure_http",
    "oauth",
    "token_passthrough",
];

const SERVER_HINTS: &[(&str, &str)] = &[
    (
        "type",
        "Manifold tells the kind from command (stdio) or url (HTTP); to choose an HTTP transport write transport = \"streamable-http\" or \"sse\"",
    ),
    ("disabled", "write enabled = false"),
    (
        "name",
        "the section's key is the server's name; to change the tool name prefix write prefix = \"...\"",
    ),
    (
        "envFile",
        "Manifold does not read env files; list the variables in env, using ${file:PATH} for secrets",
    ),
    (
        "env_file",
        "Manifold does not read env files; list the variables in env, using ${file:PATH} for secrets",
    ),
    ("environment", "write env = { KEY = \"value\" }"),
    ("working_dir", "write cwd = \"...\""),
    ("workdir", "write cwd = \"...\""),
    ("directory", "write cwd = \"...\""),
    (
        "alwaysAllow",
        "choose exposed tools with tools.allow = [...] and tools.deny = [...]",
    ),
    (
        "autoApprove",
        "choose exposed tools with tools.allow = [...] and tools.deny = [...]",
    ),
    ("allow", "write tools.allow = [...]"),
    ("deny", "write tools.deny = [...]"),
    ("insecure", "write allow_insecure_http = true"),
];

const TOOLS_KEYS: &[&str] = &["allow", "deny"];

/// Headers the transports set themselves: the loader refuses them, and `import` leaves them out.
pub(crate) const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
    "transfer-encoding",
];

/// A server read without problems, with what the cross-server checks need.
struct ReadServer {
    config: ServerConfig,
    name_span: Range<usize>,
    prefix_text: Option<Text>,
}

/// Reads `[servers]` (absent: no servers). Servers come out ordered by name, ignoring case.
pub(crate) fn read_servers(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
    gateway: &GatewaySection,
) -> Vec<ServerConfig> {
    let Some(item) = section else {
        return Vec::new();
    };
    if let DeValue::Array(_) = item.get_ref() {
        reader.report(
            &item.span(),
            "servers",
            None,
            "is an array, but must be a table of servers",
            "write one [servers.NAME] section per server, not [[servers]]",
        );
        return Vec::new();
    }
    let Some(table) = reader.table(
        "servers",
        item,
        "write one [servers.NAME] section per server",
    ) else {
        return Vec::new();
    };
    let mut entries: Vec<(&Key<'_>, &Item<'_>)> = table.iter().collect();
    entries.sort_by_key(|(key, _)| {
        let name: &str = key.get_ref();
        (name.to_lowercase(), name.to_owned())
    });
    let mut read = Vec::with_capacity(entries.len());
    for (key, item) in entries {
        if let Some(server) = read_server(reader, key, item) {
            read.push(server);
        }
    }
    check_prefixes(reader, &read, gateway);
    read.into_iter().map(|s| s.config).collect()
}

fn read_server(reader: &mut Reader<'_>, key: &Key<'_>, item: &Item<'_>) -> Option<ReadServer> {
    let name: &str = key.get_ref();
    let path = key_path("servers", name);
    let before = reader.problem_count();
    if !is_valid_name(name) {
        reader.report(
            &key.span(),
            &path,
            None,
            "is not a valid server name (1 to 32 of A-Z a-z 0-9 _ -)",
            format!("rename it, e.g. [servers.{}]", sanitize_name(name)),
        );
    }
    let table = reader.table(
        &path,
        item,
        "write a [servers.NAME] section with command = \"...\" or url = \"...\"",
    )?;
    reader.check_keys(&path, table, SERVER_KEYS, SERVER_HINTS);
    let field = |k: &str| key_path(&path, k);

    let enabled = table
        .get("enabled")
        .and_then(|i| reader.boolean(&field("enabled"), i))
        .unwrap_or(true);
    // A disabled server may name secrets that are not there; that is not a problem yet.
    reader.lenient = !enabled;
    let fields = read_fields(reader, table, &path);
    reader.lenient = false;

    let kind = build_kind(reader, key, table, &path, fields.kind);
    let (timeout, max_timeout) = check_timeouts(reader, &path, fields.timeout, fields.max_timeout);

    let prefix = match &fields.prefix {
        Some(text) if !is_valid_name(&text.value) => {
            let fix = if text.interpolated {
                "use 1 to 32 of A-Z a-z 0-9 _ -".to_owned()
            } else {
                format!(
                    "use 1 to 32 of A-Z a-z 0-9 _ -, e.g. {}",
                    quote(&sanitize_name(&text.value))
                )
            };
            reader.report_text(&field("prefix"), text, "is not a valid prefix", fix);
            String::new()
        }
        Some(text) => text.value.clone(),
        None => name.to_owned(),
    };

    if reader.problem_count() > before {
        return None;
    }
    Some(ReadServer {
        config: ServerConfig {
            name: name.to_owned(),
            prefix,
            enabled,
            era: fields.era.unwrap_or_default(),
            timeout,
            max_timeout,
            tools: fields.tools.unwrap_or_default(),
            startup: fields.startup.unwrap_or_default(),
            on_change: fields.on_change.unwrap_or_default(),
            kind: kind?,
        },
        name_span: key.span(),
        prefix_text: fields.prefix,
    })
}

/// The kind-specific fields as read (each `None` when absent or wrong).
#[derive(Default)]
struct KindFields {
    command: Option<Text>,
    args: Option<Vec<Text>>,
    env: Option<Vec<MapEntry>>,
    env_allow: Option<Vec<Text>>,
    cwd: Option<Text>,
    scope: Option<Scope>,
    url: Option<Text>,
    transport: Option<HttpTransportChoice>,
    headers: Option<Vec<MapEntry>>,
    ca_bundle: Option<Text>,
    client_cert: Option<Text>,
    allow_insecure_http: Option<bool>,
    /// `openapi`: the document of an OpenAPI server (its `base_url` is read as `url`).
    openapi: Option<Text>,
}

struct Fields {
    kind: KindFields,
    era: Option<EraChoice>,
    /// None: absent; Some(None): present but wrong.
    timeout: Option<Option<(Duration, Text)>>,
    max_timeout: Option<Option<(Duration, Text)>>,
    prefix: Option<Text>,
    tools: Option<ToolFilter>,
    startup: Option<Startup>,
    on_change: Option<OnChange>,
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
fn read_fields(reader: &mut Reader<'_>, table: &DeTable<'_>, path: &str) -> Fields {
    let field = |k: &str| key_path(path, k);
    let mut kind = KindFields::default();
    if let Some(i) = table.get("command") {
        kind.command = reader.string(
            &field("command"),
            i,
            Show::Value,
            "write the program to run, e.g. command = \"node\"",
        );
    }
    if let Some(i) = table.get("args") {
        kind.args = reader.string_list(
            &field("args"),
            i,
            Show::Value,
            "write e.g. args = [\"server.js\", \"--stdio\"]",
        );
    }
    if let Some(i) = table.get("env") {
        kind.env = reader.string_map(
            &field("env"),
            i,
            Show::Hidden,
            "write e.g. env = { KEY = \"value\" }",
        );
    }
    if let Some(i) = table.get("env_allow") {
        kind.env_allow = reader.string_list(
            &field("env_allow"),
            i,
            Show::Value,
            "write e.g. env_allow = [\"PATH\", \"HOME\"]",
        );
    }
    if let Some(i) = table.get("cwd") {
        kind.cwd = reader.string(
            &field("cwd"),
            i,
            Show::Value,
            "write a directory, e.g. cwd = \"/srv/mcp\"",
        );
    }
    if let Some(i) = table.get("scope") {
        kind.scope = reader.choice(
            &field("scope"),
            i,
            &[("shared", Scope::Shared), ("session", Scope::Session)],
        );
    }
    if let Some(i) = table.get("openapi") {
        kind.openapi = reader.string(
            &field("openapi"),
            i,
            Show::Value,
            "write e.g. openapi = \"api.yaml\" (a path or an https URL)",
        );
    }
    if let Some(i) = table.get("base_url").filter(|_| !table.contains_key("url")) {
        kind.url = reader.string(
            &field("base_url"),
            i,
            Show::Hidden,
            "write e.g. base_url = \"https://api.example.com/v1\"",
        );
    }
    if let Some(i) = table.get("url") {
        // URLs can hold credentials (tokens in paths or queries): never echoed.
        kind.url = reader.string(
            &field("url"),
            i,
            Show::Hidden,
            "write e.g. url = \"https://example.com/mcp\"",
        );
    }
    if let Some(i) = table.get("transport") {
        kind.transport = reader.choice(
            &field("transport"),
            i,
            &[
                ("auto", HttpTransportChoice::Auto),
                ("streamable-http", HttpTransportChoice::StreamableHttp),
                ("sse", HttpTransportChoice::Sse),
            ],
        );
    }
    if let Some(i) = table.get("headers") {
        kind.headers = reader.string_map(
            &field("headers"),
            i,
            Show::Hidden,
            "write e.g. headers = { Authorization = \"Bearer ${TOKEN}\" }",
        );
    }
    if let Some(i) = table.get("ca_bundle") {
        kind.ca_bundle = reader.string(
            &field("ca_bundle"),
            i,
            Show::Value,
            "write the path of a PEM file",
        );
    }
    if let Some(i) = table.get("client_cert") {
        kind.client_cert = reader.string(
            &field("client_cert"),
            i,
            Show::Value,
            "write the path of a PEM file with the certificate and key",
        );
    }
    if let Some(i) = table.get("allow_insecure_http") {
        kind.allow_insecure_http = reader.boolean(&field("allow_insecure_http"), i);
    }
    let era = table.get("era").and_then(|i| {
        reader.choice(
            &field("era"),
            i,
            &[
                ("auto", EraChoice::Auto),
                ("legacy", EraChoice::Legacy),
                ("modern", EraChoice::Modern),
            ],
        )
    });
    let timeout = table
        .get("timeout")
        .map(|i| reader.duration(&field("timeout"), i));
    let max_timeout = table
        .get("max_timeout")
        .map(|i| reader.duration(&field("max_timeout"), i));
    let prefix = table.get("prefix").and_then(|i| {
        reader.string(
            &field("prefix"),
            i,
            Show::Value,
            "write e.g. prefix = \"git\"",
        )
    });
    let tools = table
        .get("tools")
        .and_then(|i| read_tools(reader, &field("tools"), i));
    let startup = table.get("startup").and_then(|i| {
        reader.choice(
            &field("startup"),
            i,
            &[("eager", Startup::Eager), ("lazy", Startup::Lazy)],
        )
    });
    let on_change = table.get("on_change").and_then(|i| {
        reader.choice(
            &field("on_change"),
            i,
            &[("warn", OnChange::Warn), ("block", OnChange::Block)],
        )
    });
    Fields {
        kind,
        era,
        timeout,
        max_timeout,
        prefix,
        tools,
        startup,
        on_change,
    }
}

fn read_tools(reader: &mut Reader<'_>, field: &str, item: &Item<'_>) -> Option<ToolFilter> {
    let table = reader.table(
        field,
        item,
        "write tools.allow = [\"pattern*\"] and/or tools.deny = [\"pattern*\"]",
    )?;
    reader.check_keys(field, table, TOOLS_KEYS, &[]);
    let mut lists: BTreeMap<&str, Vec<Text>> = BTreeMap::new();
    for list in TOOLS_KEYS {
        if let Some(i) = table.get(*list)
            && let Some(texts) = reader.string_list(
                &key_path(field, list),
                i,
                Show::Value,
                "write e.g. [\"read_*\", \"list_*\"]",
            )
        {
            lists.insert(list, texts);
        }
    }
    let values = |list: &str| -> Vec<String> {
        lists
            .get(list)
            .map(|texts| texts.iter().map(|t| t.value.clone()).collect())
            .unwrap_or_default()
    };
    match ToolFilter::new(values("allow"), values("deny")) {
        Ok(filter) => Some(filter),
        Err(errors) => {
            for e in errors {
                let texts = lists.get(e.list).map(Vec::as_slice).unwrap_or_default();
                let list = key_path(field, e.list);
                report_bad(reader, &list, item, texts, &e.bad, PATTERN_FIX);
            }
            None
        }
    }
}

/// Reports every key of the other kind present in `table`.
fn refuse_keys(
    reader: &mut Reader<'_>,
    table: &DeTable<'_>,
    path: &str,
    keys: &[&str],
    problem: &str,
    fix: &str,
) {
    for k in keys {
        if let Some((key, _)) = table.get_key_value(*k) {
            reader.report(&key.span(), &key_path(path, k), None, problem, fix);
        }
    }
}

fn build_kind(
    reader: &mut Reader<'_>,
    name_key: &Key<'_>,
    table: &DeTable<'_>,
    path: &str,
    fields: KindFields,
) -> Option<ServerKind> {
    let field = |k: &str| key_path(path, k);
    let has = |k: &str| table.contains_key(k);
    if has("openapi") || has("base_url") {
        return build_openapi(reader, name_key, table, path, fields);
    }
    match (has("command"), has("url")) {
        (false, false) => {
            reader.report(
                &name_key.span(),
                path,
                None,
                "has neither command nor url",
                "write command = \"...\" for a local (stdio) server or url = \"https://...\" for a remote one",
            );
            None
        }
        (true, true) => {
            let span = table
                .get_key_value("url")
                .map(|(k, _)| k.span())
                .unwrap_or_else(|| name_key.span());
            reader.report(
                &span,
                &field("url"),
                None,
                "a server has command or url, not both",
                "keep command for a local (stdio) server or url for a remote one; define two servers to have both",
            );
            None
        }
        (true, false) => {
            refuse_keys(
                reader,
                table,
                path,
                HTTP_ONLY,
                "only applies to servers with a url",
                "remove it (this server has command, so it runs over stdio)",
            );
            build_stdio(reader, path, fields)
        }
        (false, true) => {
            refuse_keys(
                reader,
                table,
                path,
                STDIO_ONLY,
                "only applies to stdio servers (those with command)",
                "remove it (this server has url, so it is reached over HTTP)",
            );
            let mut interpolated = crate::server::Interpolated::new();
            let auth = super::upstream_credentials::read_credentials(
                reader,
                table,
                path,
                &mut interpolated,
            );
            build_http(reader, path, fields)
                .map(|kind| super::upstream_credentials::with_credentials(kind, auth, interpolated))
        }
    }
}

/// An OpenAPI server: `openapi` (the document) and `base_url` (the API), with an HTTP server's
/// headers, trust roots and URL policy; no `command`, no MCP `url`.
fn build_openapi(
    reader: &mut Reader<'_>,
    name_key: &Key<'_>,
    table: &DeTable<'_>,
    path: &str,
    mut fields: KindFields,
) -> Option<ServerKind> {
    let field = |k: &str| key_path(path, k);
    let before = reader.problem_count();
    for (key, why, fix) in [
        (
            "command",
            "an OpenAPI server has no command",
            "remove command, or define the stdio server separately",
        ),
        (
            "url",
            "an OpenAPI server is reached at base_url; url is for MCP servers",
            "write base_url = \"https://...\" (the API's base URL)",
        ),
        (
            "transport",
            "an OpenAPI server speaks plain HTTP to its API",
            "remove transport",
        ),
    ] {
        if let Some((k, _)) = table.get_key_value(key) {
            reader.report(&k.span(), &field(key), None, why, fix);
        }
    }
    refuse_keys(
        reader,
        table,
        path,
        STDIO_ONLY,
        "only applies to stdio servers (those with command)",
        "remove it (this server is an OpenAPI document's API)",
    );
    let Some(document) = fields.openapi.take() else {
        reader.report(
            &name_key.span(),
            path,
            None,
            "has base_url but no openapi document",
            "write openapi = \"api.yaml\" (a path or an https URL)",
        );
        return None;
    };
    if !table.contains_key("base_url") {
        reader.report(
            &name_key.span(),
            path,
            None,
            "has an openapi document but no base_url",
            "write base_url = \"https://api.example.com/v1\"",
        );
        return None;
    }
    let remote = document.value.starts_with("https://") || document.value.starts_with("http://");
    let resolved = if remote {
        Some(document.value.clone())
    } else {
        reader
            .path(&field("openapi"), &document)
            .map(|p| p.to_string_lossy().into_owned())
    };
    let mut interpolated = crate::server::Interpolated::new();
    let auth =
        super::upstream_credentials::read_credentials(reader, table, path, &mut interpolated);
    let kind = build_http(reader, path, fields)
        .map(|kind| super::upstream_credentials::with_credentials(kind, auth, interpolated));
    if reader.problem_count() > before {
        return None;
    }
    match (kind, resolved) {
        (
            Some(ServerKind::Http {
                spec, interpolated, ..
            }),
            Some(document),
        ) => Some(ServerKind::Http {
            spec,
            interpolated,
            openapi: Some(document),
        }),
        _ => None,
    }
}

fn build_stdio(reader: &mut Reader<'_>, path: &str, f: KindFields) -> Option<ServerKind> {
    let field = |k: &str| key_path(path, k);
    let mut interpolated = Interpolated::new();
    // Every field is checked even when an earlier one failed, so all problems show at once.
    let command = f.command.as_ref().and_then(|text| {
        if text.interpolated {
            interpolated.insert("command".to_owned());
        }
        check_command(reader, &field("command"), text)
    });
    let args = f.args.unwrap_or_default();
    for (i, a) in args.iter().enumerate() {
        if a.interpolated {
            interpolated.insert(format!("args[{i}]"));
        }
        if a.value.contains('\0') {
            reader.report_text(&a.field, a, "contains a NUL character", "remove it");
        }
    }
    let env = f.env.unwrap_or_default();
    for entry in &env {
        if !is_env_name(&entry.key) {
            reader.report(
                &entry.key_span,
                &entry.path,
                None,
                "is not a valid environment variable name",
                "names are not empty and hold no = or NUL",
            );
        }
        if entry.text.value.contains('\0') {
            reader.report_text(
                &entry.path,
                &entry.text,
                "contains a NUL character",
                "remove it",
            );
        }
        if entry.text.interpolated {
            interpolated.insert(format!("env.{}", entry.key));
        }
    }
    let env_allow = f.env_allow.map(|names| {
        for n in &names {
            if !is_env_name(&n.value) {
                reader.report_text(
                    &n.field,
                    n,
                    "is not a valid environment variable name",
                    "names are not empty and hold no = or NUL",
                );
            }
        }
        names.into_iter().map(|n| n.value).collect()
    });
    let cwd = match &f.cwd {
        Some(text) => {
            if text.interpolated {
                interpolated.insert("cwd".to_owned());
            }
            Some(reader.path(&field("cwd"), text))
        }
        None => None,
    };
    let (command, cwd) = (command?, cwd.map_or(Some(None), |c| c.map(Some))?);
    Some(ServerKind::Stdio {
        spec: StdioSpec {
            command,
            args: args.into_iter().map(|a| a.value).collect(),
            env: env.into_iter().map(|e| (e.key, e.text.value)).collect(),
            env_allow,
            cwd,
            max_line: None,
            sandbox: Default::default(),
        },
        scope: f.scope.unwrap_or_default(),
        interpolated,
    })
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty() && !s.contains(['=', '\0'])
}

/// Whether a `command` value uses shell syntax: operators as words (`|`, `&&`, `>`, ...), command
/// substitution, or (in a bare program name) any of `|&;<>`.
pub(crate) fn uses_shell_syntax(value: &str) -> bool {
    let value = value.trim();
    let first = value.split_whitespace().next().unwrap_or_default();
    value.contains('`')
        || value.contains("$(")
        || value.split_whitespace().any(|w| {
            matches!(
                w,
                "|" | "||" | "&&" | "&" | ";" | ">" | ">>" | "<" | "2>" | "2>&1" | "&>"
            )
        })
        || (!first.contains('/') && value.contains(['|', '&', ';', '<', '>']))
}

/// Whether a `command` value is a whole shell line ("npx -y pkg") rather than one program. A
/// path may contain spaces ("/Applications/My App/server"), so a line whose first word is a path
/// counts as a command line only when a later word is an option.
pub(crate) fn looks_like_command_line(value: &str) -> bool {
    let value = value.trim();
    let mut words = value.split_whitespace();
    let first = words.next().unwrap_or_default();
    let several_words = value.contains(char::is_whitespace);
    uses_shell_syntax(value)
        || (several_words && (!first.contains('/') || words.any(|w| w.starts_with('-'))))
}

/// The program to run: one executable, never a shell line; relative paths with a slash are
/// relative to the configuration's directory.
fn check_command(reader: &mut Reader<'_>, field: &str, text: &Text) -> Option<String> {
    let value = text.value.trim();
    if text.incomplete {
        // A disabled server's command built from an absent reference: kept as it is.
        return Some(value.to_owned());
    }
    if value.is_empty() {
        reader.report_text(
            field,
            text,
            "is empty",
            "write the program to run, e.g. command = \"node\"",
        );
        return None;
    }
    if uses_shell_syntax(value) {
        reader.report_text(
            field,
            text,
            "uses shell syntax (pipes, redirections, command lists or substitutions), but command is one program, run without a shell",
            "put the shell line in a script and name the script in command",
        );
        return None;
    }
    if looks_like_command_line(value) {
        let fix = if text.interpolated {
            "put the program in command and each argument in args".to_owned()
        } else {
            let mut words = value.split_whitespace();
            let program = words.next().unwrap_or_default();
            let rest: Vec<String> = words.map(quote).collect();
            format!(
                "write command = {} and args = [{}]",
                quote(program),
                rest.join(", ")
            )
        };
        reader.report_text(
            field,
            text,
            "is a shell command line, but command is one program, run without a shell",
            fix,
        );
        return None;
    }
    if value.contains('/') || value.starts_with('~') {
        return reader
            .path(field, text)
            .map(|p: PathBuf| p.to_string_lossy().into_owned());
    }
    Some(value.to_owned())
}

fn build_http(reader: &mut Reader<'_>, path: &str, f: KindFields) -> Option<ServerKind> {
    let field = |k: &str| key_path(path, k);
    let mut interpolated = Interpolated::new();
    let allow_insecure_http = f.allow_insecure_http.unwrap_or(false);
    // Every field is checked even when an earlier one failed, so all problems show at once.
    let url = f.url.and_then(|url| {
        if url.interpolated {
            interpolated.insert("url".to_owned());
        }
        check_url(reader, &field("url"), &url, allow_insecure_http).map(|()| url)
    });
    let headers = f.headers.unwrap_or_default();
    for h in &headers {
        if !is_header_name(&h.key) {
            reader.report(
                &h.key_span,
                &h.path,
                None,
                "is not a valid HTTP header name",
                "use letters, digits and - (e.g. Authorization, X-Api-Key)",
            );
        } else if RESERVED_HEADERS.contains(&h.key.to_ascii_lowercase().as_str()) {
            reader.report(
                &h.key_span,
                &h.path,
                None,
                "is set by Manifold's transport itself",
                "remove it",
            );
        }
        if h.text.value.contains(['\r', '\n', '\0']) {
            reader.report_text(
                &h.path,
                &h.text,
                "contains a line break or NUL, which a header cannot carry",
                "remove it",
            );
        }
        if h.text.interpolated {
            interpolated.insert(format!("headers.{}", h.key));
        }
    }
    let mut path_of = |key: &str, text: &Option<Text>| -> Option<Option<PathBuf>> {
        match text {
            Some(t) => {
                if t.interpolated {
                    interpolated.insert(key.to_owned());
                }
                reader.path(&field(key), t).map(Some)
            }
            None => Some(None),
        }
    };
    let ca_bundle = path_of("ca_bundle", &f.ca_bundle);
    let client_identity = path_of("client_cert", &f.client_cert);
    let (url, ca_bundle, client_identity) = (url?, ca_bundle?, client_identity?);
    Some(ServerKind::Http {
        spec: HttpSpec {
            url: url.value.trim().to_owned(),
            transport: f.transport.unwrap_or_default(),
            headers: headers.into_iter().map(|h| (h.key, h.text.value)).collect(),
            ca_bundle,
            client_identity,
            allow_insecure_http,
            auth: Default::default(),
        },
        interpolated,
        openapi: None,
    })
}

fn is_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

/// The URL rules: https anywhere, http only to this machine unless allowed, nothing else.
/// Messages never quote the URL (it may hold a token).
pub(crate) fn url_problem(raw: &str, allow_insecure_http: bool) -> Option<(String, String)> {
    let url = match Url::parse(raw.trim()) {
        Ok(u) => u,
        Err(e) => {
            return Some((
                format!("is not a valid absolute URL ({e})"),
                "write it in full, e.g. \"https://example.com/mcp\"".to_owned(),
            ));
        }
    };
    match url.scheme() {
        "https" => {}
        "http" if manifold_upstream::http_client::is_loopback(&url) || allow_insecure_http => {}
        "http" => {
            return Some((
                "uses plain http:// to a host other than this machine, so credentials and tool arguments would cross the network unencrypted".to_owned(),
                "write https://..., or set allow_insecure_http = true for this server if the network is trusted".to_owned(),
            ));
        }
        "ws" | "wss" => {
            return Some((
                "is a WebSocket URL, and MCP does not run over WebSocket".to_owned(),
                "write the server's https:// URL (Streamable HTTP or HTTP+SSE)".to_owned(),
            ));
        }
        _ => {
            return Some((
                "has a scheme other than https or http".to_owned(),
                "write e.g. \"https://example.com/mcp\"".to_owned(),
            ));
        }
    }
    if url.host().is_none() {
        return Some((
            "names no host".to_owned(),
            "write e.g. \"https://example.com/mcp\"".to_owned(),
        ));
    }
    None
}

fn check_url(
    reader: &mut Reader<'_>,
    field: &str,
    text: &Text,
    allow_insecure_http: bool,
) -> Option<()> {
    if text.incomplete {
        return Some(());
    }
    match url_problem(&text.value, allow_insecure_http) {
        Some((problem, fix)) => {
            reader.report_text(field, text, problem, fix);
            None
        }
        None => Some(()),
    }
}

fn check_timeouts(
    reader: &mut Reader<'_>,
    path: &str,
    timeout: Option<Option<(Duration, Text)>>,
    max_timeout: Option<Option<(Duration, Text)>>,
) -> (Duration, Duration) {
    let (t, t_text) = match &timeout {
        Some(Some((d, text))) => (*d, Some(text)),
        Some(None) => return (DEFAULT_TIMEOUT, DEFAULT_MAX_TIMEOUT),
        None => (DEFAULT_TIMEOUT, None),
    };
    let (m, m_text) = match &max_timeout {
        Some(Some((d, text))) => (*d, Some(text)),
        Some(None) => return (t, DEFAULT_MAX_TIMEOUT),
        None => (DEFAULT_MAX_TIMEOUT, None),
    };
    if t <= m {
        return (t, m);
    }
    match (t_text, m_text) {
        (Some(tt), None) => reader.report_text(
            &key_path(path, "timeout"),
            tt,
            format!("is longer than max_timeout ({}, the default)", format_duration(m)),
            format!("raise max_timeout too, e.g. max_timeout = \"{}\"", format_duration(t)),
        ),
        (Some(tt), Some(_)) => reader.report_text(
            &key_path(path, "timeout"),
            tt,
            format!("is longer than max_timeout ({})", format_duration(m)),
            "shorten timeout or raise max_timeout; timeout is the idle limit, max_timeout the absolute cap",
        ),
        (None, Some(mt)) => reader.report_text(
            &key_path(path, "max_timeout"),
            mt,
            format!("is shorter than timeout ({}, the default)", format_duration(t)),
            format!("write timeout = \"{}\" or less too", format_duration(m)),
        ),
        (None, None) => {}
    }
    (t, m)
}

/// Prefixes must be unique among enabled servers (ignoring case, as some clients do) and leave
/// room for tool names.
fn check_prefixes(reader: &mut Reader<'_>, servers: &[ReadServer], gateway: &GatewaySection) {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for s in servers {
        let c = &s.config;
        let path = key_path("servers", &c.name);
        if gateway.naming != NamingMode::Never
            && c.prefix.len() + PREFIX_SEPARATOR.len() + MIN_TOOL_NAME_ROOM > gateway.name_max_len
        {
            let problem = format!(
                "the prefix {} leaves fewer than {MIN_TOOL_NAME_ROOM} characters of gateway.name_max_len ({}) for tool names",
                quote(&c.prefix),
                gateway.name_max_len
            );
            let fix = "write a shorter prefix = \"...\", or raise gateway.name_max_len";
            match &s.prefix_text {
                Some(t) => reader.report_text(&key_path(&path, "prefix"), t, problem, fix),
                None => reader.report(&s.name_span, &path, None, problem, fix),
            }
        }
        if !c.enabled {
            continue;
        }
        let folded = c.prefix.to_ascii_lowercase();
        match seen.get(&folded) {
            None => {
                seen.insert(folded, &c.name);
            }
            Some(first) => {
                let first_path = key_path("servers", first);
                match &s.prefix_text {
                    Some(t) => reader.report_text(
                        &key_path(&path, "prefix"),
                        t,
                        format!("is already the prefix of {first_path} (prefixes are compared ignoring case)"),
                        "give one of them another prefix",
                    ),
                    None => reader.report(
                        &s.name_span,
                        &path,
                        None,
                        format!(
                            "its prefix (its name, {}) is already the prefix of {first_path} (prefixes are compared ignoring case)",
                            quote(&c.prefix)
                        ),
                        format!("write prefix = \"...\" in [{path}] to choose another"),
                    ),
                }
            }
        }
    }
}
