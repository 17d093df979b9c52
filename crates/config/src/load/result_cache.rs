//! Reads `[servers.NAME] cache_ttl`: how long the answers of a server's read-only, idempotent
//! tools are kept and given again to the same caller for the same arguments (the gateway's
//! `result_cache.rs`). Absent: never. Read in a pass of its own after the servers' reader (which
//! accepts the key and leaves it alone), like the lifecycle keys.

use std::collections::BTreeMap;
use std::time::Duration;

use toml::de::DeTable;

use super::reader::{Reader, each_server_value, key_path};
use crate::server::{Scope, ServerConfig};

/// The shortest time an answer may be kept: less would only cost the lookup.
pub const MIN_CACHE_TTL: Duration = Duration::from_secs(1);
/// The longest: a day-old answer of a "read-only" tool is a snapshot, not a cache.
pub const MAX_CACHE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Every server's `cache_ttl`, by name; a server not named keeps nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResultCacheSettings {
    pub ttl: BTreeMap<String, Duration>,
}

impl ResultCacheSettings {
    /// How long a server's answers are kept, if they are.
    pub fn ttl_of(&self, server: &str) -> Option<Duration> {
        self.ttl.get(server).copied()
    }
}

pub(crate) fn read_result_cache(
    reader: &mut Reader<'_>,
    root: &DeTable<'_>,
    servers: &[ServerConfig],
) -> ResultCacheSettings {
    let mut settings = ResultCacheSettings::default();
    for (name, value) in each_server_value(root, "cache_ttl") {
        let field = key_path(&key_path("servers", name), "cache_ttl");
        let Some((ttl, text)) = reader.duration(&field, value) else {
            continue;
        };
        if !(MIN_CACHE_TTL..=MAX_CACHE_TTL).contains(&ttl) {
            reader.report_text(
                &field,
                &text,
                "is outside 1s..=24h",
                "write how long an answer may be given again, e.g. cache_ttl = \"60s\"",
            );
            continue;
        }
        if servers
            .iter()
            .any(|s| s.name == name && s.scope() == Some(Scope::Session))
        {
            reader.report_text(
                &field,
                &text,
                "does not apply to a server with scope = \"session\" (each session's own server may answer from that session's state)",
                "remove cache_ttl, or make the server shared",
            );
            continue;
        }
        settings.ttl.insert(name.to_owned(), ttl);
    }
    settings
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::Config;

    fn load(text: &str) -> Result<Config, Vec<String>> {
        let text = format!("[gateway]\ndata_dir = \"/tmp/manifold-result-cache\"\n{text}");
        Config::from_str(&text, "m.toml")
            .map_err(|e| e.iter().map(|e| e.render()).collect::<Vec<_>>())
    }

    #[test]
    fn a_servers_cache_ttl_is_read_and_bounded() {
        assert!(super::super::servers::SERVER_KEYS.contains(&"cache_ttl"));
        let c = load("[servers.t]\ncommand = \"t\"\ncache_ttl = \"90s\"\n[servers.u]\nurl = \"https://u.example/mcp\"\n").unwrap();
        assert_eq!(c.result_cache.ttl_of("t"), Some(Duration::from_secs(90)));
        assert_eq!(c.result_cache.ttl_of("u"), None);

        let e = load("[servers.t]\ncommand = \"t\"\ncache_ttl = \"2d\"\n")
            .unwrap_err()
            .join("\n");
        assert!(e.contains("longer than 24h"), "{e}");
        let e = load("[servers.t]\ncommand = \"t\"\ncache_ttl = \"500ms\"\n")
            .unwrap_err()
            .join("\n");
        assert!(e.contains("outside 1s..=24h"), "{e}");
        let e = load("[servers.t]\ncommand = \"t\"\nscope = \"session\"\ncache_ttl = \"1m\"\n")
            .unwrap_err()
            .join("\n");
        assert!(
            e.contains("scope = \\\"session\\\"") || e.contains("scope = \"session\""),
            "{e}"
        );
    }
}
