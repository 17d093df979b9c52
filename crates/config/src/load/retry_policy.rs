//! Reads how tool calls to each server are retried: `[servers.NAME] retries` (how many times an
//! idempotent call is tried again after its server died, refused the connection or timed out)
//! and `[servers.NAME] idempotent_tools` (tools to treat as idempotent whatever their
//! `idempotentHint` says).
//!
//! Read in a pass of its own after the sections' readers (which accept these keys and leave them
//! alone), like the lifecycle keys, so the retry policy travels as one value.

use std::collections::BTreeMap;

use manifold_gateway::patterns::NamePatterns;
use toml::de::{DeTable, DeValue};

use super::patterns::check_patterns;
use super::reader::{Reader, Show, key_path};

/// Retries of an idempotent call unless configured.
pub const DEFAULT_RETRIES: u32 = 2;
/// The most retries a server may be given: each retry waits and may hold a caller for a whole
/// call timeout, so a larger count only hides a broken server.
pub const MAX_RETRIES: u32 = 10;

/// One server's retry policy.
#[derive(Debug, Clone)]
pub struct ServerRetry {
    pub retries: u32,
    /// Tools (by the server's own names) retried even without `idempotentHint`, compiled as the
    /// gateway matches them (empty: none).
    pub idempotent_tools: NamePatterns,
}

impl Default for ServerRetry {
    fn default() -> Self {
        ServerRetry {
            retries: DEFAULT_RETRIES,
            idempotent_tools: NamePatterns::none(),
        }
    }
}

/// Every server's retry policy, by name; servers not named use the defaults.
#[derive(Debug, Clone, Default)]
pub struct RetrySettings {
    pub servers: BTreeMap<String, ServerRetry>,
}

impl RetrySettings {
    pub fn of(&self, server: &str) -> ServerRetry {
        self.servers.get(server).cloned().unwrap_or_default()
    }
}

pub(crate) fn read_retry_policy(reader: &mut Reader<'_>, root: &DeTable<'_>) -> RetrySettings {
    let mut settings = RetrySettings::default();
    let Some(DeValue::Table(table)) = root.get("servers").map(|i| i.get_ref()) else {
        return settings;
    };
    for (key, item) in table.iter() {
        let name: &str = key.get_ref();
        let DeValue::Table(server) = item.get_ref() else {
            continue;
        };
        let mut policy = ServerRetry::default();
        let mut set = false;
        if let Some(item) = server.get("retries") {
            let field = key_path(&key_path("servers", name), "retries");
            if let Some(n) = reader.integer(&field, item, "write e.g. retries = 2") {
                match u32::try_from(n) {
                    Ok(n) if n <= MAX_RETRIES => {
                        policy.retries = n;
                        set = true;
                    }
                    _ => reader.report_value(
                        &field,
                        item,
                        Show::Value,
                        format!("is outside 0..={MAX_RETRIES}"),
                        format!("write a count from 0 (never retry) to {MAX_RETRIES}"),
                    ),
                }
            }
        }
        if let Some(item) = server.get("idempotent_tools") {
            let field = key_path(&key_path("servers", name), "idempotent_tools");
            if let Some(texts) = reader.string_list(
                &field,
                item,
                Show::Value,
                "write e.g. [\"get_*\", \"search\"]",
            ) {
                let fix = "patterns use * (any characters), ? (one character), [abc] and {a,b}";
                if let Some(patterns) = check_patterns(reader, &field, item, &texts, fix) {
                    policy.idempotent_tools = patterns;
                    set = true;
                }
            }
        }
        if set {
            settings.servers.insert(name.to_owned(), policy);
        }
    }
    settings
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn load(text: &str) -> Result<Config, Vec<String>> {
        let text = format!("[gateway]\ndata_dir = \"/tmp/manifold-retry-policy\"\n{text}");
        Config::from_str(&text, "m.toml")
            .map_err(|e| e.iter().map(|e| e.render()).collect::<Vec<_>>())
    }

    #[test]
    fn retries_and_idempotent_tools_are_read_per_server_with_defaults_elsewhere() {
        let c = load(
            "\n[servers.a]\ncommand = \"/bin/true\"\nretries = 5\nidempotent_tools = [\"get_*\"]\n\n[servers.b]\ncommand = \"/bin/true\"\n",
        )
        .unwrap();
        let a = c.retries.of("a");
        assert_eq!(a.retries, 5);
        assert!(a.idempotent_tools.is_match("get_user"));
        assert!(!a.idempotent_tools.is_match("delete_user"));
        let b = c.retries.of("b");
        assert_eq!(b.retries, super::DEFAULT_RETRIES);
        assert!(b.idempotent_tools.is_empty());
    }

    #[test]
    fn out_of_range_counts_and_bad_patterns_are_errors_at_their_place() {
        let errors = load(
            "\n[servers.a]\ncommand = \"/bin/true\"\nretries = 11\nidempotent_tools = [\"[\"]\n",
        )
        .unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with("m.toml:6:11: error: servers.a.retries = 11: is outside 0..=10"),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with(
                "m.toml:7:21: error: servers.a.idempotent_tools[0] = \"[\": is not a valid pattern"
            ),
            "{errors:?}"
        );
    }
}
