//! Logs, trace export and the call-log policy, set up once per process.
//!
//! The `tracing` subscriber must exist before anything logs, which is before the async runtime
//! starts and before `serve` loads its configuration; but whether spans are exported, and whether
//! call lines are logged by default, is configuration (`[telemetry]`). So for `serve` and `stdio`
//! the configuration's `[telemetry]` section is read here first (a configuration that does not
//! load is reported by the command itself, which loads it again). The exporter flushes when the
//! returned guard is dropped, after the runtime has stopped.

use std::sync::Arc;

use manifold_config::{Config, TelemetrySettings};
use manifold_telemetry::otlp::{OtlpSettings, TraceExport};
use manifold_telemetry::redact::Redactor;
use manifold_telemetry::{CallLogPolicy, Telemetry};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::args::{Cli, Command, LogFormat};

/// Keeps trace export running; dropping it flushes buffered spans.
pub struct TelemetryGuard {
    _export: Option<TraceExport>,
}

/// The `[telemetry]` section of the configuration a gateway command will run with; `None` for
/// the client commands, which run no gateway.
fn gateway_telemetry(command: &Command) -> Option<TelemetrySettings> {
    let given = match command {
        Command::Serve { config, .. } | Command::Stdio { config, .. } => config.as_deref(),
        _ => return None,
    };
    let loaded = crate::config_file::config_path(given)
        .and_then(|path| Config::load(&path).ok())
        .map(|c| c.telemetry);
    Some(loaded.unwrap_or_default())
}

/// The log filter: `RUST_LOG` when set, else by `-v`, plus call lines for a gateway whose
/// configuration keeps them (`call_log = true`, the default).
fn log_filter(verbose: u8, telemetry: Option<&TelemetrySettings>) -> EnvFilter {
    if let Ok(from_env) = EnvFilter::try_from_default_env() {
        return from_env;
    }
    let base = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let call_lines = telemetry.is_some_and(|t| t.call_log);
    if call_lines && verbose == 0 {
        EnvFilter::new(format!(
            "{base},{}=info",
            manifold_telemetry::call_log::CALL_TARGET
        ))
    } else {
        EnvFilter::new(base)
    }
}

/// Installs the subscriber (human or JSON lines on stderr, and the OTLP layer when configured).
pub fn start(cli: &Cli) -> TelemetryGuard {
    let telemetry = gateway_telemetry(&cli.command);
    let filter = log_filter(cli.verbose, telemetry.as_ref());
    let logs: Box<dyn Layer<Registry> + Send + Sync> = match cli.log_format {
        LogFormat::Human => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
    };
    let mut failure = None;
    let export = telemetry
        .as_ref()
        .and_then(|t| t.otlp_endpoint.as_ref().map(|e| (e, &t.service_name)))
        .and_then(|(endpoint, service_name)| {
            let settings = OtlpSettings {
                endpoint: endpoint.clone(),
                service_name: service_name.clone(),
            };
            TraceExport::start(&settings)
                .map_err(|e| failure = Some(e))
                .ok()
        });
    let mut layers = vec![logs];
    if let Some(export) = &export {
        layers.push(export.layer::<Registry>().boxed());
    }
    tracing_subscriber::registry().with(layers).init();
    if let Some(e) = failure {
        tracing::error!(error = %e, "traces are not exported; fix telemetry.otlp_endpoint");
    }
    if let Some(export) = &export {
        tracing::info!(url = export.url(), "exporting traces over OTLP/HTTP");
    }
    TelemetryGuard { _export: export }
}

/// What the gateway records into, per the configuration: a fresh registry, and call lines that
/// hide argument values (unless configured otherwise) and every configured secret.
pub fn telemetry(config: &Config) -> Arc<Telemetry> {
    Arc::new(fresh_telemetry(config))
}

/// [`telemetry`] before it is shared, for `serve` to add the audit trail's sink to.
pub fn fresh_telemetry(config: &Config) -> Telemetry {
    let redactor = Redactor::new(config.secrets().iter().map(|s| s.expose().clone()));
    Telemetry::new(CallLogPolicy {
        arguments: config.telemetry.log_arguments,
        redactor,
    })
}
