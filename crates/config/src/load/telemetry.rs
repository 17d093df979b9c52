//! Reads the `[telemetry]` section: whether `/metrics` is served and where, OTLP trace export,
//! and what per-call log lines contain.
//!
//! Its own section (not keys of `[gateway]`) because operators set it per deployment while
//! `[gateway]` describes the endpoint clients see.

use std::net::SocketAddr;

use manifold_telemetry::ArgumentLogging;
use manifold_telemetry::otlp::{DEFAULT_SERVICE_NAME, traces_url};
use toml::de::DeTable;

use super::reader::{Item, Reader, Show, key_path};

pub(crate) const TELEMETRY_KEYS: &[&str] = &[
    "metrics",
    "admin_listen",
    "otlp_endpoint",
    "service_name",
    "call_log",
    "log_arguments",
];

const TELEMETRY_HINTS: &[(&str, &str)] = &[
    (
        "otlp_protocol",
        "only OTLP over HTTP with protobuf bodies is spoken; write otlp_endpoint = \"http://HOST:4318\"",
    ),
    ("endpoint", "write otlp_endpoint = \"http://HOST:4318\""),
    ("metrics_listen", "write admin_listen = \"127.0.0.1:PORT\""),
    (
        "log_format",
        "the log format is chosen on the command line: --log-format json",
    ),
];

/// Longest `service_name` accepted.
pub const MAX_SERVICE_NAME_LEN: usize = 255;

/// The `[telemetry]` section, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// Serve `/metrics` (Prometheus).
    pub metrics: bool,
    /// A listener of its own for `/metrics`, `/healthz` and `/readyz`; `/metrics` then is served
    /// only there.
    pub admin_listen: Option<SocketAddr>,
    /// Where OTLP/HTTP traces go (base URL, or the full `/v1/traces` URL); `None`: no export.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of exported spans.
    pub service_name: String,
    /// One log line per tool call at the default verbosity.
    pub call_log: bool,
    /// How much of a call's arguments its log line shows.
    pub log_arguments: ArgumentLogging,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        TelemetrySettings {
            metrics: true,
            admin_listen: None,
            otlp_endpoint: None,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            call_log: true,
            log_arguments: ArgumentLogging::Redacted,
        }
    }
}

/// Reads `[telemetry]` (absent: every default).
pub(crate) fn read_telemetry(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
) -> TelemetrySettings {
    let mut settings = TelemetrySettings::default();
    let empty = DeTable::new();
    let table = match section {
        Some(item) => reader
            .table("telemetry", item, "write a [telemetry] section")
            .unwrap_or(&empty),
        None => &empty,
    };
    reader.check_keys("telemetry", table, TELEMETRY_KEYS, TELEMETRY_HINTS);
    let field = |key: &str| key_path("telemetry", key);

    if let Some(b) = table
        .get("metrics")
        .and_then(|item| reader.boolean(&field("metrics"), item))
    {
        settings.metrics = b;
    }
    if let Some(b) = table
        .get("call_log")
        .and_then(|item| reader.boolean(&field("call_log"), item))
    {
        settings.call_log = b;
    }
    if let Some(item) = table.get("admin_listen") {
        let f = field("admin_listen");
        let example = "write e.g. \"127.0.0.1:9464\"";
        if let Some(text) = reader.string(&f, item, Show::Value, example) {
            match text.value.trim().parse::<SocketAddr>() {
                Ok(addr) => settings.admin_listen = Some(addr),
                Err(_) => reader.report_text(&f, &text, "is not an IP address and port", example),
            }
        }
    }
    if let Some(item) = table.get("otlp_endpoint") {
        let f = field("otlp_endpoint");
        let example = "write the collector's OTLP/HTTP URL, e.g. \"http://127.0.0.1:4318\"";
        if let Some(text) = reader.string(&f, item, Show::Value, example) {
            match traces_url(&text.value) {
                Ok(_) => settings.otlp_endpoint = Some(text.value.trim().to_owned()),
                Err(e) => {
                    let problem = match e {
                        manifold_telemetry::otlp::OtlpError::Endpoint { reason, .. } => {
                            format!("is not an http:// or https:// URL ({reason})")
                        }
                        other => other.to_string(),
                    };
                    reader.report_text(&f, &text, problem, example);
                }
            }
        }
    }
    if let Some(item) = table.get("service_name") {
        let f = field("service_name");
        let example = "write e.g. \"manifold\" or \"manifold-eu-1\"";
        if let Some(text) = reader.string(&f, item, Show::Value, example) {
            let name = text.value.trim();
            if name.is_empty()
                || name.len() > MAX_SERVICE_NAME_LEN
                || name.chars().any(char::is_control)
            {
                reader.report_text(
                    &f,
                    &text,
                    format!("must be 1 to {MAX_SERVICE_NAME_LEN} printable characters"),
                    example,
                );
            } else {
                settings.service_name = name.to_owned();
            }
        }
    }
    if let Some(choice) = table.get("log_arguments").and_then(|item| {
        reader.choice(
            &field("log_arguments"),
            item,
            &[
                ("redacted", ArgumentLogging::Redacted),
                ("none", ArgumentLogging::None),
                ("full", ArgumentLogging::Full),
            ],
        )
    }) {
        settings.log_arguments = choice;
    }
    settings
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Config, FixedEnvironment};

    fn env() -> FixedEnvironment {
        FixedEnvironment::new().with_var("HOME", "/home/t")
    }

    fn load(text: &str) -> Result<Config, crate::ConfigErrors> {
        Config::from_str_with(text, "m.toml", None, &env())
    }

    #[test]
    fn absent_means_metrics_on_no_export_and_redacted_arguments() {
        let c = load("").unwrap();
        assert_eq!(c.telemetry, TelemetrySettings::default());
        assert!(c.telemetry.metrics && c.telemetry.call_log);
        assert_eq!(c.telemetry.log_arguments, ArgumentLogging::Redacted);
        assert_eq!(c.telemetry.service_name, "manifold");
    }

    #[test]
    fn every_key_is_read() {
        let c = load(
            "[telemetry]\nmetrics = false\nadmin_listen = \"127.0.0.1:9464\"\notlp_endpoint = \"http://127.0.0.1:4318\"\nservice_name = \"mf-eu\"\ncall_log = false\nlog_arguments = \"none\"\n",
        )
        .unwrap();
        assert_eq!(
            c.telemetry,
            TelemetrySettings {
                metrics: false,
                admin_listen: Some("127.0.0.1:9464".parse().unwrap()),
                otlp_endpoint: Some("http://127.0.0.1:4318".to_owned()),
                service_name: "mf-eu".to_owned(),
                call_log: false,
                log_arguments: ArgumentLogging::None,
            }
        );
    }

    #[test]
    fn bad_values_are_reported_at_their_position() {
        let text = "[telemetry]\notlp_endpoint = \"grpc://collector:4317\"\nadmin_listen = \"9464\"\nlog_arguments = \"redact\"\nmetrics = \"yes\"\nservice_name = \"\"\n";
        let errors = load(text).unwrap_err().to_string();
        assert_eq!(
            errors,
            [
                r#"m.toml:2:17: error: telemetry.otlp_endpoint = "grpc://collector:4317": is not an http:// or https:// URL (the scheme "grpc" is not http or https); write the collector's OTLP/HTTP URL, e.g. "http://127.0.0.1:4318""#,
                r#"m.toml:3:16: error: telemetry.admin_listen = "9464": is not an IP address and port; write e.g. "127.0.0.1:9464""#,
                r#"m.toml:4:17: error: telemetry.log_arguments = "redact": is not one of redacted, none, full; did you mean "redacted"?"#,
                r#"m.toml:5:11: error: telemetry.metrics = "yes": is a string, but must be a boolean; write true or false"#,
                r#"m.toml:6:16: error: telemetry.service_name = "": must be 1 to 255 printable characters; write e.g. "manifold" or "manifold-eu-1""#,
                "5 problems in m.toml; nothing was loaded",
            ]
            .join("\n")
        );
    }

    #[test]
    fn unknown_keys_get_a_hint() {
        let errors = load("[telemetry]\nendpoint = \"http://x:4318\"\n")
            .unwrap_err()
            .to_string();
        assert!(errors.contains("telemetry.endpoint"), "{errors}");
        assert!(errors.contains("otlp_endpoint"), "{errors}");
    }
}
