//! Reads the `[audit]` section: whether every call is written to the audit trail in the store,
//! what happens to calls while rows cannot be written, whether arguments are kept, and for how
//! long rows are kept.
//!
//! Its own section because it is a promise to auditors (what is on the record and what a call
//! costs when the record cannot be kept), not a setting of the endpoint or of the logs.

use std::time::Duration;

use toml::de::DeTable;

use super::reader::{Item, Reader, Show, key_path};
use crate::duration::{DurationError, parse_duration_up_to};

pub use manifold_telemetry::audit::AuditMode;

pub(crate) const AUDIT_KEYS: &[&str] = &["enabled", "mode", "record_arguments", "retain"];

const AUDIT_HINTS: &[(&str, &str)] = &[
    (
        "retention",
        "write retain = \"90d\" (how long rows are kept)",
    ),
    (
        "log_arguments",
        "the trail keeps argument digests; write record_arguments = true to keep the arguments too",
    ),
    (
        "required",
        "write mode = \"required\" (refuse calls while rows cannot be written) or mode = \"best_effort\"",
    ),
];

/// How long rows are kept when `retain` is not set.
pub const DEFAULT_AUDIT_RETENTION: Duration = Duration::from_secs(90 * 86_400);
/// The shortest `retain` accepted: pruning more often than hourly would fight the writer.
pub const MIN_AUDIT_RETENTION: Duration = Duration::from_secs(3600);
/// The longest `retain` accepted (ten years); keep rows longer by exporting them.
pub const MAX_AUDIT_RETENTION: Duration = Duration::from_secs(3650 * 86_400);

/// The `[audit]` section, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSettings {
    /// Write the trail at all (on by default: every call is on the record).
    pub enabled: bool,
    pub mode: AuditMode,
    /// Keep each call's arguments (secrets and `x-secret` fields redacted), not only their digest.
    pub record_arguments: bool,
    /// Rows older than this are pruned in the background.
    pub retain: Duration,
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            enabled: true,
            mode: AuditMode::BestEffort,
            record_arguments: false,
            retain: DEFAULT_AUDIT_RETENTION,
        }
    }
}

/// Reads `[audit]` (absent: every default).
pub(crate) fn read_audit(reader: &mut Reader<'_>, section: Option<&Item<'_>>) -> AuditSettings {
    let mut settings = AuditSettings::default();
    let empty = DeTable::new();
    let table = match section {
        Some(item) => reader
            .table("audit", item, "write an [audit] section")
            .unwrap_or(&empty),
        None => &empty,
    };
    reader.check_keys("audit", table, AUDIT_KEYS, AUDIT_HINTS);
    let field = |key: &str| key_path("audit", key);
    if let Some(b) = table
        .get("enabled")
        .and_then(|item| reader.boolean(&field("enabled"), item))
    {
        settings.enabled = b;
    }
    if let Some(b) = table
        .get("record_arguments")
        .and_then(|item| reader.boolean(&field("record_arguments"), item))
    {
        settings.record_arguments = b;
    }
    if let Some(mode) = table.get("mode").and_then(|item| {
        reader.choice(
            &field("mode"),
            item,
            &[
                ("best_effort", AuditMode::BestEffort),
                ("required", AuditMode::Required),
            ],
        )
    }) {
        settings.mode = mode;
    }
    if let Some(item) = table.get("retain") {
        let f = field("retain");
        let example = "write how long rows are kept, e.g. retain = \"90d\"";
        if let Some(text) = reader.string(&f, item, Show::Value, example) {
            match parse_duration_up_to(&text.value, MAX_AUDIT_RETENTION) {
                Ok(retain) if retain < MIN_AUDIT_RETENTION => reader.report_text(
                    &f,
                    &text,
                    "is shorter than an hour",
                    "keep rows for at least \"1h\", e.g. retain = \"90d\"",
                ),
                Ok(retain) => settings.retain = retain,
                Err(DurationError::TooLong) => reader.report_text(
                    &f,
                    &text,
                    "is longer than ten years (\"3650d\")",
                    "write at most \"3650d\"; keep older rows with manifold audit export",
                ),
                Err(e) => {
                    let (problem, fix) = e.describe(&text.value);
                    reader.report_text(&f, &text, problem, fix);
                }
            }
        }
    }
    settings
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{Config, FixedEnvironment};

    fn load(text: &str) -> Result<Config, crate::ConfigErrors> {
        let env = FixedEnvironment::new().with_var("HOME", "/home/t");
        Config::from_str_with(text, "m.toml", None, &env)
    }

    #[test]
    fn absent_means_on_best_effort_digests_only_for_ninety_days() {
        let c = load("").unwrap();
        assert_eq!(c.audit, AuditSettings::default());
        assert!(c.audit.enabled && !c.audit.record_arguments);
        assert_eq!(c.audit.mode, AuditMode::BestEffort);
        assert_eq!(c.audit.retain, Duration::from_secs(90 * 86_400));
    }

    #[test]
    fn every_key_is_read() {
        let c = load(
            "[audit]\nenabled = false\nmode = \"required\"\nrecord_arguments = true\nretain = \"7d\"\n",
        )
        .unwrap();
        assert_eq!(
            c.audit,
            AuditSettings {
                enabled: false,
                mode: AuditMode::Required,
                record_arguments: true,
                retain: Duration::from_secs(7 * 86_400),
            }
        );
    }

    #[test]
    fn bad_values_are_named_with_a_fix() {
        let errors = load("[audit]\nmode = \"requierd\"\nretain = \"10m\"\nretention = \"1d\"\n")
            .unwrap_err()
            .to_string();
        let too_long = load("[audit]\nretain = \"4000d\"\n")
            .unwrap_err()
            .to_string();
        assert!(too_long.contains("longer than ten years"), "{too_long}");
        assert!(
            errors.contains("audit.mode") && errors.contains("did you mean \"required\"?"),
            "{errors}"
        );
        assert!(
            errors.contains("audit.retain") && errors.contains("shorter than an hour"),
            "{errors}"
        );
        assert!(
            errors.contains("audit.retention") && errors.contains("write retain = \"90d\""),
            "{errors}"
        );
    }
}
