//! Reads the settings that govern how Manifold starts, idles and stops things: how long a
//! shutdown waits for calls in flight (`[gateway] drain_timeout`), when an idle legacy session
//! expires (`[gateway] session_idle_ttl`), and when the child of a lazy stdio server that no call
//! used is stopped (`[servers.NAME] idle_shutdown`).
//!
//! They are read in a pass of their own over the parsed file, after the sections' own readers
//! (which accept these keys and leave them alone), so that they travel as one
//! [`LifecycleSettings`] value rather than being threaded through every section's types.

use std::collections::BTreeMap;
use std::time::Duration;

use toml::de::{DeTable, DeValue};

use super::reader::{Reader, each_server_value, key_path};
use crate::server::{ServerConfig, Startup};

/// How long a shutdown lets calls in flight finish unless configured.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a legacy session may stay idle (no request, no open stream) before it expires,
/// unless configured.
pub const DEFAULT_SESSION_IDLE_TTL: Duration = Duration::from_secs(30 * 60);

/// Lifecycle settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleSettings {
    /// On SIGTERM/SIGINT: how long calls in flight may run on before they are cancelled.
    pub drain_timeout: Duration,
    /// A legacy session with no request and no open stream for this long expires (its id stops
    /// working, its own server processes stop).
    pub session_idle_ttl: Duration,
    /// Per server name: stop the child of this lazy stdio server after this long without a call.
    pub idle_shutdown: BTreeMap<String, Duration>,
}

impl Default for LifecycleSettings {
    fn default() -> Self {
        LifecycleSettings {
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            session_idle_ttl: DEFAULT_SESSION_IDLE_TTL,
            idle_shutdown: BTreeMap::new(),
        }
    }
}

impl LifecycleSettings {
    /// The idle limit of a server, if it has one.
    pub fn idle_shutdown_of(&self, server: &str) -> Option<Duration> {
        self.idle_shutdown.get(server).copied()
    }
}

/// Reads the lifecycle keys. Type problems of the sections themselves (a `[gateway]` that is
/// not a table) were reported by their own readers and are not reported again.
pub(crate) fn read_lifecycle(
    reader: &mut Reader<'_>,
    root: &DeTable<'_>,
    servers: &[ServerConfig],
) -> LifecycleSettings {
    let mut settings = LifecycleSettings::default();
    if let Some(DeValue::Table(gateway)) = root.get("gateway").map(|i| i.get_ref()) {
        if let Some(item) = gateway.get("drain_timeout")
            && let Some((d, _)) = reader.duration(&key_path("gateway", "drain_timeout"), item)
        {
            settings.drain_timeout = d;
        }
        if let Some(item) = gateway.get("session_idle_ttl")
            && let Some((d, _)) = reader.duration(&key_path("gateway", "session_idle_ttl"), item)
        {
            settings.session_idle_ttl = d;
        }
    }
    for (name, value) in each_server_value(root, "idle_shutdown") {
        let read = servers.iter().find(|s| s.name == name);
        // On an HTTP server the key is refused as stdio-only by the server reader already.
        if read.is_some_and(|s| !s.is_stdio()) {
            continue;
        }
        let field = key_path(&key_path("servers", name), "idle_shutdown");
        let Some((limit, text)) = reader.duration(&field, value) else {
            continue;
        };
        if let Some(s) = read
            && s.startup != Startup::Lazy
        {
            reader.report_text(
                &field,
                &text,
                "only applies to servers with startup = \"lazy\" (an eager server is started with the gateway and kept running)",
                "add startup = \"lazy\" to this server, or remove idle_shutdown",
            );
            continue;
        }
        settings.idle_shutdown.insert(name.to_owned(), limit);
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn load(text: &str) -> Result<Config, Vec<String>> {
        let text = format!("[gateway]\ndata_dir = \"/tmp/manifold-lifecycle\"\n{text}");
        Config::from_str(&text, "m.toml")
            .map_err(|e| e.iter().map(|e| e.render()).collect::<Vec<_>>())
    }

    #[test]
    fn the_keys_are_known_to_their_sections() {
        for key in ["drain_timeout", "session_idle_ttl"] {
            assert!(super::super::gateway::GATEWAY_KEYS.contains(&key), "{key}");
        }
        assert!(super::super::servers::SERVER_KEYS.contains(&"idle_shutdown"));
    }

    #[test]
    fn absent_keys_mean_the_defaults() {
        let c = load("").unwrap();
        assert_eq!(c.lifecycle, LifecycleSettings::default());
        assert_eq!(c.lifecycle.drain_timeout, Duration::from_secs(10));
        assert_eq!(c.lifecycle.session_idle_ttl, Duration::from_secs(1800));
    }

    #[test]
    fn values_are_read_for_the_gateway_and_for_lazy_stdio_servers() {
        let c = load(
            "drain_timeout = \"3s\"\nsession_idle_ttl = \"2m\"\n\n[servers.a]\ncommand = \"/bin/true\"\nstartup = \"lazy\"\nidle_shutdown = \"5m\"\n\n[servers.b]\ncommand = \"/bin/true\"\n",
        )
        .unwrap();
        assert_eq!(c.lifecycle.drain_timeout, Duration::from_secs(3));
        assert_eq!(c.lifecycle.session_idle_ttl, Duration::from_secs(120));
        assert_eq!(
            c.lifecycle.idle_shutdown_of("a"),
            Some(Duration::from_secs(300))
        );
        assert_eq!(c.lifecycle.idle_shutdown_of("b"), None);
    }

    #[test]
    fn idle_shutdown_needs_a_lazy_stdio_server() {
        let errors = load(
            "\n[servers.eager]\ncommand = \"/bin/true\"\nidle_shutdown = \"5m\"\n\n[servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\nstartup = \"lazy\"\nidle_shutdown = \"5m\"\n",
        )
        .unwrap_err();
        assert_eq!(
            errors,
            [
                "m.toml:6:17: error: servers.eager.idle_shutdown = \"5m\": only applies to servers with startup = \"lazy\" (an eager server is started with the gateway and kept running); add startup = \"lazy\" to this server, or remove idle_shutdown",
                "m.toml:11:1: error: servers.web.idle_shutdown: only applies to stdio servers (those with command); remove it (this server has url, so it is reached over HTTP)",
            ]
        );
    }

    #[test]
    fn a_duration_that_is_not_one_is_refused_where_it_is_written() {
        let errors = load("drain_timeout = 10\n").unwrap_err();
        assert_eq!(
            errors,
            [
                "m.toml:3:17: error: gateway.drain_timeout = 10: is an integer, but must be a string; write a duration as a string, e.g. \"60s\" or \"2m\""
            ]
        );
    }
}
