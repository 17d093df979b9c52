//! `import`: each client's JSON layout becomes Manifold TOML that loads, keeps values as written,
//! and says in comments what did not carry over.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use manifold_config::{Config, FixedEnvironment, ImportError, ServerConfig, ServerKind, import};
use manifold_upstream::HttpTransportChoice;
use manifold_upstream::transport::stdio::StdioSpec;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The variables the fixtures reference, as a user would have set them.
fn env() -> FixedEnvironment {
    FixedEnvironment::new()
        .with_var("HOME", "/home/ada")
        .with_var("LINEAR_TOKEN", "lin-123")
        .with_var("API_BASE_URL", "https://api.example.com")
        .with_var("API_KEY", "api-456")
        .with_var("REPO_DIR", "/src/repo")
        .with_var("PERPLEXITY_KEY", "pplx-789")
        .with_var("GITHUB_TOKEN", "gh-000")
}

fn import_and_load(name: &str) -> (String, Config) {
    let toml = import(&fixture(name), name).unwrap();
    match Config::from_str_with(&toml, name, None, &env()) {
        Ok(config) => (toml, config),
        Err(e) => panic!("the import of {name} does not load:\n{e}\n---\n{toml}"),
    }
}

fn stdio(s: &ServerConfig) -> &StdioSpec {
    match &s.kind {
        ServerKind::Stdio { spec, .. } => spec,
        ServerKind::Http { .. } => panic!("{} is not stdio", s.name),
    }
}

fn http(s: &ServerConfig) -> &manifold_upstream::HttpSpec {
    match &s.kind {
        ServerKind::Http { spec, .. } => spec,
        ServerKind::Stdio { .. } => panic!("{} is not http", s.name),
    }
}

fn names(c: &Config) -> Vec<&str> {
    c.servers.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn claude_desktop_imports_exactly_as_expected() {
    let (toml, config) = import_and_load("claude_desktop.json");
    assert_eq!(
        toml,
        r#"# Manifold configuration imported from claude_desktop.json by `manifold import`.
# Review it, then run `manifold check` on it. Comments note what did not carry over.

# Not imported: "broken": it has neither command nor url

[servers.filesystem]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/Users/ada/Desktop", "/Users/ada/Downloads"]

[servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[servers.github.env]
GITHUB_PERSONAL_ACCESS_TOKEN = "ghp_exampleexampleexample"  # looks like a secret: consider ${file:PATH} or ${VARIABLE} instead of the value
LOG_LEVEL = "info"

# Named "my.memory server" in claude_desktop.json; renamed to fit [A-Za-z0-9_-]{1,32}.
[servers.my_memory_server]
# "alwaysAllow" was not carried over: choose exposed tools with tools.allow and tools.deny
command = "node"
args = ["/opt/memory/dist/index.js"]
enabled = false

[servers.my_memory_server.env]
MEMORY_FILE_PATH = "/Users/ada/memory.json"
PRICE = "$$5"

[servers.time]
# command held a whole command line; it was split at spaces into command and args (check any quoting)
command = "uvx"
args = ["mcp-server-time", "--local-timezone=Europe/Paris"]
"#
    );
    assert_eq!(
        names(&config),
        vec!["filesystem", "github", "my_memory_server", "time"]
    );
    // Literal secrets stay as written; "$5" is still "$5" after loading.
    assert_eq!(
        stdio(config.server("github").unwrap()).env,
        vec![
            (
                "GITHUB_PERSONAL_ACCESS_TOKEN".to_owned(),
                "ghp_exampleexampleexample".to_owned()
            ),
            ("LOG_LEVEL".to_owned(), "info".to_owned()),
        ]
    );
    let memory = config.server("my_memory_server").unwrap();
    assert!(!memory.enabled);
    assert!(
        stdio(memory)
            .env
            .contains(&("PRICE".to_owned(), "$5".to_owned()))
    );
    assert_eq!(
        stdio(config.server("time").unwrap()).args,
        vec!["mcp-server-time", "--local-timezone=Europe/Paris"]
    );
}

#[test]
fn the_example_in_docs_configuration_md_is_what_import_writes() {
    let json = r#"{"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
  "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_xxx"}}}}"#;
    assert_eq!(
        import(json, "claude_desktop_config.json").unwrap(),
        r#"# Manifold configuration imported from claude_desktop_config.json by `manifold import`.
# Review it, then run `manifold check` on it. Comments note what did not carry over.

[servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[servers.github.env]
GITHUB_PERSONAL_ACCESS_TOKEN = "ghp_xxx"  # looks like a secret: consider ${file:PATH} or ${VARIABLE} instead of the value
"#
    );
}

#[test]
fn plain_imports_load_with_from_str() {
    for name in [
        "claude_desktop.json",
        "vscode_settings.json",
        "windsurf.json",
    ] {
        let toml = import(&fixture(name), name).unwrap();
        if let Err(e) = Config::from_str(&toml, name) {
            panic!("{name}:\n{e}\n---\n{toml}");
        }
    }
}

#[test]
fn cursor_urls_headers_and_references() {
    let (toml, config) = import_and_load("cursor.json");
    assert_eq!(names(&config), vec!["lan", "linear", "local-dev", "sqlite"]);
    // ${env:X} becomes ${X}: a reference, not a resolved value.
    assert!(toml.contains("Authorization = \"Bearer ${LINEAR_TOKEN}\""));
    assert!(!toml.contains("lin-123"));
    assert_eq!(
        http(config.server("linear").unwrap()).headers,
        vec![("Authorization".to_owned(), "Bearer lin-123".to_owned())]
    );
    let lan = http(config.server("lan").unwrap());
    assert!(lan.allow_insecure_http);
    assert_eq!(
        lan.headers,
        vec![("X-Api-Key".to_owned(), "lan-key-123".to_owned())]
    );
    assert!(
        toml.contains(
            "# headers.Content-Type is set by Manifold's transport itself; it was dropped"
        )
    );
    assert!(toml.contains("# the url is plain http:// to another machine; allow_insecure_http = true keeps it working, but prefer https"));
    assert!(!http(config.server("local-dev").unwrap()).allow_insecure_http);
    let sqlite = stdio(config.server("sqlite").unwrap());
    assert_eq!(
        sqlite.args,
        vec!["mcp-server-sqlite", "--db-path", "/home/ada/data/test.db"]
    );
    assert_eq!(
        sqlite.env,
        vec![
            ("DEBUG".to_owned(), "true".to_owned()),
            ("PORT".to_owned(), "3000".to_owned())
        ]
    );
    assert!(toml.contains("# Not imported: \"websocket\": its url is a WebSocket URL, and MCP does not run over WebSocket"));
}

#[test]
fn claude_code_types_and_defaults() {
    let (toml, config) = import_and_load("claude_code.mcp.json");
    assert_eq!(names(&config), vec!["api", "events", "Git", "git_2"]);
    let api = http(config.server("api").unwrap());
    assert_eq!(api.transport, HttpTransportChoice::StreamableHttp);
    assert_eq!(api.url, "https://api.example.com/mcp");
    assert!(toml.contains("# url: the default after \":-\" for ${API_BASE_URL} was dropped (Manifold has no defaults); make sure API_BASE_URL is set"));
    assert_eq!(
        http(config.server("events").unwrap()).transport,
        HttpTransportChoice::Sse
    );
    assert_eq!(
        stdio(config.server("git_2").unwrap()).args,
        vec!["mcp-server-git", "--repository", "/src/repo"]
    );
    assert!(toml.contains("# Named \"git\" in claude_code.mcp.json; renamed to differ from another server's name ignoring case (prefixes must).\n[servers.git_2]"));
}

#[test]
fn vscode_servers_inputs_and_client_variables() {
    let (toml, config) = import_and_load("vscode.mcp.json");
    assert_eq!(
        names(&config),
        vec!["fetch", "github-remote", "legacy", "Perplexity"]
    );
    assert!(toml.contains("#   input \"perplexity-key\" (promptString, password) \"Perplexity API Key\" -> ${PERPLEXITY_KEY}"));
    assert_eq!(
        stdio(config.server("Perplexity").unwrap()).env,
        vec![("PERPLEXITY_API_KEY".to_owned(), "pplx-789".to_owned())]
    );
    // ${workspaceFolder} has no meaning here: kept literally, with a note.
    let fetch = stdio(config.server("fetch").unwrap());
    assert_eq!(
        fetch.cwd.as_deref(),
        Some(std::path::Path::new("${workspaceFolder}"))
    );
    assert!(toml.contains("# \"envFile\" was not carried over"));
    // VS Code's "http" tries Streamable HTTP and falls back: Manifold's auto.
    assert_eq!(
        http(config.server("github-remote").unwrap()).transport,
        HttpTransportChoice::Auto
    );
    let legacy = http(config.server("legacy").unwrap());
    assert_eq!(legacy.transport, HttpTransportChoice::Sse);
    assert_eq!(legacy.url, "http://127.0.0.1:3001/sse");
}

#[test]
fn vscode_settings_and_windsurf_layouts() {
    let (_, settings) = import_and_load("vscode_settings.json");
    assert_eq!(names(&settings), vec!["memory"]);
    let (toml, windsurf) = import_and_load("windsurf.json");
    assert_eq!(
        http(windsurf.server("remote-docs").unwrap()).url,
        "https://docs.example.com/mcp"
    );
    assert!(toml.contains("# \"disabledTools\" was not carried over: choose exposed tools with tools.allow and tools.deny"));
}

#[test]
fn output_is_stable_whatever_the_json_key_order() {
    let a = r#"{"mcpServers":{"b":{"args":["1"],"command":"x","env":{"Z":"1","A":"2"}},"a":{"url":"https://a.example"}}}"#;
    let b = r#"{"mcpServers":{"a":{"url":"https://a.example"},"b":{"env":{"A":"2","Z":"1"},"command":"x","args":["1"]}}}"#;
    assert_eq!(import(a, "x.json").unwrap(), import(b, "x.json").unwrap());
}

#[test]
fn awkward_values_survive_the_round_trip_exactly() {
    let awkward = [
        "quote \" backslash \\ tab \t newline \n",
        "dollars $ $$ ${ } $5 ^end$",
        "unicode ü 日本 \u{7f}",
        "] [servers.evil]\ncommand = \"rm\"",
    ];
    let json = serde_json::json!({
        "mcpServers": {
            "weird\nname]": {"command": "node", "args": awkward, "env": {"V": awkward[3]}}
        }
    });
    let toml = import(&json.to_string(), "weird.json\n[servers.x]").unwrap();
    let config = Config::from_str_with(&toml, "weird", None, &env()).unwrap();
    assert_eq!(names(&config), vec!["weird_name"], "{toml}");
    let spec = stdio(&config.servers[0]);
    assert_eq!(spec.args, awkward.to_vec());
    assert_eq!(spec.env, vec![("V".to_owned(), awkward[3].to_owned())]);
}

#[test]
fn shell_lines_are_not_imported_as_argv() {
    let toml = import(
        r#"{"mcpServers": {"piped": {"command": "node server.js | tee log"}}}"#,
        "c.json",
    )
    .unwrap();
    assert!(toml.contains("# Not imported: \"piped\": its command uses shell syntax (pipes, redirections, command lists or substitutions), which Manifold does not run through a shell; put it in a script and import again\n"));
    assert!(!toml.contains("[servers.piped]"));
}

#[test]
fn jsonc_comments_and_trailing_commas_are_accepted() {
    let text = "{\n // servers\n \"servers\": { \"a\": { \"command\": \"x\", }, },\n}";
    let toml = import(text, "mcp.json").unwrap();
    assert!(toml.contains("[servers.a]\ncommand = \"x\"\n"));
}

#[test]
fn input_that_is_not_json_is_refused_with_a_position() {
    assert_eq!(
        import("{\n  \"mcpServers\": nope\n}", "bad.json").unwrap_err(),
        ImportError::NotJson {
            source_name: "bad.json".into(),
            // serde_json points at the first character that cannot continue `null`.
            line: 2,
            column: 18,
            reason: "expected ident".into(),
        }
    );
    assert_eq!(
        import("{\"mcpServers\": ", "bad.json")
            .unwrap_err()
            .to_string(),
        "bad.json:1:15: error: not valid JSON (EOF while parsing a value); import reads the JSON configuration of an MCP client (Claude Desktop, Cursor, Claude Code's .mcp.json, VS Code's mcp.json)"
    );
}

#[test]
fn json_without_servers_is_refused() {
    assert_eq!(
        import("{\"editor.fontSize\": 14}", "settings.json")
            .unwrap_err()
            .to_string(),
        "settings.json: error: found no MCP servers: the JSON has no \"mcpServers\" object (Claude Desktop, Cursor, Claude Code) and no \"servers\" or \"mcp.servers\" object (VS Code); its top-level keys are \"editor.fontSize\""
    );
    assert_eq!(
        import("[1, 2]", "list.json").unwrap_err(),
        ImportError::NoServers {
            source_name: "list.json".into(),
            found: "it is not a JSON object".into()
        }
    );
}

#[test]
fn an_empty_server_list_still_loads() {
    let toml = import("{\"mcpServers\": {}}", "empty.json").unwrap();
    assert!(toml.ends_with("\n# empty.json lists no servers.\n"));
    let config = Config::from_str_with(&toml, "empty", None, &env()).unwrap();
    assert!(config.servers.is_empty());
}
