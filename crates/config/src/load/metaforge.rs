//! Reads the `[metaforge]` section: whether `manifold serve` answers the legacy MetaForge
//! dialect (`tool/list`, `tool/call`, `health/check` as JSON-RPC at `POST /rpc`). Off by default:
//! only deployments with such older callers need it.

use super::authoring::read_switch;
use super::reader::{Item, Reader};

const METAFORGE_HINTS: &[(&str, &str)] = &[
    (
        "enable",
        "write enabled = true to answer the MetaForge dialect at /rpc",
    ),
    ("path", "the dialect is served at /rpc"),
];

/// The `[metaforge]` section, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetaforgeSettings {
    pub enabled: bool,
}

/// Reads `[metaforge]` (absent: off).
pub(crate) fn read_metaforge(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
) -> MetaforgeSettings {
    MetaforgeSettings {
        enabled: read_switch(reader, "metaforge", section, METAFORGE_HINTS).unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
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
    fn the_dialect_is_off_unless_turned_on() {
        assert!(!load("").unwrap().metaforge.enabled);
        assert!(
            load("[metaforge]\nenabled = true\n")
                .unwrap()
                .metaforge
                .enabled
        );
        let e = load("[metaforge]\npath = \"/x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("served at /rpc"), "{e}");
    }
}
