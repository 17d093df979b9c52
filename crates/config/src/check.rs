//! What `manifold check` prints: a short summary of a configuration that loaded (so a person can
//! see at a glance that Manifold understood what they meant), or every problem with it.

use std::path::Path;

use crate::config::Config;
use crate::error::ConfigErrors;
use crate::server::ServerKind;
use crate::settings::{Discovery, NamingMode};

/// Loads the file at `path` and describes it, or returns every problem found.
pub fn check(path: impl AsRef<Path>) -> Result<String, ConfigErrors> {
    Config::load(path).map(|c| check_report(&c))
}

/// The summary of a loaded configuration. It names servers but never prints URLs, arguments or
/// any other value that might carry a secret; a stdio server's program is named only when it
/// cannot be found.
pub fn check_report(config: &Config) -> String {
    let g = &config.gateway;
    let mut out = format!("{}: ok\n", config.origin);
    out.push_str(&format!(
        "listen: {} ({})\n",
        g.listen,
        if g.listens_on_loopback_only() {
            "this machine only"
        } else {
            "reachable from other machines"
        }
    ));
    let naming = match g.naming {
        NamingMode::Always => "always",
        NamingMode::Never => "never",
        NamingMode::Conditional => "conditional",
    };
    let discovery = match g.discovery {
        Discovery::Full => "full",
        Discovery::Search => "search",
    };
    out.push_str(&format!(
        "naming: {naming}, tool names up to {} characters; discovery: {discovery}\n",
        g.name_max_len
    ));
    out.push_str(&format!("store: {}\n", store_summary(config)));
    let names = |stdio: bool| -> Vec<&str> {
        config
            .enabled_servers()
            .filter(|s| s.is_stdio() == stdio)
            .map(|s| s.name.as_str())
            .collect()
    };
    let (stdio, http) = (names(true), names(false));
    let disabled: Vec<&str> = config
        .servers
        .iter()
        .filter(|s| !s.enabled)
        .map(|s| s.name.as_str())
        .collect();
    let enabled = stdio.len() + http.len();
    if enabled == 0 {
        out.push_str("servers: none enabled\n");
    } else {
        out.push_str(&format!(
            "servers: {enabled} ({} stdio, {} http)\n",
            stdio.len(),
            http.len()
        ));
    }
    if !stdio.is_empty() {
        out.push_str(&format!("  stdio: {}\n", stdio.join(", ")));
    }
    if !http.is_empty() {
        out.push_str(&format!("  http: {}\n", http.join(", ")));
    }
    if !disabled.is_empty() {
        out.push_str(&format!("  disabled: {}\n", disabled.join(", ")));
    }
    for note in notes(config) {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// Which store `manifold serve` will use: the SQLite file, or PostgreSQL's host, port and database
/// (never the user, password or query, which may carry secrets).
fn store_summary(config: &Config) -> String {
    let Some(url) = &config.store.url else {
        let file = config.gateway.data_dir.join("store.sqlite");
        return format!("SQLite, {} (one Manifold process)", file.display());
    };
    let where_ = url::Url::parse(url).ok().map(|u| {
        let host = u.host_str().unwrap_or_default().to_owned();
        let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
        format!("{host}{port}{}", u.path())
    });
    format!("PostgreSQL at {}", where_.unwrap_or_default())
}

/// Things that are allowed but worth a second look.
fn notes(config: &Config) -> Vec<String> {
    let mut notes = Vec::new();
    let g = &config.gateway;
    if !g.listens_on_loopback_only() {
        let mut hosts: Vec<String> = g
            .allowed_hosts
            .patterns()
            .iter()
            .map(|h| h.as_str().to_owned())
            .collect();
        // The listen address counts only when it is one a client can name (not 0.0.0.0 or ::).
        if g.allowed_hosts.includes_listen_address() && !g.listen.ip().is_unspecified() {
            hosts.push(g.listen.ip().to_string());
        }
        notes.push(format!(
            "listening on {} accepts connections from other machines; allowed_hosts is {}",
            g.listen,
            hosts.join(", ")
        ));
    }
    if g.allowed_origins.iter().any(|o| o.as_str() == "*") {
        notes.push("allowed_origins contains \"*\": any web page this machine's browser opens can call Manifold".to_owned());
    }
    for s in config.enabled_servers() {
        // Only the program, never its arguments: they may carry secrets.
        if let ServerKind::Stdio { spec, .. } = &s.kind
            && let Some(why) = spec.missing_program()
        {
            notes.push(format!(
                "servers.{}: {why}, so it cannot start; install it, or write its full path as command",
                s.name
            ));
        }
        if let ServerKind::Http { spec, .. } = &s.kind
            && spec.allow_insecure_http
            && spec.url.starts_with("http://")
        {
            notes.push(format!(
                "servers.{} uses plain http:// (allow_insecure_http = true)",
                s.name
            ));
        }
    }
    notes
}
