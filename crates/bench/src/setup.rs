//! Why: the other gateways must be the same bytes on every run and every machine, so the benchmark
//! installs them itself from the pinned manifests in `crates/bench/contenders/` (embedded in the
//! binary), under `~/.cache/manifold/bench`, and reinstalls only when a manifest or the Node or
//! Python it runs on changes (a stamp holds what the last install was made from).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::fcntl::{Flock, FlockArg};

const PACKAGE_JSON: &str = include_str!("../contenders/package.json");
const PACKAGE_LOCK: &str = include_str!("../contenders/package-lock.json");
const REQUIREMENTS: &str = include_str!("../contenders/requirements.txt");
const LOOPBACK_PRELOAD: &str = include_str!("../contenders/bind-loopback.cjs");
const STAMP: &str = ".manifold-bench-stamp";
/// Bumped when the install procedure itself changes, so old installs are redone.
const PROCEDURE: &str = "manifold-bench setup 1";

/// Why an install failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(
        "no cache directory: HOME is not set; set HOME, XDG_CACHE_HOME or MANIFOLD_BENCH_CACHE, or pass --cache-dir"
    )]
    NoCacheDir,
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{program} is not available ({source}); {hint}")]
    MissingTool {
        program: String,
        source: std::io::Error,
        hint: &'static str,
    },
    #[error("`{command}` failed ({status}); {hint}")]
    Failed {
        command: String,
        status: String,
        hint: &'static str,
    },
    #[error("{0}")]
    Incomplete(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SetupError {
    let what = what.into();
    move |source| SetupError::Io { what, source }
}

/// Where installs go: `--cache-dir`, `$MANIFOLD_BENCH_CACHE`, `$XDG_CACHE_HOME/manifold/bench`,
/// or `~/.cache/manifold/bench`.
pub fn cache_dir(given: Option<&Path>) -> Result<PathBuf, SetupError> {
    if let Some(dir) = given {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("MANIFOLD_BENCH_CACHE").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
    {
        return Ok(dir.join("manifold").join("bench"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| {
            PathBuf::from(home)
                .join(".cache")
                .join("manifold")
                .join("bench")
        })
        .ok_or(SetupError::NoCacheDir)
}

/// The Node gateways, installed.
#[derive(Debug, Clone)]
pub struct NodeContenders {
    pub supergateway: PathBuf,
    pub supergateway_version: String,
    pub mcp_proxy: PathBuf,
    pub mcp_proxy_version: String,
    pub loopback_preload: PathBuf,
}

/// The Python gateway, installed.
#[derive(Debug, Clone)]
pub struct PythonContender {
    pub mcp_proxy: PathBuf,
    pub version: String,
}

/// Holds the install lock of a cache directory while alive.
struct InstallLock {
    _lock: Flock<File>,
}

fn lock(cache: &Path) -> Result<InstallLock, SetupError> {
    std::fs::create_dir_all(cache).map_err(io(format!("could not create {}", cache.display())))?;
    let path = cache.join(".install.lock");
    let file = File::create(&path).map_err(io(format!("could not open {}", path.display())))?;
    let lock = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| SetupError::Io {
        what: format!("could not lock {}", path.display()),
        source: std::io::Error::from(errno),
    })?;
    Ok(InstallLock { _lock: lock })
}

fn first_line_of(program: &str, args: &[&str], hint: &'static str) -> Result<String, SetupError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| SetupError::MissingTool {
            program: program.to_owned(),
            source,
            hint,
        })?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_owned())
}

fn run(command: &mut Command, hint: &'static str) -> Result<(), SetupError> {
    let shown = format!("{command:?}");
    // Progress goes to stderr so the report on stdout stays clean.
    let status = command
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .map_err(|source| SetupError::MissingTool {
            program: command.get_program().to_string_lossy().into_owned(),
            source,
            hint,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(SetupError::Failed {
            command: shown,
            status: status.to_string(),
            hint,
        })
    }
}

fn stamp_is(path: &Path, want: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|have| have == want)
}

const NODE_HINT: &str = "install Node.js >= 20 and npm (Debian: apt-get install nodejs npm), then run manifold-bench setup";
const PYTHON_HINT: &str = "install Python >= 3.10 with venv (Debian: apt-get install python3-venv) or set MANIFOLD_PYTHON, then run manifold-bench setup";

fn node_stamp() -> Result<String, SetupError> {
    let node = first_line_of("node", &["--version"], NODE_HINT)?;
    let npm = first_line_of("npm", &["--version"], NODE_HINT)?;
    Ok(format!(
        "{PROCEDURE}\nnode {node}\nnpm {npm}\n{PACKAGE_JSON}\n{PACKAGE_LOCK}"
    ))
}

fn python() -> String {
    std::env::var("MANIFOLD_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".to_owned())
}

fn python_stamp() -> Result<String, SetupError> {
    let python = python();
    let version = first_line_of(&python, &["--version"], PYTHON_HINT)?;
    Ok(format!("{PROCEDURE}\n{python} {version}\n{REQUIREMENTS}"))
}

/// Installs the Node gateways when missing or stale (`force`: always; `install` false: never,
/// a missing install is an error), and says where they are.
pub fn ensure_node(cache: &Path, force: bool, install: bool) -> Result<NodeContenders, SetupError> {
    let _lock = lock(cache)?;
    let dir = cache.join("npm");
    let want = node_stamp()?;
    let stamp = dir.join("node_modules").join(STAMP);
    let stale = force || !stamp_is(&stamp, &want);
    if stale && !install {
        return Err(SetupError::Incomplete(format!(
            "the Node contenders in {} are missing or stale; run manifold-bench setup",
            dir.display()
        )));
    }
    if stale {
        eprintln!("manifold-bench setup: npm ci in {} ...", dir.display());
        std::fs::create_dir_all(&dir).map_err(io(format!("could not create {}", dir.display())))?;
        std::fs::write(dir.join("package.json"), PACKAGE_JSON)
            .map_err(io("could not write package.json"))?;
        std::fs::write(dir.join("package-lock.json"), PACKAGE_LOCK)
            .map_err(io("could not write package-lock.json"))?;
        // Install scripts are skipped: the pinned packages need none, and they could reach the network.
        run(
            Command::new("npm")
                .args([
                    "ci",
                    "--ignore-scripts",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                ])
                .current_dir(&dir),
            "check that the npm registry is reachable, then run manifold-bench setup again",
        )?;
        std::fs::write(&stamp, &want)
            .map_err(io(format!("could not write {}", stamp.display())))?;
    }
    let preload = cache.join("bind-loopback.cjs");
    if !stamp_is(&preload, LOOPBACK_PRELOAD) {
        std::fs::write(&preload, LOOPBACK_PRELOAD)
            .map_err(io(format!("could not write {}", preload.display())))?;
    }
    let modules = dir.join("node_modules");
    let (supergateway, supergateway_version) = npm_bin(&modules, "supergateway", "supergateway")?;
    let (mcp_proxy, mcp_proxy_version) = npm_bin(&modules, "mcp-proxy", "mcp-proxy")?;
    Ok(NodeContenders {
        supergateway,
        supergateway_version,
        mcp_proxy,
        mcp_proxy_version,
        loopback_preload: preload,
    })
}

/// The script an npm package installs as `bin`, and the package's version.
fn npm_bin(modules: &Path, package: &str, bin: &str) -> Result<(PathBuf, String), SetupError> {
    let root = modules.join(package);
    let manifest_path = root.join("package.json");
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(io(format!("could not read {}", manifest_path.display())))?;
    let manifest: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        SetupError::Incomplete(format!("{} is not JSON: {e}", manifest_path.display()))
    })?;
    let relative = match manifest.get("bin") {
        Some(serde_json::Value::String(path)) => Some(path.as_str()),
        Some(serde_json::Value::Object(map)) => map.get(bin).and_then(|v| v.as_str()),
        _ => None,
    }
    .ok_or_else(|| {
        SetupError::Incomplete(format!("{} names no bin {bin}", manifest_path.display()))
    })?;
    let version = manifest
        .get("version")
        .and_then(|v| v.as_str())
        .unwrap_or("unknown")
        .to_owned();
    let entry = root.join(relative);
    if !entry.exists() {
        return Err(SetupError::Incomplete(format!(
            "{} is missing; run manifold-bench setup --force",
            entry.display()
        )));
    }
    Ok((entry, version))
}

/// Installs the Python gateway when missing or stale (`force`: always; `install` false: never,
/// a missing install is an error), and says where it is.
pub fn ensure_python(
    cache: &Path,
    force: bool,
    install: bool,
) -> Result<PythonContender, SetupError> {
    let _lock = lock(cache)?;
    let venv = cache.join("venv");
    let want = python_stamp()?;
    let stamp = venv.join(STAMP);
    let stale = force || !stamp_is(&stamp, &want);
    if stale && !install {
        return Err(SetupError::Incomplete(format!(
            "the Python contender in {} is missing or stale; run manifold-bench setup",
            venv.display()
        )));
    }
    if stale {
        eprintln!("manifold-bench setup: creating {} ...", venv.display());
        if venv.exists() {
            std::fs::remove_dir_all(&venv)
                .map_err(io(format!("could not remove the old {}", venv.display())))?;
        }
        let requirements = cache.join("requirements.txt");
        std::fs::write(&requirements, REQUIREMENTS)
            .map_err(io("could not write requirements.txt"))?;
        run(
            Command::new(python()).arg("-m").arg("venv").arg(&venv),
            PYTHON_HINT,
        )?;
        run(
            Command::new(venv.join("bin").join("pip"))
                .args(["install", "--disable-pip-version-check", "-q", "-r"])
                .arg(&requirements),
            "check that PyPI is reachable, then run manifold-bench setup again",
        )?;
        std::fs::write(&stamp, &want)
            .map_err(io(format!("could not write {}", stamp.display())))?;
    }
    let mcp_proxy = venv.join("bin").join("mcp-proxy");
    if !mcp_proxy.exists() {
        return Err(SetupError::Incomplete(format!(
            "{} is missing; run manifold-bench setup --force",
            mcp_proxy.display()
        )));
    }
    Ok(PythonContender {
        mcp_proxy,
        version: installed_python_version(&venv, "mcp_proxy").unwrap_or_else(|| "unknown".into()),
    })
}

/// The version of a package in a venv, from its `.dist-info` directory name.
fn installed_python_version(venv: &Path, package: &str) -> Option<String> {
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    for python_dir in lib.flatten() {
        let Ok(entries) = std::fs::read_dir(python_dir.path().join("site-packages")) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(version) = name
                .strip_prefix(&format!("{package}-"))
                .and_then(|rest| rest.strip_suffix(".dist-info"))
            {
                return Some(version.to_owned());
            }
        }
    }
    None
}
