//! Reads the `[approvals]` section: how long a call an ask rule holds waits for its answer, with
//! and without a progress channel that keeps the client waiting, and where an out-of-band
//! question is announced (a webhook for chat tools).
//!
//! Its own section because the windows are a promise about client timeouts (Claude Code gives
//! a tool call 120 s), not a property of any one rule.

use std::time::Duration;

use toml::de::DeTable;

use super::auth::loopback_host;
use super::reader::{Item, Reader, Show, key_path};

pub(crate) const APPROVALS_KEYS: &[&str] = &["window", "progress_window", "webhook"];

const APPROVALS_HINTS: &[(&str, &str)] = &[
    (
        "timeout",
        "write window = \"100s\" (how long a held call waits without progress notifications)",
    ),
    (
        "url",
        "write webhook = \"https://...\" (where out-of-band questions are posted)",
    ),
    (
        "approvers",
        "approvers belong to each ask rule: [[rules]] effect = \"ask\" approvers = [...]",
    ),
];

/// How long a held call waits when its client sent no progress token: below common client tool
/// timeouts (Claude Code's is 120 s).
pub const DEFAULT_APPROVAL_WINDOW: Duration = Duration::from_secs(100);
/// How long a held call waits when progress notifications keep its client waiting.
pub const DEFAULT_APPROVAL_PROGRESS_WINDOW: Duration = Duration::from_secs(180);
/// The shortest window accepted: a person needs time to read the question.
pub const MIN_APPROVAL_WINDOW: Duration = Duration::from_secs(5);
/// The longest window accepted: a call held longer is better asked again.
pub const MAX_APPROVAL_WINDOW: Duration = Duration::from_secs(3600);

/// The `[approvals]` section, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSettings {
    pub window: Duration,
    pub progress_window: Duration,
    /// Where each out-of-band question is POSTed as JSON.
    pub webhook: Option<String>,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        ApprovalSettings {
            window: DEFAULT_APPROVAL_WINDOW,
            progress_window: DEFAULT_APPROVAL_PROGRESS_WINDOW,
            webhook: None,
        }
    }
}

/// Reads `[approvals]` (absent: every default).
pub(crate) fn read_approvals(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
) -> ApprovalSettings {
    let mut settings = ApprovalSettings::default();
    let empty = DeTable::new();
    let table = match section {
        Some(item) => reader
            .table("approvals", item, "write an [approvals] section")
            .unwrap_or(&empty),
        None => &empty,
    };
    reader.check_keys("approvals", table, APPROVALS_KEYS, APPROVALS_HINTS);
    let field = |key: &str| key_path("approvals", key);
    for (key, slot) in [
        ("window", &mut settings.window),
        ("progress_window", &mut settings.progress_window),
    ] {
        let Some(item) = table.get(key) else {
            continue;
        };
        let f = field(key);
        let Some((d, text)) = reader.duration(&f, item) else {
            continue;
        };
        if d < MIN_APPROVAL_WINDOW || d > MAX_APPROVAL_WINDOW {
            reader.report_text(
                &f,
                &text,
                "must be between 5s and 1h",
                format!(
                    "write e.g. {key} = \"{}s\"",
                    if key == "window" { 100 } else { 180 }
                ),
            );
            continue;
        }
        *slot = d;
    }
    if let Some(item) = table.get("webhook") {
        settings.webhook = read_webhook(reader, &field("webhook"), item);
    }
    settings
}

fn read_webhook(reader: &mut Reader<'_>, field: &str, item: &Item<'_>) -> Option<String> {
    let example = "write e.g. webhook = \"https://chat.example.com/hooks/manifold\"";
    let text = reader.string(field, item, Show::Value, example)?;
    if text.incomplete {
        return Some(text.value);
    }
    let parsed = match url::Url::parse(text.value.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
        _ => {
            reader.report_text(field, &text, "is not an http or https URL", example);
            return None;
        }
    };
    if parsed.scheme() == "http" && !loopback_host(&parsed) {
        reader.report_text(
            field,
            &text,
            "uses plain http to a host other than this machine: who called what would cross the network unprotected",
            "use https (plain http is accepted only for localhost and 127.0.0.1)",
        );
        return None;
    }
    Some(text.value.trim().to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::{Config, FixedEnvironment};

    fn load(text: &str) -> Result<Config, crate::ConfigErrors> {
        let env = FixedEnvironment::new().with_var("HOME", "/home/t");
        Config::from_str_with(text, "m.toml", None, &env)
    }

    #[test]
    fn absent_means_a_100s_window_and_180s_with_progress() {
        let c = load("").unwrap();
        assert_eq!(c.approvals, ApprovalSettings::default());
        assert_eq!(c.approvals.window, Duration::from_secs(100));
        assert_eq!(c.approvals.progress_window, Duration::from_secs(180));
    }

    #[test]
    fn windows_and_webhook_are_read() {
        let c = load(
            "[approvals]\nwindow = \"30s\"\nprogress_window = \"10m\"\nwebhook = \"http://127.0.0.1:9/hook\"\n",
        )
        .unwrap();
        assert_eq!(c.approvals.window, Duration::from_secs(30));
        assert_eq!(c.approvals.progress_window, Duration::from_secs(600));
        assert_eq!(
            c.approvals.webhook.as_deref(),
            Some("http://127.0.0.1:9/hook")
        );
    }

    #[test]
    fn a_window_outside_5s_to_1h_and_a_remote_plain_http_webhook_are_refused() {
        let e = load("[approvals]\nwindow = \"1s\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("approvals.window") && e.contains("between 5s and 1h"),
            "{e}"
        );
        let e = load("[approvals]\nprogress_window = \"2h\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("approvals.progress_window"), "{e}");
        let e = load("[approvals]\nwebhook = \"http://chat.example.com/h\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("plain http"), "{e}");
        let e = load("[approvals]\ntimeout = \"10s\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("window"), "{e}");
    }
}
