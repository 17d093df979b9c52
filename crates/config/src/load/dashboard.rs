//! Reads the `[dashboard]` section: whether `manifold serve` serves the operators' pages at
//! `/ui`. On by default: the pages sign people in with an admin-scoped key (or are open to this
//! machine alone when authentication is off, as `/mcp` is), so they add no way in.

use super::authoring::read_switch;
use super::reader::{Item, Reader};

const DASHBOARD_HINTS: &[(&str, &str)] = &[
    ("enable", "write enabled = false to turn the dashboard off"),
    (
        "listen",
        "the dashboard is served on telemetry.admin_listen when set, else beside /mcp",
    ),
];

/// The `[dashboard]` section, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DashboardSettings {
    pub enabled: bool,
}

impl Default for DashboardSettings {
    fn default() -> Self {
        DashboardSettings { enabled: true }
    }
}

/// Reads `[dashboard]` (absent: every default).
pub(crate) fn read_dashboard(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
) -> DashboardSettings {
    let enabled = read_switch(reader, "dashboard", section, DASHBOARD_HINTS);
    DashboardSettings {
        enabled: enabled.unwrap_or(DashboardSettings::default().enabled),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::{Config, FixedEnvironment};

    fn load(text: &str) -> Result<Config, crate::ConfigErrors> {
        Config::from_str_with(
            text,
            "m.toml",
            None,
            &FixedEnvironment::new().with_var("HOME", "/home/t"),
        )
    }

    #[test]
    fn the_dashboard_is_on_unless_turned_off_and_a_misplaced_listen_is_explained() {
        assert!(load("").unwrap().dashboard.enabled);
        assert!(
            !load("[dashboard]\nenabled = false\n")
                .unwrap()
                .dashboard
                .enabled
        );
        let e = load("[dashboard]\nlisten = \"127.0.0.1:9\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.toml:2") && e.contains("admin_listen"), "{e}");
    }
}
