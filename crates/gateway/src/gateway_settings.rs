//! What a gateway is started with, whole: naming, discovery mode, rules and limits, pins,
//! telemetry, approvals, hosted tools and shared buckets. Each part of the gateway reads the
//! fields it owns.

use std::sync::Arc;

use crate::catalog::naming::NamingRules;

/// Whether clients see every tool or only the search tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Discovery {
    #[default]
    Full,
    /// Only the built-in tools: for clients with tool-count caps or a small context.
    Search,
}

/// Gateway-wide settings.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    pub naming: NamingRules,
    pub discovery: Discovery,
    /// What `initialize` / `server/discover` say about Manifold.
    pub instructions: Option<String>,
    /// Largest tool result forwarded whole; larger ones are truncated with a note.
    pub result_max_bytes: usize,
    /// Who may see and call what (`policy.rs`); empty: everyone everything.
    pub rules: crate::policy::Policy,
    /// How often each identity may ask (`rate_limit.rs`); empty: no limits.
    pub rate_limits: crate::rate_limit::RateLimits,
    /// Tool definition pins (`pins.rs`); `None`: definitions are not pinned.
    pub pins: Option<Arc<crate::pins::Pins>>,
    /// Metrics and call log lines (`call_record.rs`); the default is a fresh registry.
    pub telemetry: Arc<manifold_telemetry::Telemetry>,
    /// The approval stage for calls an ask rule holds (`approval/`): its ledger and windows.
    pub approvals: Arc<crate::approval::Approvals>,
    /// Tools Manifold hosts beside the servers' (`hosted.rs`): authored at run time.
    pub hosted: Option<Arc<dyn crate::hosted::HostedTools>>,
    /// Where replicas share their rate-limit buckets (`shared_limits.rs`); `None`: this
    /// process counts alone.
    pub shared_buckets: Option<Arc<dyn crate::shared_limits::SharedBuckets>>,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        GatewaySettings {
            naming: NamingRules::default(),
            discovery: Discovery::Full,
            instructions: None,
            result_max_bytes: crate::truncate::DEFAULT_MAX_RESULT_BYTES,
            rules: crate::policy::Policy::default(),
            rate_limits: crate::rate_limit::RateLimits::default(),
            pins: None,
            telemetry: Arc::default(),
            approvals: Arc::default(),
            hosted: None,
            shared_buckets: None,
        }
    }
}
