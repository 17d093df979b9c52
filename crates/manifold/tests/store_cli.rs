//! The store through the real binary: API keys of an old `api-keys.json` move into the store
//! once (the file renamed, a second start importing nothing) and still authenticate through
//! `manifold serve`; `manifold keys` works beside a running gateway; a second gateway on one
//! SQLite data dir is refused with the advice to use PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use manifold_testkit::{GatewayProcess, McpSession, ServeCommand};
use sha2::{Digest, Sha256};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// How long a revocation may take to reach a running gateway in these tests (the gateway's own
/// bound, `KEY_REFRESH_INTERVAL`, is one second; the rest is slack for a loaded machine).
const REVOCATION_PATIENCE: Duration = Duration::from_secs(20);

fn setup(name: &str) -> (PathBuf, PathBuf) {
    let dir = manifold_testkit::fresh_dir(&format!("store-cli-{name}")).unwrap();
    let config = dir.join("manifold.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\n[auth]\napi_keys = true\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    (dir, config)
}

fn manifold(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(MANIFOLD)
        .args(args)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn serve(dir: &Path, config: &Path) -> GatewayProcess {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .start()
        .unwrap()
}

/// The HTTP status of an `initialize` sent with `key`.
async fn status_with(url: &str, key: &str) -> u16 {
    McpSession::options(url)
        .client_info("store-cli", "1")
        .bearer(key)
        .initialize()
        .await
        .unwrap()
        .status
}

/// Writes an `api-keys.json` as earlier versions did, holding one key; returns the key.
fn write_old_key_file(data_dir: &Path) -> String {
    let (id, secret) = ("0123456789abcdef", "5".repeat(64));
    let digest: String = Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let file = serde_json::json!({"version": 1, "keys": [{
        "id": id, "name": "old-alice", "secret_sha256": digest,
        "scopes": ["mcp"], "groups": ["ops"], "created": 1_700_000_000, "revoked": null
    }]});
    std::fs::create_dir_all(data_dir).unwrap();
    std::fs::write(data_dir.join("api-keys.json"), file.to_string()).unwrap();
    format!("mfk_{id}_{secret}")
}

fn listed_names(dir: &Path, config: &Path) -> Vec<String> {
    let out = ok(&manifold(
        dir,
        &[
            "keys",
            "list",
            "--json",
            "--config",
            config.to_str().unwrap(),
        ],
    ));
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_key_file_is_imported_once_and_its_key_still_works() {
    let (dir, config) = setup("import");
    let data = dir.join("data");
    let key = write_old_key_file(&data);

    let first = ok(&manifold(&dir, &["check", config.to_str().unwrap()]));
    assert!(
        first.contains("Imported 1 API key(s)") && first.contains("old-alice"),
        "{first}"
    );
    assert!(!data.join("api-keys.json").exists());
    assert!(data.join("api-keys.json.imported").exists());
    let second = ok(&manifold(&dir, &["check", config.to_str().unwrap()]));
    assert!(!second.contains("Imported"), "{second}");

    // The same file again (an operator restoring it): nothing is duplicated.
    std::fs::copy(
        data.join("api-keys.json.imported"),
        data.join("api-keys.json"),
    )
    .unwrap();
    let again = manifold(
        &dir,
        &["keys", "list", "--config", config.to_str().unwrap()],
    );
    let said = String::from_utf8_lossy(&again.stderr).into_owned();
    assert!(
        said.contains("Imported 0 API key(s)") && said.contains("1 already there"),
        "{said}"
    );
    assert_eq!(listed_names(&dir, &config), ["old-alice"]);

    let s = serve(&dir, &config);
    assert_eq!(status_with(s.url(), &key).await, 200);
    let wrong = format!("mfk_0123456789abcdef_{}", "6".repeat(64));
    assert_eq!(status_with(s.url(), &wrong).await, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_work_beside_a_running_gateway_and_a_second_gateway_is_refused() {
    let (dir, config) = setup("beside");
    let c = config.to_str().unwrap();
    let s = serve(&dir, &config);

    let second = manifold(&dir, &["serve", "--config", c]);
    let said = String::from_utf8_lossy(&second.stderr).into_owned();
    assert_ne!(second.status.code(), Some(0), "{said}");
    assert!(
        said.contains("another Manifold process")
            && said.contains("PostgreSQL")
            && said.contains("[store] url"),
        "{said}"
    );

    // Made while the gateway runs: works at once (an unknown id re-reads the store).
    let key = ok(&manifold(&dir, &["keys", "create", "bob", "--config", c]))
        .trim()
        .to_owned();
    assert_eq!(status_with(s.url(), &key).await, 200);

    ok(&manifold(&dir, &["keys", "revoke", "bob", "--config", c]));
    let started = Instant::now();
    while status_with(s.url(), &key).await != 401 {
        assert!(
            started.elapsed() < REVOCATION_PATIENCE,
            "a revoked key still works through the running gateway"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
