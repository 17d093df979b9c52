//! Why: tests in one crate run binaries of another (the test peer, the manifold binary), and cargo
//! only exposes `CARGO_BIN_EXE_*` for a package's own binaries; this finds (or builds) the others.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use crate::error::TestkitError;
use crate::locate::workspace_root;

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// The target directory this test binary was built into (`.../target`), from its own path.
fn target_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(dir));
    }
    // A test executable lives in <target>/<profile>/deps/.
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.to_path_buf())
}

/// The path of a workspace binary in the debug profile, building its package when it is missing.
pub fn workspace_binary(package: &str, binary: &str) -> Result<PathBuf, TestkitError> {
    let dir = target_dir().ok_or_else(|| TestkitError::Missing {
        what: format!("the target directory (for binary {binary})"),
        hint: "set CARGO_TARGET_DIR".to_owned(),
    })?;
    let path = dir.join("debug").join(binary);
    let _one_build_at_a_time = BUILD_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !path.exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", package, "--bin", binary])
            .current_dir(workspace_root())
            .env("CARGO_TARGET_DIR", &dir)
            .status()
            .map_err(|e| TestkitError::Missing {
                what: format!("binary {binary}"),
                hint: format!("cargo build -p {package} could not start: {e}"),
            })?;
        if !status.success() || !path.exists() {
            return Err(TestkitError::Missing {
                what: format!("binary {binary} at {}", path.display()),
                hint: format!("run cargo build -p {package}"),
            });
        }
    }
    Ok(path)
}

/// The misbehaving test server (`crates/test-peer`).
pub fn test_peer() -> Result<PathBuf, TestkitError> {
    workspace_binary("manifold-test-peer", "manifold-test-peer")
}
