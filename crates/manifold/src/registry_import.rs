//! `manifold import --registry URL NAME[@VERSION]`: fetches one entry from an MCP registry's API
//! and prints it as a `[servers.NAME]` section (manifold-config's `import_registry_entry`). The
//! v0.1 API is asked first (`/v0.1/servers/NAME/versions/VERSION|latest`); a registry that does
//! not have it is searched through the v0 API (`/v0/servers?search=NAME`), where the entry whose
//! name matches exactly, at the version asked for or else the one marked latest, is taken.

use std::time::Duration;

use serde_json::Value;

use crate::report::{CliError, Outcome};

/// How long one registry request may take.
pub const REGISTRY_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest registry answer read.
pub const MAX_REGISTRY_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// The registry's own metadata key in an entry's `_meta`.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";

/// `NAME[@VERSION]`, split at an `@` after the name's last `/`.
fn name_and_version(wanted: &str) -> (&str, Option<&str>) {
    let slash = wanted.rfind('/').map_or(0, |i| i + 1);
    match wanted[slash..].rfind('@') {
        Some(at) if at > 0 => (&wanted[..slash + at], Some(&wanted[slash + at + 1..])),
        _ => (wanted, None),
    }
}

fn endpoint(base: &url::Url, segments: &[&str]) -> Result<url::Url, CliError> {
    let mut u = base.clone();
    u.path_segments_mut()
        .map_err(|()| CliError::usage(format!("{base} cannot be a registry's base URL")))?
        .pop_if_empty()
        .extend(segments);
    Ok(u)
}

async fn get(client: &reqwest::Client, url: &url::Url) -> Result<Option<Value>, CliError> {
    let failed = |e: String| {
        CliError::with_hint(
            format!("could not ask the registry at {url}: {e}"),
            "check the URL (the registry's base, e.g. https://registry.modelcontextprotocol.io) and the network",
        )
    };
    let response = client
        .get(url.clone())
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::METHOD_NOT_ALLOWED
    {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(failed(format!("it answered {status}")));
    }
    let body = response.bytes().await.map_err(|e| failed(e.to_string()))?;
    if body.len() > MAX_REGISTRY_ANSWER_BYTES {
        return Err(failed(format!(
            "the answer is {} bytes, more than {MAX_REGISTRY_ANSWER_BYTES}",
            body.len()
        )));
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| failed(format!("the answer is not JSON: {e}")))
}

fn version_of(server: &Value) -> Option<&str> {
    server.get("version").and_then(Value::as_str).or_else(|| {
        server
            .pointer("/version_detail/version")
            .and_then(Value::as_str)
    })
}

fn is_latest(entry: &Value) -> bool {
    let official = entry
        .pointer(&format!("/_meta/{}", OFFICIAL_META.replace('/', "~1")))
        .or_else(|| {
            manifold_config::registry_server_of(entry)
                .pointer(&format!("/_meta/{}", OFFICIAL_META.replace('/', "~1")))
        });
    official.is_some_and(|m| {
        m.get("isLatest")
            .or_else(|| m.get("is_latest"))
            .and_then(Value::as_bool)
            == Some(true)
    })
}

/// Picks the entry named `name` (at `version`, else the latest) from a v0 listing.
fn pick<'a>(listing: &'a Value, name: &str, version: Option<&str>) -> Option<&'a Value> {
    let matching: Vec<&Value> = listing
        .get("servers")
        .and_then(Value::as_array)?
        .iter()
        .filter(|e| {
            manifold_config::registry_server_of(e)
                .get("name")
                .and_then(Value::as_str)
                == Some(name)
        })
        .collect();
    match version {
        Some(v) => matching
            .into_iter()
            .find(|e| version_of(manifold_config::registry_server_of(e)) == Some(v)),
        None => matching
            .iter()
            .find(|e| is_latest(e))
            .or(matching.last())
            .copied(),
    }
}

/// `manifold import --registry URL NAME[@VERSION]`.
pub async fn import(registry: &str, wanted: &str) -> Result<Outcome, CliError> {
    let base = url::Url::parse(registry.trim()).map_err(|e| {
        CliError::usage(format!("--registry {registry:?} is not a URL ({e}); write e.g. --registry https://registry.modelcontextprotocol.io"))
    })?;
    let loopback = matches!(
        base.host_str(),
        Some("localhost" | "127.0.0.1" | "[::1]" | "::1")
    );
    if base.scheme() != "https" && !(base.scheme() == "http" && loopback) {
        return Err(CliError::usage(format!(
            "--registry {registry:?} must be https (plain http only to this machine)"
        )));
    }
    let (name, version) = name_and_version(wanted);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(REGISTRY_TIMEOUT)
        .build()
        .map_err(|e| CliError::usage(format!("could not set up HTTP: {e}")))?;
    let exact = endpoint(
        &base,
        &[
            "v0.1",
            "servers",
            name,
            "versions",
            version.unwrap_or("latest"),
        ],
    )?;
    let entry = match get(&client, &exact).await? {
        Some(entry) => entry,
        None => {
            let mut search = endpoint(&base, &["v0", "servers"])?;
            search.query_pairs_mut().append_pair("search", name);
            let listing = get(&client, &search).await?.ok_or_else(|| {
                CliError::with_hint(
                    format!("the registry at {base} has neither the v0.1 nor the v0 servers API"),
                    "check the URL: it is the registry's base, without /v0",
                )
            })?;
            pick(&listing, name, version).cloned().ok_or_else(|| {
                CliError::with_hint(
                    format!(
                        "the registry at {base} has no server named {name:?}{}",
                        version
                            .map(|v| format!(" at version {v}"))
                            .unwrap_or_default()
                    ),
                    "names are the registry's full names, e.g. io.github.owner/server",
                )
            })?
        }
    };
    let source = format!("{base} ({wanted})");
    let toml = manifold_config::import_registry_entry(&entry, &source)
        .map_err(|e| CliError::usage(format!("could not convert {wanted}: {e}")))?;
    print!("{toml}");
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_follows_the_last_at_after_the_last_slash() {
        assert_eq!(
            name_and_version("io.github.a/b@1.2.3"),
            ("io.github.a/b", Some("1.2.3"))
        );
        assert_eq!(name_and_version("io.github.a/b"), ("io.github.a/b", None));
        assert_eq!(name_and_version("@scope/b"), ("@scope/b", None));
    }

    #[test]
    fn the_latest_or_the_asked_version_is_picked() {
        let listing = serde_json::json!({"servers": [
            {"name": "a/b", "version": "1.0.0"},
            {"server": {"name": "a/b", "version": "2.0.0"}, "_meta": {OFFICIAL_META: {"isLatest": true}}},
            {"name": "a/c", "version": "9.0.0"},
        ]});
        assert_eq!(
            version_of(manifold_config::registry_server_of(
                pick(&listing, "a/b", None).unwrap()
            )),
            Some("2.0.0")
        );
        assert_eq!(
            version_of(pick(&listing, "a/b", Some("1.0.0")).unwrap()),
            Some("1.0.0")
        );
        assert!(pick(&listing, "a/d", None).is_none());
    }
}
