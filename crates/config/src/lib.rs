//! manifold-config: Manifold's configuration file.
//!
//! Loads the TOML file, validates every field (collecting every problem with its file, line,
//! column and field path), resolves `${ENV}` and `${file:PATH}` references into [`Secret`]s, and
//! turns each server into the upstream crate's connection types. Also converts MCP clients' JSON
//! configurations into Manifold TOML ([`import`]) and summarises a configuration for
//! `manifold check` ([`check_report`]). The only I/O is in [`environment`].
//!
//! What a component uses, the component owns: the file's sections are read straight into those
//! components' own types (the gateway's rules, rate limits, tool sets, tool filters, overrides,
//! naming and discovery; the server's allowlists; auth's settings; telemetry's audit mode), so
//! this crate stands just under the binary and no component depends on it.

pub mod check;
pub mod config;
mod did_you_mean;
pub mod duration;
pub mod environment;
pub mod error;
pub mod import;
mod interpolate;
mod load;
pub mod names;
mod paths;
pub mod secret;
pub mod server;
pub mod settings;
mod toml_text;

pub use check::{check, check_report};
pub use config::Config;
pub use environment::{Environment, FixedEnvironment, ProcessEnvironment};
pub use error::{ConfigError, ConfigErrors, ImportError};
pub use import::import;
pub use import::registry::{
    import_entry as import_registry_entry, server_of as registry_server_of,
};
pub use load::approvals::{
    ApprovalSettings, DEFAULT_APPROVAL_PROGRESS_WINDOW, DEFAULT_APPROVAL_WINDOW,
    MAX_APPROVAL_WINDOW, MIN_APPROVAL_WINDOW,
};
pub use load::audit::{
    AuditMode, AuditSettings, DEFAULT_AUDIT_RETENTION, MAX_AUDIT_RETENTION, MIN_AUDIT_RETENTION,
};
pub use load::authoring::AuthoringSettings;
pub use load::dashboard::DashboardSettings;
pub use load::lifecycle::{DEFAULT_DRAIN_TIMEOUT, DEFAULT_SESSION_IDLE_TTL, LifecycleSettings};
pub use load::overrides::{OVERRIDE_ANNOTATIONS, Overrides};
pub use load::retry_policy::{RetrySettings, ServerRetry};
pub use load::store::StoreSettings;
pub use load::telemetry::TelemetrySettings;
pub use load::tools::{ConfiguredTool, MAX_CODE_FILE_BYTES};
pub use manifold_auth::{AuthSettings, OAuthSettings};
pub use manifold_server::allowlist::{HostAllowlist, HostPattern, OriginPattern, PatternError};
pub use secret::Secret;
pub use server::{Interpolated, OnChange, Scope, ServerConfig, ServerKind, Startup, ToolFilter};
pub use settings::{Discovery, GatewaySection, NamingMode, SessionKey};
