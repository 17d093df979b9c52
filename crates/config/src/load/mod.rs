//! From configuration text to a [`Config`]: parse (keeping spans), read each section while
//! collecting every problem, and succeed only when there are none.

pub(crate) mod approvals;
pub(crate) mod audit;
mod auth;
pub(crate) mod authoring;
pub(crate) mod dashboard;
mod default_sandbox;
mod gateway;
pub(crate) mod lifecycle;
pub(crate) mod metaforge;
pub(crate) mod overrides;
mod patterns;
mod reader;
pub(crate) mod rest;
pub(crate) mod result_cache;
pub(crate) mod retry_policy;
mod rules;
mod sandbox;
mod servers;
pub(crate) mod store;
pub(crate) mod telemetry;
pub(crate) mod tools;
pub(crate) mod toolsets;
pub(crate) mod upstream_credentials;

use std::path::Path;

use toml::de::DeTable;

use crate::config::Config;
use crate::environment::{Environment, FileProblem, MAX_CONFIG_BYTES, ProcessEnvironment};
use crate::error::{ConfigError, ConfigErrors, line_and_column};
use reader::Reader;

pub(crate) use servers::{
    RESERVED_HEADERS, looks_like_command_line, url_problem, uses_shell_syntax,
};

const TOP_KEYS: &[&str] = &[
    "gateway",
    "servers",
    "rules",
    "rate_limits",
    "auth",
    "telemetry",
    "store",
    "sandbox",
    "audit",
    "approvals",
    "authoring",
    "dashboard",
    "metaforge",
    "rest",
    "tools",
    "toolsets",
];

fn top_level_hints() -> Vec<(&'static str, &'static str)> {
    let mut hints = vec![
        (
            "mcpServers",
            "that is an MCP client's JSON layout; Manifold's servers are [servers.NAME] sections (`manifold import` converts a client's configuration)",
        ),
        ("mcp", "write one [servers.NAME] section per server"),
    ];
    for key in gateway::GATEWAY_KEYS {
        hints.push((key, "it belongs in the [gateway] section"));
    }
    for key in servers::SERVER_KEYS {
        hints.push((key, "a server's keys belong in its [servers.NAME] section"));
    }
    hints
}

impl Config {
    /// Reads, validates and resolves the file at `path`, with the process environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigErrors> {
        Config::load_with(path, &ProcessEnvironment)
    }

    /// Like [`Config::load`], with variables and files from `env`.
    pub fn load_with(
        path: impl AsRef<Path>,
        env: &dyn Environment,
    ) -> Result<Config, ConfigErrors> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let unreadable = |problem: String, fix: &str| ConfigErrors {
            origin: origin.clone(),
            errors: vec![ConfigError {
                origin: origin.clone(),
                line: 0,
                column: 0,
                field: String::new(),
                written: None,
                problem,
                fix: fix.to_owned(),
            }],
        };
        let bytes = env.read_file(path, MAX_CONFIG_BYTES).map_err(|e| match e {
            FileProblem::Io(reason) => unreadable(
                format!("could not read the configuration: {reason}"),
                "check the path (`manifold import` can write a first configuration)",
            ),
            FileProblem::TooLarge { limit } => unreadable(
                format!("the configuration is larger than {} KiB", limit / 1024),
                "is this the right file?",
            ),
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            unreadable(
                "the configuration is not UTF-8 text".to_owned(),
                "save it as UTF-8",
            )
        })?;
        let base_dir = path.parent().filter(|p| !p.as_os_str().is_empty());
        load_text(&text, &origin, base_dir, env)
    }

    /// Validates and resolves configuration text. Relative paths stay relative (to the
    /// working directory). `origin_name` names the text in errors.
    pub fn from_str(text: &str, origin_name: &str) -> Result<Config, ConfigErrors> {
        load_text(text, origin_name, None, &ProcessEnvironment)
    }

    /// Like [`Config::from_str`], with relative paths relative to `base_dir` and variables and
    /// files from `env`.
    pub fn from_str_with(
        text: &str,
        origin_name: &str,
        base_dir: Option<&Path>,
        env: &dyn Environment,
    ) -> Result<Config, ConfigErrors> {
        load_text(text, origin_name, base_dir, env)
    }
}

/// Loads configuration text. `base_dir` is the directory relative paths are relative to.
pub(crate) fn load_text(
    text: &str,
    origin: &str,
    base_dir: Option<&Path>,
    env: &dyn Environment,
) -> Result<Config, ConfigErrors> {
    let (document, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        // With the syntax broken, what the rest means is guesswork: report only the syntax.
        let errors = syntax
            .iter()
            .map(|e| {
                let (line, column) = e
                    .span()
                    .map_or((0, 0), |span| line_and_column(text, span.start));
                ConfigError {
                    origin: origin.to_owned(),
                    line,
                    column,
                    field: String::new(),
                    written: None,
                    problem: format!("not valid TOML: {}", e.message().trim_end()),
                    fix: "fix the syntax (see https://toml.io)".to_owned(),
                }
            })
            .collect();
        return Err(ConfigErrors {
            origin: origin.to_owned(),
            errors,
        });
    }
    let root = document.get_ref();
    let mut reader = Reader::new(origin, text, env, base_dir);
    reader.check_keys("", root, TOP_KEYS, &top_level_hints());
    let gateway = gateway::read_gateway(&mut reader, root.get("gateway"));
    let mut servers = servers::read_servers(&mut reader, root.get("servers"), &gateway);
    sandbox::apply_sandboxes(&mut reader, root, &gateway, &mut servers);
    let rules = rules::read_rules(&mut reader, root.get("rules"), &servers);
    let rate_limits = rules::read_rate_limits(&mut reader, root.get("rate_limits"));
    let auth = auth::read_auth(&mut reader, root.get("auth"));
    let lifecycle = lifecycle::read_lifecycle(&mut reader, root, &servers);
    let telemetry = telemetry::read_telemetry(&mut reader, root.get("telemetry"));
    let retries = retry_policy::read_retry_policy(&mut reader, root);
    let result_cache = result_cache::read_result_cache(&mut reader, root, &servers);
    let overrides = overrides::read_overrides(&mut reader, root);
    let store = store::read_store(&mut reader, root.get("store"));
    let audit = audit::read_audit(&mut reader, root.get("audit"));
    let approvals = approvals::read_approvals(&mut reader, root.get("approvals"));
    let authoring = authoring::read_authoring(&mut reader, root.get("authoring"));
    let dashboard = dashboard::read_dashboard(&mut reader, root.get("dashboard"));
    let metaforge = metaforge::read_metaforge(&mut reader, root.get("metaforge"));
    let rest = rest::read_rest(&mut reader, root.get("rest"));
    let tools = tools::read_tools(&mut reader, root.get("tools"));
    let toolsets = toolsets::read_toolsets(&mut reader, root.get("toolsets"), &servers);
    let secrets = reader.finish()?;
    let mut config = Config::assemble(origin, gateway, servers, secrets);
    config.rules = rules;
    config.rate_limits = rate_limits;
    config.lifecycle = lifecycle;
    config.auth = auth;
    config.telemetry = telemetry;
    config.retries = retries;
    config.result_cache = result_cache;
    config.overrides = overrides;
    config.store = store;
    config.audit = audit;
    config.approvals = approvals;
    config.authoring = authoring;
    config.dashboard = dashboard;
    config.metaforge = metaforge;
    config.rest = rest;
    config.tools = tools;
    config.toolsets = toolsets;
    Ok(config)
}
