//! The whole configuration: the typed, resolved result the rest of Manifold works from. The
//! entry points that read it (`Config::load`, `Config::from_str`) are in `load/`.

use crate::secret::Secret;
use crate::server::ServerConfig;
use crate::settings::GatewaySection;

/// A loaded, validated, resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from (the path as given, or the name given to [`Config::from_str`]).
    pub origin: String,
    pub gateway: GatewaySection,
    /// Every server, enabled or not, ordered by name (ignoring case).
    pub servers: Vec<ServerConfig>,
    /// The `[[rules]]`: who may see and call what, tried in file order, as the gateway's own
    /// specs (its `Policy` compiles them).
    pub rules: Vec<manifold_gateway::policy::RuleSpec>,
    /// The `[rate_limits]` section, as the gateway's own spec (its `RateLimits` compiles it).
    pub rate_limits: manifold_gateway::rate_limit::RateLimitSpec,
    /// The `[auth]` section: who may use the HTTP endpoint.
    pub auth: manifold_auth::AuthSettings,
    /// Drain time, session idle expiry and idle shutdown of lazy servers.
    pub lifecycle: crate::load::lifecycle::LifecycleSettings,
    /// The `[telemetry]` section: metrics, traces and call log lines.
    pub telemetry: crate::load::telemetry::TelemetrySettings,
    /// Per server: how many times idempotent tool calls are retried, and which tools count as
    /// idempotent beyond their `idempotentHint`.
    pub retries: crate::load::retry_policy::RetrySettings,
    /// Per server and upstream tool: the exposed name, title, description and annotations shown
    /// instead of the upstream's (`[servers.NAME.overrides.TOOL]`).
    pub overrides: crate::load::overrides::Overrides,
    /// The `[store]` section: SQLite in `data_dir` (default) or a PostgreSQL URL.
    pub store: crate::load::store::StoreSettings,
    /// The `[audit]` section: the audit trail in the store (on, best effort, by default).
    pub audit: crate::load::audit::AuditSettings,
    /// The `[approvals]` section: how long calls an ask rule holds wait, and the webhook.
    pub approvals: crate::load::approvals::ApprovalSettings,
    /// The `[authoring]` section: whether clients may author tools at run time.
    pub authoring: crate::load::authoring::AuthoringSettings,
    /// The `[dashboard]` section: whether the operators' pages are served at `/ui`.
    pub dashboard: crate::load::dashboard::DashboardSettings,
    /// The `[metaforge]` section: whether the MetaForge dialect is answered at `/rpc`.
    pub metaforge: crate::load::metaforge::MetaforgeSettings,
    /// `[servers.NAME] cache_ttl`: how long each server's read-only, idempotent answers are kept.
    pub result_cache: crate::load::result_cache::ResultCacheSettings,
    /// The `[rest]` section: whether the tools are served as a REST API at `/rest`.
    pub rest: crate::load::rest::RestSettings,
    /// `[tools.NAME]`: authored tools kept in the file, as `manifold_create_tool` arguments.
    pub tools: Vec<crate::load::tools::ConfiguredTool>,
    /// `[toolsets.NAME]`: the sets served at `/mcp/NAME`, as the gateway's own specs (compiled
    /// beside the rules).
    pub toolsets: Vec<manifold_gateway::policy::ToolsetSpec>,
    secrets: Vec<Secret>,
}

impl Config {
    pub(crate) fn assemble(
        origin: &str,
        gateway: GatewaySection,
        servers: Vec<ServerConfig>,
        secrets: Vec<Secret>,
    ) -> Config {
        Config {
            origin: origin.to_owned(),
            gateway,
            servers,
            rules: Vec::new(),
            rate_limits: manifold_gateway::rate_limit::RateLimitSpec::default(),
            auth: manifold_auth::AuthSettings::default(),
            lifecycle: crate::load::lifecycle::LifecycleSettings::default(),
            telemetry: crate::load::telemetry::TelemetrySettings::default(),
            retries: crate::load::retry_policy::RetrySettings::default(),
            overrides: crate::load::overrides::Overrides::default(),
            store: crate::load::store::StoreSettings::default(),
            audit: crate::load::audit::AuditSettings::default(),
            approvals: crate::load::approvals::ApprovalSettings::default(),
            authoring: crate::load::authoring::AuthoringSettings::default(),
            dashboard: crate::load::dashboard::DashboardSettings::default(),
            metaforge: crate::load::metaforge::MetaforgeSettings::default(),
            rest: crate::load::rest::RestSettings::default(),
            result_cache: crate::load::result_cache::ResultCacheSettings::default(),
            tools: Vec::new(),
            toolsets: Vec::new(),
            secrets,
        }
    }

    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }

    pub fn enabled_servers(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.iter().filter(|s| s.enabled)
    }

    /// Every value that came from `${...}` interpolation, for scrubbing them out of anything
    /// written to logs (a child's stderr may echo its environment).
    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }
}
