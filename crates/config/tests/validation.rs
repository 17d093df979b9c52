//! Every validation rule of the configuration file, each with the exact message a user sees.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use manifold_config::{
    Config, ConfigErrors, Discovery, FixedEnvironment, NamingMode, Scope, ServerKind, Startup,
};
use manifold_upstream::{EraChoice, HttpTransportChoice, Target};

fn env() -> FixedEnvironment {
    FixedEnvironment::new().with_var("HOME", "/home/ada")
}

fn load(text: &str) -> Result<Config, ConfigErrors> {
    Config::from_str_with(text, "m.toml", Some(Path::new("/etc/manifold")), &env())
}

fn ok(text: &str) -> Config {
    match load(text) {
        Ok(c) => c,
        Err(e) => panic!("expected the config to load, got:\n{e}"),
    }
}

/// The messages (field, value, problem, fix) of every error, in file order.
fn errors(text: &str) -> Vec<String> {
    match load(text) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e.messages(),
    }
}

/// The single error's message.
fn error(text: &str) -> String {
    let all = errors(text);
    assert_eq!(all.len(), 1, "expected one error, got {all:#?}");
    all.into_iter().next().unwrap()
}

// ---------------------------------------------------------------- the whole file

#[test]
fn an_empty_file_is_all_defaults() {
    let c = ok("");
    let g = &c.gateway;
    assert_eq!(g.listen, "127.0.0.1:7391".parse::<SocketAddr>().unwrap());
    assert_eq!(g.naming, NamingMode::Always);
    assert_eq!(g.name_max_len, 64);
    assert!(g.strict_names);
    assert_eq!(g.discovery, Discovery::Full);
    assert!(g.session_key.is_none());
    assert_eq!(g.data_dir, PathBuf::from("/home/ada/.local/share/manifold"));
    assert!(g.origin_allowed("http://localhost:5173"));
    assert!(g.origin_allowed("https://127.0.0.1:8443"));
    assert!(!g.origin_allowed("https://evil.example"));
    assert!(g.host_allowed("localhost:7391"));
    assert!(g.host_allowed("[::1]:7391"));
    assert!(!g.host_allowed("evil.example:7391"));
    assert!(c.servers.is_empty());
}

#[test]
fn xdg_data_home_is_preferred() {
    let env = env().with_var("XDG_DATA_HOME", "/data");
    let c = Config::from_str_with("", "m.toml", None, &env).unwrap();
    assert_eq!(c.gateway.data_dir, PathBuf::from("/data/manifold"));
}

#[test]
fn without_home_there_is_no_data_dir_default() {
    let e = Config::from_str_with("", "m.toml", None, &FixedEnvironment::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "m.toml: error: gateway.data_dir: is not set, and neither XDG_DATA_HOME nor HOME is, so there is no default; write data_dir = \"/var/lib/manifold\" in [gateway]\n1 problem in m.toml; nothing was loaded"
    );
}

#[test]
fn toml_syntax_errors_are_reported_with_positions() {
    let e = load("[gateway]\nlisten = \"127.0.0.1:1\nnaming = \"always\"\n").unwrap_err();
    let first = &e.errors[0];
    assert_eq!((first.line, first.field.as_str()), (2, ""));
    assert!(
        first.problem.starts_with("not valid TOML: "),
        "{}",
        first.problem
    );
    assert_eq!(first.fix, "fix the syntax (see https://toml.io)");
}

#[test]
fn every_problem_is_reported_in_file_order_with_positions() {
    let text = "\
[gateway]
naming = \"sometimes\"

[servers.git]
command = \"uvx\"
timeout = \"sixty\"
era = \"moden\"
";
    let e = load(text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "\
m.toml:2:10: error: gateway.naming = \"sometimes\": is not one of always, never, conditional; write one of \"always\", \"never\", \"conditional\"
m.toml:6:11: error: servers.git.timeout = \"sixty\": not a duration; write e.g. \"60s\" or \"2m\"
m.toml:7:7: error: servers.git.era = \"moden\": is not one of auto, legacy, modern; did you mean \"modern\"?
3 problems in m.toml; nothing was loaded"
    );
}

#[test]
fn unknown_top_level_keys_are_explained() {
    assert_eq!(
        error("listen = \"127.0.0.1:1\""),
        "listen: unknown key; it belongs in the [gateway] section"
    );
    assert_eq!(
        error("[mcpServers.x]\ncommand = \"a\""),
        "mcpServers: unknown key; that is an MCP client's JSON layout; Manifold's servers are [servers.NAME] sections (`manifold import` converts a client's configuration)"
    );
    assert_eq!(
        error("[server.x]\ncommand = \"a\""),
        "server: unknown key; did you mean \"servers\"?"
    );
    assert_eq!(
        error("[zzzzzz]"),
        "zzzzzz: unknown key; the keys here are gateway, servers, rules, rate_limits, auth, telemetry, store, sandbox, audit, approvals, authoring, dashboard, metaforge, rest, tools, toolsets"
    );
}

// ---------------------------------------------------------------- [gateway]

#[test]
fn listen_must_be_an_address_and_port() {
    assert_eq!(
        error("[gateway]\nlisten = \"localhost:8080\""),
        "gateway.listen = \"localhost:8080\": is not an IP address and port; write \"127.0.0.1:8080\""
    );
    assert_eq!(
        error("[gateway]\nlisten = \"anywhere\""),
        "gateway.listen = \"anywhere\": is not an IP address and port; write e.g. \"127.0.0.1:7391\" (this machine only) or \"0.0.0.0:7391\" (every interface)"
    );
    assert_eq!(
        error("[gateway]\nlisten = 7391"),
        "gateway.listen = 7391: is an integer, but must be a string; write e.g. \"127.0.0.1:7391\""
    );
    let c = ok("[gateway]\nlisten = \"[::1]:9000\"");
    assert_eq!(
        c.gateway.listen,
        "[::1]:9000".parse::<SocketAddr>().unwrap()
    );
}

#[test]
fn a_specific_listen_address_is_an_allowed_host_by_default() {
    let c = ok("[gateway]\nlisten = \"192.168.1.5:7391\"");
    assert!(c.gateway.host_allowed("192.168.1.5:7391"));
    assert!(c.gateway.host_allowed("localhost:7391"));
    assert!(!c.gateway.host_allowed("attacker.example"));
    // The address counts on Manifold's own port only; names count on any port.
    assert!(!c.gateway.host_allowed("192.168.1.5:8080"));
    let any = ok("[gateway]\nlisten = \"0.0.0.0:7391\"");
    assert!(!any.gateway.host_allowed("0.0.0.0"));
    assert!(!any.gateway.host_allowed("0.0.0.0:7391"));
}

#[test]
fn listed_hosts_replace_the_defaults_and_the_listen_address() {
    let c = ok("[gateway]\nlisten = \"192.168.1.5:7391\"\nallowed_hosts = [\"mcp.example.com\"]");
    assert!(c.gateway.host_allowed("mcp.example.com"));
    assert!(!c.gateway.host_allowed("192.168.1.5:7391"));
    assert!(!c.gateway.host_allowed("localhost:7391"));
}

#[test]
fn naming_and_discovery_are_enums() {
    let c = ok("[gateway]\nnaming = \"conditional\"\ndiscovery = \"search\"");
    assert_eq!(c.gateway.naming, NamingMode::Conditional);
    assert_eq!(c.gateway.discovery, Discovery::Search);
    assert_eq!(
        error("[gateway]\nnaming = \"alway\""),
        "gateway.naming = \"alway\": is not one of always, never, conditional; did you mean \"always\"?"
    );
    assert_eq!(
        error("[gateway]\ndiscovery = \"lazy\""),
        "gateway.discovery = \"lazy\": is not one of full, search; write one of \"full\", \"search\""
    );
}

#[test]
fn name_max_len_has_a_range() {
    assert_eq!(
        ok("[gateway]\nname_max_len = 128").gateway.name_max_len,
        128
    );
    assert_eq!(
        error("[gateway]\nname_max_len = 200"),
        "gateway.name_max_len = 200: must be from 16 to 128 (the protocol allows 128; most clients 64); write e.g. 64"
    );
    assert_eq!(
        error("[gateway]\nname_max_len = \"64\""),
        "gateway.name_max_len = \"64\": is a string, but must be an integer; write 64 without quotes"
    );
}

#[test]
fn strict_names_is_a_boolean_and_name_charset_is_explained() {
    assert!(!ok("[gateway]\nstrict_names = false").gateway.strict_names);
    assert_eq!(
        error("[gateway]\nstrict_names = \"true\""),
        "gateway.strict_names = \"true\": is a string, but must be a boolean; write true without quotes"
    );
    assert_eq!(
        error("[gateway]\nname_charset = \"[A-Za-z0-9_-]\""),
        "gateway.name_charset: unknown key; the character set is fixed: write strict_names = true for [A-Za-z0-9_-] (the default) or false to also allow \".\""
    );
    assert_eq!(
        error("[gateway]\nlistne = \"127.0.0.1:1\""),
        "gateway.listne: unknown key; did you mean \"listen\"?"
    );
}

#[test]
fn origin_and_host_allowlists_are_validated() {
    let c = ok(
        "[gateway]\nallowed_origins = [\"https://app.example.com\"]\nallowed_hosts = [\"mcp.example.com\"]",
    );
    assert!(c.gateway.origin_allowed("https://app.example.com"));
    assert!(!c.gateway.origin_allowed("http://localhost:3000"));
    assert!(c.gateway.host_allowed("mcp.example.com:443"));
    assert!(!c.gateway.host_allowed("localhost"));
    assert_eq!(
        errors(
            "[gateway]\nallowed_origins = [\"http://localhost:3000/\", \"localhost\"]\nallowed_hosts = [\"localhost:7391\"]"
        ),
        vec![
            "gateway.allowed_origins[0] = \"http://localhost:3000/\": an origin has no path, not even \"/\"; write \"http://localhost:3000\"",
            "gateway.allowed_origins[1] = \"localhost\": is not an origin (scheme://host[:port]); write e.g. \"https://app.example.com\" or \"http://localhost:*\"",
            "gateway.allowed_hosts[0] = \"localhost:7391\": has a port; the Host allowlist matches names only (any port); write a host name or address without scheme or port, e.g. \"localhost\" or \"*.example.com\"",
        ]
    );
}

#[test]
fn session_keys_are_32_bytes_and_never_echoed() {
    let hex = "ab".repeat(32);
    let c = ok(&format!(
        "[gateway]\nsession_key = \"{hex}\"\nsession_key_id = \"k1\""
    ));
    let key = c.gateway.session_key.as_ref().unwrap();
    let expected = manifold_config::SessionKey::from_bytes(&[0xab; 32])
        .unwrap()
        .with_id("k1")
        .unwrap();
    assert_eq!(key, &expected);
    assert_eq!(key.id(), "k1");
    let message = error("[gateway]\nsession_key = \"c2hvcnQta2V5\"");
    assert_eq!(
        message,
        "gateway.session_key: decodes to 9 bytes, not 32; write 32 random bytes in base64 or hex, e.g. session_key = \"${file:/etc/manifold/session.key}\" with the file made by `openssl rand -base64 32`"
    );
    assert!(!message.contains("c2hvcnQta2V5"));
    assert_eq!(
        error("[gateway]\nsession_key_id = \"k1\""),
        "gateway.session_key_id = \"k1\": names a key, but there is no session_key; add session_key, or remove session_key_id"
    );
}

#[test]
fn data_dir_is_relative_to_the_config_file() {
    let c = ok("[gateway]\ndata_dir = \"state\"");
    assert_eq!(c.gateway.data_dir, PathBuf::from("/etc/manifold/state"));
    let c = ok("[gateway]\ndata_dir = \"~/m\"");
    assert_eq!(c.gateway.data_dir, PathBuf::from("/home/ada/m"));
}

// ---------------------------------------------------------------- [servers.NAME]

#[test]
fn a_stdio_server_converts_to_a_stdio_spec() {
    let c = ok(r#"
[servers.git]
command = "uvx"
args = ["mcp-server-git", "--repository", "."]
env = { B = "2", A = "1" }
env_allow = ["PATH"]
cwd = "repo"
scope = "session"
era = "legacy"
timeout = "30s"
max_timeout = "5m"
prefix = "g"
tools.allow = ["git_*"]
tools.deny = ["git_push"]
startup = "lazy"
"#);
    let s = c.server("git").unwrap();
    assert_eq!(s.name, "git");
    assert_eq!(s.prefix, "g");
    assert!(s.enabled);
    assert_eq!(s.era, EraChoice::Legacy);
    assert_eq!(s.timeout, Duration::from_secs(30));
    assert_eq!(s.max_timeout, Duration::from_secs(300));
    assert_eq!(s.startup, Startup::Lazy);
    assert!(s.tools.allows("git_status"));
    assert!(!s.tools.allows("git_push"));
    assert!(!s.tools.allows("other"));
    assert_eq!(s.scope(), Some(Scope::Session));
    let ServerKind::Stdio { spec, .. } = &s.kind else {
        panic!("expected stdio")
    };
    assert_eq!(spec.command, "uvx");
    assert_eq!(spec.args, vec!["mcp-server-git", "--repository", "."]);
    assert_eq!(
        spec.env,
        vec![
            ("A".to_owned(), "1".to_owned()),
            ("B".to_owned(), "2".to_owned())
        ]
    );
    assert_eq!(spec.env_allow, Some(vec!["PATH".to_owned()]));
    assert_eq!(spec.cwd, Some(PathBuf::from("/etc/manifold/repo")));
    assert!(matches!(s.target(), Target::Stdio(t) if t.command == "uvx"));
    let options = s.connect_options();
    assert_eq!(options.server, "git");
    assert_eq!(options.era, EraChoice::Legacy);
}

#[test]
fn server_defaults() {
    let c = ok("[servers.a]\ncommand = \"a\"");
    let s = c.server("a").unwrap();
    assert_eq!(s.prefix, "a");
    assert!(s.enabled);
    assert_eq!(s.era, EraChoice::Auto);
    assert_eq!(s.timeout, Duration::from_secs(60));
    assert_eq!(s.max_timeout, Duration::from_secs(600));
    assert_eq!(s.startup, Startup::Eager);
    assert!(s.tools.is_allow_all());
    assert_eq!(s.scope(), Some(Scope::Shared));
    let ServerKind::Stdio { spec, .. } = &s.kind else {
        panic!("expected stdio")
    };
    assert_eq!(
        spec.env_allow, None,
        "None means the upstream DEFAULT_ENV_ALLOW"
    );
    assert!(spec.env.is_empty());
}

#[test]
fn an_http_server_converts_to_an_http_spec() {
    let c = ok(r#"
[servers.remote]
url = "https://mcp.example.com/mcp"
transport = "sse"
headers = { Authorization = "Bearer abc" }
ca_bundle = "ca.pem"
client_cert = "/certs/me.pem"
"#);
    let s = c.server("remote").unwrap();
    assert_eq!(s.scope(), None);
    let ServerKind::Http { spec, .. } = &s.kind else {
        panic!("expected http")
    };
    assert_eq!(spec.url, "https://mcp.example.com/mcp");
    assert_eq!(spec.transport, HttpTransportChoice::Sse);
    assert_eq!(
        spec.headers,
        vec![("Authorization".to_owned(), "Bearer abc".to_owned())]
    );
    assert_eq!(spec.ca_bundle, Some(PathBuf::from("/etc/manifold/ca.pem")));
    assert_eq!(spec.client_identity, Some(PathBuf::from("/certs/me.pem")));
    assert!(!spec.allow_insecure_http);
    assert!(matches!(s.target(), Target::Http(h) if h.transport == HttpTransportChoice::Sse));
    let auto = ok("[servers.r]\nurl = \"https://x.example/mcp\"");
    let ServerKind::Http { spec, .. } = &auto.server("r").unwrap().kind else {
        panic!("expected http")
    };
    assert_eq!(spec.transport, HttpTransportChoice::Auto);
}

#[test]
fn server_names_follow_the_name_rule() {
    assert_eq!(
        error("[servers.\"my server\"]\ncommand = \"a\""),
        "servers.\"my server\": is not a valid server name (1 to 32 of A-Z a-z 0-9 _ -); rename it, e.g. [servers.my_server]"
    );
    let long = "a".repeat(33);
    assert_eq!(
        error(&format!("[servers.{long}]\ncommand = \"a\"")),
        format!(
            "servers.{long}: is not a valid server name (1 to 32 of A-Z a-z 0-9 _ -); rename it, e.g. [servers.{}]",
            "a".repeat(32)
        )
    );
}

#[test]
fn a_server_has_exactly_one_of_command_and_url() {
    assert_eq!(
        error("[servers.x]\nenabled = true"),
        "servers.x: has neither command nor url; write command = \"...\" for a local (stdio) server or url = \"https://...\" for a remote one"
    );
    assert_eq!(
        error("[servers.x]\ncommand = \"a\"\nurl = \"https://x.example\""),
        "servers.x.url: a server has command or url, not both; keep command for a local (stdio) server or url for a remote one; define two servers to have both"
    );
}

#[test]
fn keys_of_the_other_kind_are_refused() {
    assert_eq!(
        errors("[servers.x]\nurl = \"https://x.example\"\nscope = \"session\"\nargs = [\"a\"]"),
        vec![
            "servers.x.scope: only applies to stdio servers (those with command); remove it (this server has url, so it is reached over HTTP)",
            "servers.x.args: only applies to stdio servers (those with command); remove it (this server has url, so it is reached over HTTP)",
        ]
    );
    assert_eq!(
        error("[servers.x]\ncommand = \"a\"\ntransport = \"sse\""),
        "servers.x.transport: only applies to servers with a url; remove it (this server has command, so it runs over stdio)"
    );
}

#[test]
fn urls_follow_the_scheme_rules() {
    ok("[servers.a]\nurl = \"http://127.0.0.1:3001/mcp\"");
    ok("[servers.a]\nurl = \"http://localhost:3001/mcp\"");
    ok("[servers.a]\nurl = \"http://[::1]:3001/mcp\"");
    ok("[servers.a]\nurl = \"http://10.0.0.2/mcp\"\nallow_insecure_http = true");
    assert_eq!(
        error("[servers.a]\nurl = \"http://10.0.0.2/mcp\""),
        "servers.a.url: uses plain http:// to a host other than this machine, so credentials and tool arguments would cross the network unencrypted; write https://..., or set allow_insecure_http = true for this server if the network is trusted"
    );
    assert_eq!(
        error("[servers.a]\nurl = \"wss://x.example/mcp\""),
        "servers.a.url: is a WebSocket URL, and MCP does not run over WebSocket; write the server's https:// URL (Streamable HTTP or HTTP+SSE)"
    );
    assert_eq!(
        error("[servers.a]\nurl = \"ftp://x.example/mcp\""),
        "servers.a.url: has a scheme other than https or http; write e.g. \"https://example.com/mcp\""
    );
    assert_eq!(
        error("[servers.a]\nurl = \"x.example/mcp\""),
        "servers.a.url: is not a valid absolute URL (relative URL without a base); write it in full, e.g. \"https://example.com/mcp\""
    );
}

#[test]
fn durations_are_checked() {
    // The brief's own example.
    assert_eq!(
        error("[servers.git]\ncommand = \"a\"\ntimeout = \"sixty\""),
        "servers.git.timeout = \"sixty\": not a duration; write e.g. \"60s\" or \"2m\""
    );
    assert_eq!(
        error("[servers.git]\ncommand = \"a\"\ntimeout = \"90\""),
        "servers.git.timeout = \"90\": a duration needs a unit; write e.g. \"90s\" (seconds) or \"90ms\" (milliseconds)"
    );
    assert_eq!(
        error("[servers.git]\ncommand = \"a\"\ntimeout = 60"),
        "servers.git.timeout = 60: is an integer, but must be a string; write a duration as a string, e.g. \"60s\" or \"2m\""
    );
    assert_eq!(
        error("[servers.git]\ncommand = \"a\"\ntimeout = \"0s\""),
        "servers.git.timeout = \"0s\": must be longer than zero; write e.g. \"60s\""
    );
    assert_eq!(
        error("[servers.git]\ncommand = \"a\"\nmax_timeout = \"2 weeks\""),
        "servers.git.max_timeout = \"2 weeks\": \"weeks\" is not a unit of time; use ms, s, m, h or d, e.g. \"500ms\", \"60s\", \"5m\", \"1h\", \"90d\""
    );
}

#[test]
fn timeout_must_not_exceed_max_timeout() {
    assert_eq!(
        error("[servers.git]\ncommand = \"a\"\ntimeout = \"20m\""),
        "servers.git.timeout = \"20m\": is longer than max_timeout (10m, the default); raise max_timeout too, e.g. max_timeout = \"20m\""
    );
    assert_eq!(
        error("[servers.git]\ncommand = \"a\"\nmax_timeout = \"30s\""),
        "servers.git.max_timeout = \"30s\": is shorter than timeout (1m, the default); write timeout = \"30s\" or less too"
    );
    assert_eq!(
        error("[servers.git]\ncommand = \"a\"\ntimeout = \"2m\"\nmax_timeout = \"1m\""),
        "servers.git.timeout = \"2m\": is longer than max_timeout (1m); shorten timeout or raise max_timeout; timeout is the idle limit, max_timeout the absolute cap"
    );
    ok("[servers.git]\ncommand = \"a\"\ntimeout = \"1m\"\nmax_timeout = \"1m\"");
}

#[test]
fn enum_values_are_checked() {
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nscope = \"user\""),
        "servers.a.scope = \"user\": is not one of shared, session; write one of \"shared\", \"session\""
    );
    assert_eq!(
        error("[servers.a]\nurl = \"https://a.example\"\ntransport = \"streamable_http\""),
        "servers.a.transport = \"streamable_http\": is not one of auto, streamable-http, sse; did you mean \"streamable-http\"?"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nstartup = \"later\""),
        "servers.a.startup = \"later\": is not one of eager, lazy; write one of \"eager\", \"lazy\""
    );
}

#[test]
fn prefixes_must_be_unique_among_enabled_servers() {
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nprefix = \"git\"\n[servers.git]\ncommand = \"b\""),
        "servers.git: its prefix (its name, \"git\") is already the prefix of servers.a (prefixes are compared ignoring case); write prefix = \"...\" in [servers.git] to choose another"
    );
    assert_eq!(
        error(
            "[servers.a]\ncommand = \"a\"\nprefix = \"X\"\n[servers.b]\ncommand = \"b\"\nprefix = \"x\""
        ),
        "servers.b.prefix = \"x\": is already the prefix of servers.a (prefixes are compared ignoring case); give one of them another prefix"
    );
    // A disabled alternative may share a prefix: only one of them runs.
    ok(
        "[servers.a]\ncommand = \"a\"\nprefix = \"gh\"\n[servers.b]\nurl = \"https://gh.example\"\nprefix = \"gh\"\nenabled = false",
    );
}

#[test]
fn prefixes_follow_the_name_rule_and_leave_room() {
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nprefix = \"my.prefix\""),
        "servers.a.prefix = \"my.prefix\": is not a valid prefix; use 1 to 32 of A-Z a-z 0-9 _ -, e.g. \"my_prefix\""
    );
    let prefix = "p".repeat(10);
    assert_eq!(
        error(&format!(
            "[gateway]\nname_max_len = 16\n[servers.a]\ncommand = \"a\"\nprefix = \"{prefix}\""
        )),
        format!(
            "servers.a.prefix = \"{prefix}\": the prefix \"{prefix}\" leaves fewer than 8 characters of gateway.name_max_len (16) for tool names; write a shorter prefix = \"...\", or raise gateway.name_max_len"
        )
    );
    ok(&format!(
        "[gateway]\nname_max_len = 16\nnaming = \"never\"\n[servers.a]\ncommand = \"a\"\nprefix = \"{prefix}\""
    ));
}

#[test]
fn tool_patterns_must_be_valid_globs() {
    assert_eq!(
        errors(
            "[servers.a]\ncommand = \"a\"\ntools.allow = [\"ok_*\", \"[abc\"]\ntools.deny = [\"{x\"]"
        ),
        vec![
            "servers.a.tools.allow[1] = \"[abc\": is not a valid pattern (unclosed character class; missing ']'); patterns use * (any characters), ? (one character), [abc] and {a,b}; write [*] to match a literal *",
            "servers.a.tools.deny[0] = \"{x\": is not a valid pattern (unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?)); patterns use * (any characters), ? (one character), [abc] and {a,b}; write [*] to match a literal *",
        ]
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\ntools = [\"x\"]"),
        "servers.a.tools: is an array, but must be a table; write tools.allow = [\"pattern*\"] and/or tools.deny = [\"pattern*\"]"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\ntools.alow = [\"x\"]"),
        "servers.a.tools.alow: unknown key; did you mean \"allow\"?"
    );
}

#[test]
fn unknown_server_keys_get_suggestions_or_hints() {
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\ntimout = \"5s\""),
        "servers.a.timout: unknown key; did you mean \"timeout\"?"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\ntype = \"stdio\""),
        "servers.a.type: unknown key; Manifold tells the kind from command (stdio) or url (HTTP); to choose an HTTP transport write transport = \"streamable-http\" or \"sse\""
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\ndisabled = true"),
        "servers.a.disabled: unknown key; write enabled = false"
    );
}

#[test]
fn command_is_one_program_never_a_shell_line() {
    assert_eq!(
        error("[servers.a]\ncommand = \"npx -y @scope/server\""),
        "servers.a.command = \"npx -y @scope/server\": is a shell command line, but command is one program, run without a shell; write command = \"npx\" and args = [\"-y\", \"@scope/server\"]"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"node server.js | tee log\""),
        "servers.a.command = \"node server.js | tee log\": uses shell syntax (pipes, redirections, command lists or substitutions), but command is one program, run without a shell; put the shell line in a script and name the script in command"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"/usr/bin/node server.js > log\""),
        "servers.a.command = \"/usr/bin/node server.js > log\": uses shell syntax (pipes, redirections, command lists or substitutions), but command is one program, run without a shell; put the shell line in a script and name the script in command"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"./run.sh --stdio\""),
        "servers.a.command = \"./run.sh --stdio\": is a shell command line, but command is one program, run without a shell; write command = \"./run.sh\" and args = [\"--stdio\"]"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"\""),
        "servers.a.command = \"\": is empty; write the program to run, e.g. command = \"node\""
    );
    // A path may contain spaces; a relative path is relative to the configuration file.
    let c = ok(
        "[servers.a]\ncommand = \"/Applications/My App/server\"\n[servers.b]\ncommand = \"./bin/server\"",
    );
    let command = |name: &str| match &c.server(name).unwrap().kind {
        ServerKind::Stdio { spec, .. } => spec.command.clone(),
        ServerKind::Http { .. } => panic!("expected stdio"),
    };
    assert_eq!(command("a"), "/Applications/My App/server");
    assert_eq!(command("b"), "/etc/manifold/./bin/server");
}

#[test]
fn env_and_header_names_are_checked_without_echoing_values() {
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nenv = { \"A=B\" = \"v\" }"),
        "servers.a.env.\"A=B\": is not a valid environment variable name; names are not empty and hold no = or NUL"
    );
    assert_eq!(
        errors(
            "[servers.a]\nurl = \"https://a.example\"\nheaders = { \"Bad Header\" = \"v\", Mcp-Session-Id = \"s\", X-Ok = \"a\\nb\" }"
        ),
        vec![
            "servers.a.headers.\"Bad Header\": is not a valid HTTP header name; use letters, digits and - (e.g. Authorization, X-Api-Key)",
            "servers.a.headers.Mcp-Session-Id: is set by Manifold's transport itself; remove it",
            "servers.a.headers.X-Ok: contains a line break or NUL, which a header cannot carry; remove it",
        ]
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nenv = { TOKEN = 5 }"),
        "servers.a.env.TOKEN: is an integer, but must be a string; write e.g. env = { KEY = \"value\" }"
    );
}

#[test]
fn type_errors_name_the_expected_type() {
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nargs = \"x y\""),
        "servers.a.args = \"x y\": is a string, but must be an array of strings; write e.g. args = [\"server.js\", \"--stdio\"]"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nargs = [\"x\", 2]"),
        "servers.a.args[1] = 2: is an integer, but must be a string; write e.g. args = [\"server.js\", \"--stdio\"]"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nenabled = \"yes\""),
        "servers.a.enabled = \"yes\": is a string, but must be a boolean; write true or false"
    );
    assert_eq!(
        error("[[servers]]\ncommand = \"a\""),
        "servers: is an array, but must be a table of servers; write one [servers.NAME] section per server, not [[servers]]"
    );
    assert_eq!(
        error("[servers]\na = \"x\""),
        "servers.a = \"x\": is a string, but must be a table; write a [servers.NAME] section with command = \"...\" or url = \"...\""
    );
}

#[test]
fn servers_come_out_ordered_by_name_ignoring_case() {
    let c = ok(
        "[servers.b]\ncommand = \"b\"\n[servers.A]\ncommand = \"a\"\n[servers.c]\ncommand = \"c\"",
    );
    let names: Vec<&str> = c.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["A", "b", "c"]);
}

#[test]
fn reloading_the_same_text_gives_equal_servers() {
    let text = "[servers.a]\ncommand = \"a\"\nenv = { K = \"v\" }\n[servers.b]\nurl = \"https://b.example\"";
    let (one, two) = (ok(text), ok(text));
    assert_eq!(one.servers, two.servers);
    let changed = ok(
        "[servers.a]\ncommand = \"a\"\nenv = { K = \"w\" }\n[servers.b]\nurl = \"https://b.example\"",
    );
    assert_ne!(one.server("a"), changed.server("a"));
    assert_eq!(one.server("b"), changed.server("b"));
}

#[test]
fn smaller_rules_have_their_messages_too() {
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\nenv_allow = [\"PATH\", \"A=B\"]"),
        "servers.a.env_allow[1] = \"A=B\": is not a valid environment variable name; names are not empty and hold no = or NUL"
    );
    assert_eq!(
        error("[servers.a]\ncommand = \"a\"\ncwd = \"\""),
        "servers.a.cwd = \"\": is empty; write a path, or remove the key"
    );
    assert_eq!(
        error(&format!(
            "[gateway]\nsession_key = \"{}\"\nsession_key_id = \"key one\"",
            "ab".repeat(32)
        )),
        "gateway.session_key_id = \"key one\": is not a key id; use 1 to 16 of A-Z a-z 0-9 _ - (a \".\" ends the key id inside a session id), e.g. \"k1\""
    );
    // The server's own rule: a "." ends the key id inside a session id, and ids stay short.
    // (These once passed `manifold check` and then stopped `manifold serve`.)
    for id in ["prod.2026", "seventeen-chars-x"] {
        let message = error(&format!(
            "[gateway]\nsession_key = \"{}\"\nsession_key_id = \"{id}\"",
            "ab".repeat(32)
        ));
        assert!(
            message.starts_with(&format!(
                "gateway.session_key_id = \"{id}\": is not a key id"
            )),
            "{message}"
        );
    }
    assert_eq!(
        error("[servers.a]\nurl = \"https://a.example\"\nallow_insecure_http = \"yes\""),
        "servers.a.allow_insecure_http = \"yes\": is a string, but must be a boolean; write true or false"
    );
}
