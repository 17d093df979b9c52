//! From a loaded configuration to a running gateway's settings and upstream definitions.
//!
//! The configuration already holds the gateway's own types (rules, limits, tool sets, tool
//! filters, overrides, naming, discovery), so nothing is translated field by field here: this
//! file adds what only the binary has (the store's tokens, pins, approvals and authored tools,
//! telemetry) and compiles the access specs (`access.rs`).

pub(crate) mod access;

use std::sync::Arc;

use manifold_config::Config;
use manifold_gateway::approval::Approvals;
use manifold_gateway::{GatewaySettings, UpstreamDefinition};
use manifold_store::Store;
use manifold_upstream::auth::TokenStore;

use crate::report::CliError;

/// What the gateway keeps in Manifold's store besides API keys: opened once at start (importing
/// the files earlier versions kept in `data_dir`), and kept for every reload.
#[derive(Clone)]
pub struct Stored {
    /// Upstream OAuth tokens, sealed at rest.
    pub tokens: Arc<dyn TokenStore>,
    /// Tool definition pins, with each server's `on_change` policy.
    pub pins: Arc<manifold_gateway::pins::Pins>,
    /// The approval stage, its ledger in the store (shared with `manifold approvals`).
    pub approvals: Arc<Approvals>,
    /// Tools authored at run time (`manifold_create_tool`), their versions in the store.
    pub authored: Arc<manifold_authored::AuthoredTools>,
    /// Rate-limit buckets shared with other replicas (a PostgreSQL store only).
    pub shared_buckets: Option<Arc<dyn manifold_gateway::shared_limits::SharedBuckets>>,
}

impl Stored {
    /// The gateway's state in `store`, for `config`.
    pub async fn open(config: &Config, store: &Arc<Store>) -> Result<Stored, CliError> {
        let tokens: Arc<dyn TokenStore> = crate::token_store::open(config, store).await?;
        let pins = crate::pin_store::open(config, store).await?;
        let approvals = Arc::new(approvals(config, store));
        approvals.recover().await;
        let authored = authored_tools(config, store).await?;
        Ok(Stored {
            tokens,
            pins,
            approvals,
            authored,
            shared_buckets: crate::rate_limit_store::shared_buckets(store),
        })
    }
}

/// The authored tools in `store`, kept in step with it (another replica's changes arrive within
/// a second), run by the sandbox launcher beside this binary under `data_dir/authored`.
async fn authored_tools(
    config: &Config,
    store: &Arc<Store>,
) -> Result<Arc<manifold_authored::AuthoredTools>, CliError> {
    let registry = manifold_authored::Registry::open(Arc::clone(store))
        .await
        .map_err(|e| {
            CliError::with_hint(
                format!("cannot read the authored tools: {e}"),
                "check the store (`manifold doctor`)",
            )
        })?;
    tokio::spawn(manifold_authored::Registry::keep_fresh(Arc::downgrade(
        &registry,
    )));
    // Without the launcher every call says so; the tools can still be authored.
    let launcher = manifold_sandbox::default_launcher()
        .unwrap_or_else(|_| std::path::PathBuf::from(manifold_sandbox::command::LAUNCHER_NAME));
    let runner = manifold_authored::Runner::new(launcher, config.gateway.data_dir.join("authored"));
    let authored = Arc::new(manifold_authored::AuthoredTools::new(registry, runner));
    authored.configure(configured_tools(config).map_err(|e| {
        CliError::with_hint(
            e,
            "fix the [tools.NAME] section (`manifold check` shows the file's other problems)",
        )
    })?);
    Ok(authored)
}

/// The `[tools.NAME]` sections as definitions, each checked as `manifold_create_tool` checks one;
/// the first problem names its section and field.
pub fn configured_tools(config: &Config) -> Result<Vec<manifold_authored::ToolDefinition>, String> {
    config
        .tools
        .iter()
        .map(|tool| {
            manifold_authored::ToolDefinition::from_arguments(&tool.arguments, None)
                .map_err(|e| format!("[tools.{}] {e}", tool.name))
        })
        .collect()
}

/// The approval stage for `config`, its ledger in `store`. `requestState`s are sealed under a key
/// derived from `[gateway] session_key` when one is set, so replicas sharing it accept each
/// other's retries; otherwise under a key of this process.
fn approvals(config: &Config, store: &Arc<Store>) -> Approvals {
    let ledger = Arc::new(crate::approval_store::StoreApprovals::new(Arc::clone(
        store,
    )));
    let a = &config.approvals;
    let mut approvals = Approvals::new(ledger, a.window, a.progress_window);
    if let Some(key) = &config.gateway.session_key {
        // A key of its own, so a requestState never doubles as anything the session key seals.
        approvals = approvals.with_key(key.derive(b"manifold approval requestState\0"));
    }
    if let Some(url) = &a.webhook {
        approvals = approvals.with_announcer(Arc::new(
            crate::approval_webhook::WebhookAnnouncer::new(url),
        ));
    }
    approvals
}

/// What upstreams may learn of a client's capabilities unless told otherwise: everything
/// Manifold can carry back to the client. A shared legacy connection declares exactly this at
/// `initialize`, so both elicitation modes are named (Manifold refuses, per client, a mode the
/// client did not declare); to a modern upstream only the top-level names filter what the client
/// itself declared.
pub const FORWARDED_CAPABILITIES: &str =
    r#"{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{},"extensions":{}}"#;

/// The core's settings for a configuration.
pub fn gateway_settings(config: &Config, stored: &Stored) -> GatewaySettings {
    let g = &config.gateway;
    let (rules, rate_limits) = access::access_settings(config);
    GatewaySettings {
        naming: g.naming_rules(),
        pins: Some(Arc::clone(&stored.pins)),
        approvals: Arc::clone(&stored.approvals),
        hosted: config.authoring.enabled.then(|| {
            Arc::clone(&stored.authored) as Arc<dyn manifold_gateway::hosted::HostedTools>
        }),
        discovery: g.discovery,
        rules,
        rate_limits,
        shared_buckets: stored.shared_buckets.clone(),
        telemetry: crate::telemetry_setup::telemetry(config),
        ..GatewaySettings::default()
    }
}

/// One definition per enabled server, in configuration order.
pub fn upstream_definitions(config: &Config, stored: &Stored) -> Vec<UpstreamDefinition> {
    config
        .enabled_servers()
        .map(|s| {
            // OAuth servers keep their tokens (from `manifold login`, refreshed) in the store.
            let target = s.target().with_token_store(&stored.tokens, &s.name);
            let mut def = UpstreamDefinition::new(s.name.clone(), target);
            def.prefix = s.prefix.clone();
            def.era = s.era;
            def.timeout = s.timeout;
            def.max_timeout = Some(s.max_timeout);
            def.client_capabilities = FORWARDED_CAPABILITIES.to_owned();
            def.tool_overrides = Arc::new(config.overrides.of(&s.name));
            def.tools_allowed = s.tools.clone();
            let retry = config.retries.of(&s.name);
            def.max_retries = retry.retries;
            def.idempotent_tools = retry.idempotent_tools;
            def.lazy = s.startup == manifold_config::Startup::Lazy;
            def.idle_shutdown = config.lifecycle.idle_shutdown_of(&s.name);
            def.result_cache_ttl = config.result_cache.ttl_of(&s.name);
            // Only a stdio server has a scope; every other one is shared.
            def.scope = s.scope().unwrap_or_default();
            def
        })
        .collect()
}
