//! Reads the `[authoring]` section: whether clients may author tools at run time
//! (`manifold_create_tool` and the other authoring tools). On by default, as the authoring tools
//! are refused to authenticated callers unless a rule allows them; `enabled = false` takes the
//! authoring tools and every authored tool out of the gateway, for clients that count tools.

use toml::de::DeTable;

use super::reader::{Item, Reader, key_path};

/// The keys of a section that only turns a part on or off.
pub(crate) const SWITCH_KEYS: &[&str] = &["enabled"];

const AUTHORING_HINTS: &[(&str, &str)] =
    &[("enable", "write enabled = false to turn tool authoring off")];

/// The `[authoring]` section, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthoringSettings {
    pub enabled: bool,
}

impl Default for AuthoringSettings {
    fn default() -> Self {
        AuthoringSettings { enabled: true }
    }
}

/// Reads `[authoring]` (absent: every default).
pub(crate) fn read_authoring(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
) -> AuthoringSettings {
    let enabled = read_switch(reader, "authoring", section, AUTHORING_HINTS);
    AuthoringSettings {
        enabled: enabled.unwrap_or(AuthoringSettings::default().enabled),
    }
}

/// Reads a section whose only key is `enabled` (`[authoring]`, `[dashboard]`): the value given,
/// or `None` when the section or the key is absent (or wrong, which the reader reports).
pub(crate) fn read_switch(
    reader: &mut Reader<'_>,
    name: &str,
    section: Option<&Item<'_>>,
    hints: &[(&str, &str)],
) -> Option<bool> {
    let empty = DeTable::new();
    let table = match section {
        Some(item) => reader
            .table(name, item, &format!("write a [{name}] section"))
            .unwrap_or(&empty),
        None => &empty,
    };
    reader.check_keys(name, table, SWITCH_KEYS, hints);
    let item = table.get("enabled")?;
    reader.boolean(&key_path(name, "enabled"), item)
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
    fn authoring_is_on_unless_turned_off_and_a_wrong_value_names_its_line() {
        assert!(load("").unwrap().authoring.enabled);
        assert!(
            !load("[authoring]\nenabled = false\n")
                .unwrap()
                .authoring
                .enabled
        );
        let e = load("[authoring]\nenabled = \"no\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("m.toml:2") && e.contains("authoring.enabled"),
            "{e}"
        );
        let e = load("[authoring]\nenable = false\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("enabled = false"), "{e}");
    }
}
