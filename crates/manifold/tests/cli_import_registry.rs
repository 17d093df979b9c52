//! `manifold import --registry URL NAME[@VERSION]` and `manifold import server.json` as a person
//! runs them, against registries the test serves itself on 127.0.0.1: one with the v0.1 API and
//! today's camelCase entries, one with only the v0 search API and the earlier snake_case ones. The
//! entries are this project's own fixtures. What is printed must load with `manifold check`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use axum::Json;
use axum::Router;
use axum::extract::{Path as UrlPath, Query};
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

fn weather(version: &str) -> Value {
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": "io.github.manifold-test/weather",
        "description": "Forecasts for a place",
        "version": version,
        "packages": [{
            "registryType": "npm",
            "identifier": "@manifold-test/weather",
            "version": version,
            "transport": {"type": "stdio"},
            "runtimeArguments": [{"type": "named", "name": "--node-options", "value": "--max-old-space-size=256"}],
            "packageArguments": [
                {"type": "positional", "value": "serve"},
                {"type": "named", "name": "--units", "value": "metric"}
            ],
            "environmentVariables": [
                {"name": "WEATHER_API_KEY", "description": "The forecast service's key", "isRequired": true, "isSecret": true},
                {"name": "WEATHER_REGION", "default": "eu"}
            ]
        }],
        "remotes": [{"type": "streamable-http", "url": "https://weather.example.com/mcp"}]
    })
}

fn old_tickets() -> Value {
    json!({
        "name": "io.github.manifold-test/tickets",
        "description": "Tickets, remotely",
        "version_detail": {"version": "0.9.0"},
        "packages": [{"registry_name": "oci", "name": "manifold-test/tickets", "version": "0.9.0"}],
        "remotes": [{
            "transport_type": "sse",
            "url": "https://tickets.example.com/{tenant}/sse",
            "headers": [{"name": "X-Api-Key", "description": "Your ticket API key", "is_secret": true}]
        }],
        "_meta": {"io.modelcontextprotocol.registry/official": {"is_latest": true}}
    })
}

fn python_server() -> Value {
    json!({"name": "io.github.manifold-test/clock", "version": "2.1.0", "packages": [{
        "registryType": "pypi", "identifier": "manifold-test-clock", "version": "2.1.0",
        "transport": {"type": "stdio"}}]})
}

/// A registry on 127.0.0.1 serving `router`; its base URL.
async fn serve(router: Router) -> String {
    let addr = manifold_testkit::serve_router(router).await.unwrap();
    format!("http://{addr}")
}

/// The v0.1 API: `/v0.1/servers/{name}/versions/{version|latest}`.
fn v01_registry() -> Router {
    Router::new().route(
        "/v0.1/servers/{name}/versions/{version}",
        get(
            |UrlPath((name, version)): UrlPath<(String, String)>| async move {
                let entries = [weather("1.0.0"), weather("1.2.0"), python_server()];
                let found = entries.iter().rev().find(|e| {
                    e["name"] == name.as_str()
                        && (version == "latest" || e["version"] == version.as_str())
                });
                match found {
                    Some(e) => Ok(Json(json!({"server": e, "_meta": {}}))),
                    None => Err(StatusCode::NOT_FOUND),
                }
            },
        ),
    )
}

/// Only the v0 search API, with snake_case entries.
fn v0_registry() -> Router {
    Router::new().route(
        "/v0/servers",
        get(|Query(q): Query<HashMap<String, String>>| async move {
            let all = [old_tickets(), weather("0.1.0")];
            let wanted = q.get("search").cloned().unwrap_or_default();
            let servers: Vec<&Value> = all
                .iter()
                .filter(|e| e["name"].as_str().unwrap().contains(&wanted))
                .collect();
            Json(json!({"servers": servers, "metadata": {"count": servers.len()}}))
        }),
    )
}

fn manifold(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_manifold"))
        .args(args)
        .current_dir(dir)
        .env("WEATHER_API_KEY", "k")
        .env("X_API_KEY", "k")
        .env("TENANT", "acme")
        .env("HOME", dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `manifold check` on what was printed, with a data dir of the test's.
fn checks(dir: &Path, toml: &str) {
    let file = dir.join("imported.toml");
    std::fs::write(
        &file,
        format!(
            "[gateway]\ndata_dir = {:?}\n{toml}",
            dir.join("data").display().to_string()
        ),
    )
    .unwrap();
    let (code, out, err) = manifold(dir, &["check", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{toml}\n{out}{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v01_registry_entry_becomes_a_server_that_check_accepts() {
    let dir = manifold_testkit::fresh_dir("import-registry-v01").unwrap();
    let base = serve(v01_registry()).await;
    let (code, toml, err) = manifold(
        &dir,
        &[
            "import",
            "--registry",
            &base,
            "io.github.manifold-test/weather",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(toml.contains("[servers.weather]"), "{toml}");
    assert!(toml.contains("version 1.2.0"), "the latest version: {toml}");
    assert!(toml.contains("command = \"npx\""), "{toml}");
    assert!(
        toml.contains("args = [\"-y\", \"--node-options\", \"--max-old-space-size=256\", \"@manifold-test/weather@1.2.0\", \"serve\", \"--units\", \"metric\"]"),
        "{toml}"
    );
    assert!(
        toml.contains("WEATHER_API_KEY = \"${WEATHER_API_KEY}\"  # secret"),
        "{toml}"
    );
    assert!(toml.contains("WEATHER_REGION = \"eu\""), "{toml}");
    assert!(
        toml.contains("remote https://weather.example.com/mcp was not used"),
        "{toml}"
    );
    checks(&dir, &toml);

    let (code, pinned, _) = manifold(
        &dir,
        &[
            "import",
            "--registry",
            &base,
            "io.github.manifold-test/weather@1.0.0",
        ],
    );
    assert_eq!(code, 0);
    assert!(pinned.contains("@manifold-test/weather@1.0.0"), "{pinned}");

    let (code, clock, _) = manifold(
        &dir,
        &[
            "import",
            "--registry",
            &base,
            "io.github.manifold-test/clock",
        ],
    );
    assert_eq!(code, 0);
    assert!(
        clock.contains("command = \"uvx\"")
            && clock.contains(
                "args = [\"--from\", \"manifold-test-clock==2.1.0\", \"manifold-test-clock\"]"
            ),
        "{clock}"
    );
    checks(&dir, &clock);

    // The same entry from a local server.json gives the same section.
    std::fs::write(dir.join("server.json"), weather("1.2.0").to_string()).unwrap();
    let (code, local, err) = manifold(&dir, &["import", "server.json"]);
    assert_eq!(code, 0, "{err}");
    let section = |t: &str| t[t.find("[servers.weather]").unwrap()..].to_owned();
    assert_eq!(section(&local), section(&toml));

    let (code, _, err) = manifold(
        &dir,
        &[
            "import",
            "--registry",
            &base,
            "io.github.manifold-test/nothing",
        ],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("neither the v0.1 nor the v0") || err.contains("no server named"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_registry_is_searched_and_its_snake_case_remote_is_imported() {
    let dir = manifold_testkit::fresh_dir("import-registry-v0").unwrap();
    let base = serve(v0_registry()).await;
    let (code, toml, err) = manifold(
        &dir,
        &[
            "import",
            "--registry",
            &base,
            "io.github.manifold-test/tickets",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(toml.contains("[servers.tickets]"), "{toml}");
    assert!(toml.contains("version 0.9.0"), "{toml}");
    assert!(
        toml.contains("url = \"https://tickets.example.com/${TENANT}/sse\""),
        "{toml}"
    );
    assert!(toml.contains("transport = \"sse\""), "{toml}");
    assert!(
        toml.contains("X-Api-Key = \"${X_API_KEY}\"  # secret"),
        "{toml}"
    );
    assert!(
        toml.contains("OCI image"),
        "the container package is named as not used: {toml}"
    );
    checks(&dir, &toml);

    let (code, _, err) = manifold(
        &dir,
        &[
            "import",
            "--registry",
            &base,
            "io.github.manifold-test/absent",
        ],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("no server named \"io.github.manifold-test/absent\""),
        "{err}"
    );
    let (code, _, err) = manifold(&dir, &["import", "--registry", "http://example.com", "a/b"]);
    assert_eq!(code, 1);
    assert!(err.contains("must be https"), "{err}");
}
