//! Reads the `[rest]` section: whether `manifold serve` offers the tools as a REST API described
//! by OpenAPI (`GET /rest/openapi.json`, `POST /rest/NAME`). Off by default: MCP clients do not
//! need it, and a second way in is opened only when asked for.

use super::authoring::read_switch;
use super::reader::{Item, Reader};

const REST_HINTS: &[(&str, &str)] = &[
    (
        "enable",
        "write enabled = true to serve the tools as a REST API at /rest",
    ),
    (
        "path",
        "the REST API is served at /rest, its document at /rest/openapi.json",
    ),
];

/// The `[rest]` section, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RestSettings {
    pub enabled: bool,
}

/// Reads `[rest]` (absent: off).
pub(crate) fn read_rest(reader: &mut Reader<'_>, section: Option<&Item<'_>>) -> RestSettings {
    RestSettings {
        enabled: read_switch(reader, "rest", section, REST_HINTS).unwrap_or(false),
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
    fn the_rest_view_is_off_unless_turned_on() {
        assert!(!load("").unwrap().rest.enabled);
        assert!(load("[rest]\nenabled = true\n").unwrap().rest.enabled);
        let e = load("[rest]\npath = \"/api\"\n").unwrap_err().to_string();
        assert!(e.contains("served at /rest"), "{e}");
        let e = load("[rest]\nenabled = \"yes\"\n").unwrap_err().to_string();
        assert!(e.contains("rest"), "{e}");
    }
}
