//! From a loaded configuration to the gateway core's own types.
//!
//! The core takes plain definitions and settings, not the configuration file's types, so that it
//! can be driven by tests and by other front ends; this is the one place that translates.

use std::sync::Arc;

use manifold_config::{Config, ServerKind};
use manifold_gateway::catalog::naming::{NamingMode, NamingRules};
use manifold_gateway::{Discovery, GatewaySettings, Scope, UpstreamDefinition};

/// What upstreams may learn of a client's capabilities unless told otherwise: everything
/// Manifold can carry back to the client.
pub const FORWARDED_CAPABILITIES: &str =
    r#"{"elicitation":{},"sampling":{},"roots":{},"extensions":{}}"#;

/// The core's settings for a configuration.
pub fn gateway_settings(config: &Config) -> GatewaySettings {
    let g = &config.gateway;
    GatewaySettings {
        naming: NamingRules {
            mode: match g.naming {
                manifold_config::settings::NamingMode::Always => NamingMode::Always,
                manifold_config::settings::NamingMode::Never => NamingMode::Never,
                manifold_config::settings::NamingMode::Conditional => NamingMode::Conditional,
            },
            max_len: g.name_max_len,
            strict_charset: g.strict_names,
        },
        discovery: match g.discovery {
            manifold_config::settings::Discovery::Full => Discovery::Full,
            manifold_config::settings::Discovery::Search => Discovery::Search,
        },
        ..GatewaySettings::default()
    }
}

/// One definition per enabled server, in configuration order.
pub fn upstream_definitions(config: &Config) -> Vec<UpstreamDefinition> {
    config
        .enabled_servers()
        .map(|s| {
            let mut def = UpstreamDefinition::new(s.name.clone(), s.target());
            def.prefix = s.prefix.clone();
            def.era = s.era;
            def.timeout = s.timeout;
            def.max_timeout = Some(s.max_timeout);
            def.client_capabilities = FORWARDED_CAPABILITIES.to_owned();
            let tools = s.tools.clone();
            def.tools_allowed = Arc::new(move |name| tools.allows(name));
            def.lazy = s.startup == manifold_config::Startup::Lazy;
            def.scope = match &s.kind {
                ServerKind::Stdio {
                    scope: manifold_config::server::Scope::Session,
                    ..
                } => Scope::Session,
                _ => Scope::Shared,
            };
            def
        })
        .collect()
}
