//! `manifold serve` and `manifold stdio`: the gateway, from configuration to a listening endpoint.
//!
//! Loads the configuration (or runs with built-in tools only when there is none), starts the core
//! with every upstream under supervision, and puts it behind Streamable HTTP and legacy SSE
//! (`serve`) or behind this process's stdin/stdout (`stdio`). stdout carries protocol bytes only
//! in `stdio` mode; everything else goes to stderr. What `serve` does once it listens (reload,
//! graceful shutdown, the children's cgroup) lives in `serve/`.

mod child_cgroup;
mod config_watch;
mod lifecycle;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use manifold_config::Config;
use manifold_gateway::Gateway;
use manifold_server::{FirstStart, Server, ServerSettings, SessionKey};

use crate::config_file::config_path;
use crate::gateway_config::{Stored, gateway_settings, upstream_definitions};
use crate::report::{CliError, Outcome};

/// How long `serve` waits for upstreams' first start before it begins answering anyway, and
/// how long a `stdio` client's first requests wait for it.
pub const STARTUP_WAIT: Duration = Duration::from_secs(30);
/// How long a `stdio` client's `initialize` waits for the first start: long enough for a
/// server that is installed to come up (so the capabilities are whole), short of the timeouts
/// clients give a server to answer it.
pub const GREETING_WAIT: Duration = Duration::from_secs(3);
/// The file that holds a generated session key, inside the data directory.
pub const SESSION_KEY_FILE: &str = "session.key";

/// The configuration to run with, and where it came from.
fn load(given: Option<&Path>) -> Result<(Config, Option<PathBuf>), CliError> {
    match config_path(given) {
        Some(path) => {
            let config = Config::load(&path).map_err(|errors| {
                CliError::usage(format!("{} is not valid:\n{errors}", path.display()))
            })?;
            Ok((config, Some(path)))
        }
        None => {
            let config = Config::from_str("", "built-in defaults").map_err(|errors| {
                CliError::usage(format!(
                    "the built-in defaults could not be loaded:\n{errors}"
                ))
            })?;
            Ok((config, None))
        }
    }
}

/// What a person starting `serve` reads first: what is served where, or, with no configuration,
/// where it looked and how to add a server.
fn announce(url: &str, config: &Config, source: Option<&Path>) {
    if let Some(path) = source {
        eprintln!(
            "Manifold is serving {} server(s) from {} at {url}",
            config.servers.len(),
            path.display()
        );
        return;
    }
    eprintln!(
        "Manifold is serving its built-in tools at {url} ({}).",
        crate::config_file::none_found()
    );
    eprintln!(
        "Point any MCP client at that URL. To add a server, write a manifold.toml such as:\n"
    );
    eprintln!(
        "  [servers.everything]\n  command = \"npx\"\n  args = [\"-y\", \"@modelcontextprotocol/server-everything\", \"stdio\"]\n"
    );
    eprintln!("or convert a client's file: manifold import ~/.cursor/mcp.json > manifold.toml");
}

/// Starts the core and waits (bounded) for the upstreams' first start; refuses a name collision.
async fn start_gateway(
    config: &Config,
    stored: &Stored,
    telemetry: std::sync::Arc<manifold_telemetry::Telemetry>,
) -> Result<Gateway, CliError> {
    let gateway = start_core(config, stored, telemetry);
    if let Some(collision) = collision_once_started(&gateway).await {
        gateway.shutdown().await;
        return Err(CliError::usage(format!("refusing to start: {collision}")));
    }
    Ok(gateway)
}

/// Starts the core, every upstream under supervision, without waiting for any.
fn start_core(
    config: &Config,
    stored: &Stored,
    telemetry: std::sync::Arc<manifold_telemetry::Telemetry>,
) -> Gateway {
    let mut settings = gateway_settings(config, stored);
    settings.telemetry = telemetry;
    Gateway::start(settings, upstream_definitions(config, stored))
}

/// Waits (bounded) for the upstreams' first start; then the name collision that keeps their
/// catalog from being built, if there is one.
async fn collision_once_started(gateway: &Gateway) -> Option<String> {
    gateway.wait_started(STARTUP_WAIT).await;
    gateway.catalog_error()
}

fn session_key(config: &Config) -> Result<SessionKey, CliError> {
    match &config.gateway.session_key {
        Some(key) => Ok(key.clone()),
        None => {
            let path = config.gateway.data_dir.join(SESSION_KEY_FILE);
            SessionKey::load_or_create(&path).map_err(|e| {
                CliError::with_hint(
                    format!(
                        "could not read or create the session key at {}: {e}",
                        path.display()
                    ),
                    "set gateway.data_dir to a writable directory, or gateway.session_key",
                )
            })
        }
    }
}

fn server_settings(config: &Config, listen: SocketAddr) -> Result<ServerSettings, CliError> {
    let mut settings = ServerSettings::new(session_key(config)?);
    settings.listen = listen;
    settings.allowed_origins = config.gateway.allowed_origins.clone();
    settings.allowed_hosts = config.gateway.allowed_hosts.clone();
    settings.limits.session_idle_ttl = config.lifecycle.session_idle_ttl;
    settings.metrics_endpoint = config.telemetry.metrics;
    settings.admin_listen = config.telemetry.admin_listen;
    settings.metaforge_rpc = config.metaforge.enabled;
    settings.rest_tools = config.rest.enabled;
    Ok(settings)
}

/// `manifold serve [--config FILE] [--listen ADDR] [--insecure-no-auth]`.
pub async fn serve(
    given: Option<&Path>,
    listen: Option<SocketAddr>,
    insecure_no_auth: bool,
) -> Result<Outcome, CliError> {
    let (config, source) = load(given)?;
    let listen = listen.unwrap_or(config.gateway.listen);
    // Held for the gateway's life: on SQLite it also refuses a second gateway on this data_dir.
    let store = crate::key_store::open_for_gateway(&config).await?;
    crate::key_store::import_old_file(&config, &crate::key_store::api_keys(&store)).await?;
    let stored = Stored::open(&config, &store).await?;
    // Decided before anything starts: who may reach this address, and how they prove it.
    let auth = crate::exposure::authenticator_for(&config, listen, insecure_no_auth, &store)?;
    let signals = lifecycle::Signals::install()?;
    // Before the first child starts, so that every child is born inside; said once listening.
    let containment = child_cgroup::ChildCgroup::enter();
    let fresh = crate::telemetry_setup::fresh_telemetry(&config);
    let (telemetry, trail) = crate::audit_trail::start(&config, &store, fresh);
    let gateway = start_gateway(&config, &stored, telemetry).await?;
    let mut settings = server_settings(&config, listen)?;
    let running_config = crate::dashboard::RunningConfig::new(config.clone());
    settings.operator_ui = dashboard_for(
        &config,
        &settings,
        auth.clone(),
        DashboardParts {
            gateway: &gateway,
            store: &store,
            stored: &stored,
            source: source.as_deref(),
            running: &running_config,
        },
    );
    settings.auth = auth;
    let relay = crate::relay_store::start(&store, settings.limits.session_lifetime).await;
    let (relay, relay_pump) = match relay {
        Some((relay, pump)) => (Some(relay), Some(pump)),
        None => (None, None),
    };
    settings.relay = relay;
    let dashboard_on = settings.operator_ui.is_some();
    let server = Server::bind(settings, gateway.clone())
        .await
        .map_err(|e| match e {
            // The error names the address and the OS's reason already.
            manifold_server::ServerError::Bind { .. } => CliError::with_hint(
                e.to_string(),
                "is another process using that port? pass --listen 127.0.0.1:PORT",
            ),
            other => CliError::usage(format!("could not start serving on {listen}: {other}")),
        })?;
    let cgroup = child_cgroup::announce(containment);
    let url = format!("http://{}/mcp", server.local_addr());
    announce(&url, &config, source.as_deref());
    if let Some(admin) = server.admin_addr() {
        eprintln!("Operator endpoints (/metrics, /healthz, /readyz) are at http://{admin}");
    }
    if dashboard_on {
        let at = server.admin_addr().unwrap_or(server.local_addr());
        eprintln!("The dashboard is at http://{at}/ui/");
        // Held calls name their page and URL-mode clients open it: only an address a browser
        // can open (not 0.0.0.0) is worth naming.
        if !at.ip().is_unspecified() {
            gateway
                .settings()
                .approvals
                .set_pages(format!("http://{at}/ui/approvals"));
        }
    }
    // stdout gets the URL alone, so scripts can read it.
    println!("{url}");
    crate::process_memory::release_startup_code_now_and_once_settled();
    let running = lifecycle::Running {
        gateway,
        server,
        started: config.clone(),
        config,
        source,
        cgroup,
        stored,
        running_config,
    };
    let outcome = lifecycle::run(running, signals).await;
    if let Some(trail) = trail {
        trail.stop().await;
    }
    if let Some(pump) = relay_pump {
        pump.stop().await;
    }
    crate::key_store::close(store).await;
    outcome
}

/// What the dashboard reads, from `serve`'s start.
struct DashboardParts<'a> {
    gateway: &'a Gateway,
    store: &'a std::sync::Arc<manifold_store::Store>,
    stored: &'a Stored,
    source: Option<&'a Path>,
    running: &'a crate::dashboard::RunningConfig,
}

/// The dashboard's routes, unless `[dashboard] enabled = false`, or authentication is off on an
/// address other machines reach (`--insecure-no-auth`): pages that change keys and configuration
/// are never open to a network.
fn dashboard_for(
    config: &Config,
    settings: &ServerSettings,
    auth: Option<std::sync::Arc<manifold_auth::Authenticator>>,
    parts: DashboardParts<'_>,
) -> Option<manifold_server::OperatorUi> {
    if !config.dashboard.enabled {
        return None;
    }
    let at = settings.admin_listen.unwrap_or(settings.listen);
    if auth.is_none() && !at.ip().is_loopback() {
        tracing::warn!(
            "the dashboard is not served: authentication is off and {at} is reachable from other machines; turn authentication on ([auth]) to use it there"
        );
        return None;
    }
    let state = crate::dashboard::DashboardState {
        gateway: parts.gateway.clone(),
        store: std::sync::Arc::clone(parts.store),
        keys: crate::key_store::api_keys(parts.store),
        auth,
        config_path: parts.source.map(Path::to_path_buf),
        running: parts.running.clone(),
        authored: std::sync::Arc::clone(&parts.stored.authored),
        signins: crate::dashboard::SignIns::new(std::sync::Arc::clone(parts.store)),
        secure_cookies: !at.ip().is_loopback(),
    };
    Some(manifold_server::OperatorUi(crate::dashboard::router(
        std::sync::Arc::new(state),
    )))
}

/// `manifold stdio [--config FILE] [--toolset NAME]`.
pub async fn stdio(given: Option<&Path>, toolset: Option<&str>) -> Result<Outcome, CliError> {
    let (config, _) = load(given)?;
    if let Some(name) = toolset
        && !config.toolsets.iter().any(|t| t.name == name)
    {
        let sets: Vec<&str> = config.toolsets.iter().map(|t| t.name.as_str()).collect();
        return Err(CliError::with_hint(
            format!("there is no tool set {name:?} in {}", config.origin),
            if sets.is_empty() {
                "define one as [toolsets.NAME] (docs/configuration.md, \"Tool sets\")".to_owned()
            } else {
                format!("the sets are {}", sets.join(", "))
            },
        ));
    }
    // No process lock: several `stdio` processes (one per client) and a `serve` share a data_dir.
    let store = crate::key_store::open_for_command(&config).await?;
    let fresh = crate::telemetry_setup::fresh_telemetry(&config);
    let (telemetry, trail) = crate::audit_trail::start(&config, &store, fresh);
    // The client is answered while the upstreams start (`FirstStart`); a collision among their
    // names still stops this process, as it stops `serve`, once they have.
    let gateway = start_core(&config, &Stored::open(&config, &store).await?, telemetry);
    let operators = match stdio_operators(&config, &gateway).await {
        Ok(o) => o,
        Err(e) => {
            gateway.shutdown().await;
            return Err(e);
        }
    };
    crate::process_memory::release_startup_code_now_and_once_settled();
    let serving = manifold_server::serve_stdio_in(
        gateway.clone(),
        toolset.map(std::sync::Arc::from),
        FirstStart::new(GREETING_WAIT, STARTUP_WAIT),
        tokio::io::stdin(),
        tokio::io::stdout(),
    );
    let collision = async {
        match collision_once_started(&gateway).await {
            Some(c) => c,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        served = serving => served
            .map(|()| Outcome::Success)
            .map_err(|e| CliError::usage(format!("the stdio connection failed: {e}"))),
        c = collision => Err(CliError::usage(format!("refusing to go on: {c}"))),
    };
    if let Some(o) = operators {
        o.shutdown();
    }
    gateway.shutdown().await;
    if let Some(trail) = trail {
        trail.stop().await;
    }
    outcome
}

/// `/metrics`, `/healthz` and `/readyz` on `telemetry.admin_listen` beside `manifold stdio`: the
/// protocol keeps stdout, operators get HTTP. No session key is involved (no MCP is served
/// there), so none is read or created.
async fn stdio_operators(
    config: &Config,
    gateway: &Gateway,
) -> Result<Option<manifold_server::OperatorServer>, CliError> {
    let Some(admin) = config.telemetry.admin_listen else {
        return Ok(None);
    };
    let key = SessionKey::generate()
        .map_err(|e| CliError::usage(format!("could not make a session key: {e}")))?;
    let mut settings = ServerSettings::new(key);
    settings.metrics_endpoint = config.telemetry.metrics;
    settings.admin_listen = Some(admin);
    manifold_server::Server::bind_operators(settings, gateway.clone())
        .await
        .map_err(|e| {
            CliError::with_hint(
                format!(
                    "could not serve the operator endpoints on telemetry.admin_listen {admin}: {e}"
                ),
                "pick a free address for telemetry.admin_listen, or remove it",
            )
        })
}
