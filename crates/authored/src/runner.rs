//! Runs one call of an authored tool in the sandbox: the code read-only, the tool's own
//! workspace writable, no network, the arguments as JSON on stdin, stdout and stderr read to a
//! cap. A timeout, or the caller dropping the call (cancellation, a closed stream), kills the
//! whole process tree: the child is killed on drop and its cgroup kills what it forked.
//!
//! Dependencies are installed here too, once per (language, dependency set), by the language's
//! own installer in a sandbox whose only way out is the egress proxy, open to the package
//! registries alone.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use manifold_gateway::hosted::Progress;
use manifold_sandbox::{Control, Network, SandboxSpec};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::definition::{Language, ToolDefinition};
use crate::dependencies::{self, Dependency};

/// Most stdout a call keeps; the rest is read and dropped, and the result says so.
pub const MAX_STDOUT_BYTES: usize = 1024 * 1024;
/// Most stderr a call keeps (the last lines matter less than the first for a tool error).
pub const MAX_STDERR_BYTES: usize = 64 * 1024;
/// How long one dependency install may take.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
/// How often an install tells the client it is still going.
pub const INSTALL_PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// Installer output lines a failed install quotes.
pub const INSTALL_ERROR_LINES: usize = 20;
/// Where programs are looked up for a tool (the interpreters and what `sh` code calls).
pub const TOOL_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Memory a call may use.
pub const TOOL_MEMORY: u64 = 512 * 1024 * 1024;
/// Processes a call may hold at once.
pub const TOOL_PIDS: u64 = 64;
/// Hosts a dependency install may reach: PyPI and npm.
pub const REGISTRY_HOSTS: &[&str] = &["pypi.org", "files.pythonhosted.org", "registry.npmjs.org"];

/// pip's flags for an install into a directory of its own (the directory follows).
const PIP_INSTALL: &[&str] = &[
    "-m",
    "pip",
    "install",
    "--no-input",
    "--disable-pip-version-check",
    "--no-cache-dir",
    "--quiet",
    "--target",
];
/// npm's, with no lifecycle scripts run (the directory follows).
const NPM_INSTALL: &[&str] = &[
    "install",
    "--no-audit",
    "--no-fund",
    "--no-save",
    "--no-package-lock",
    "--ignore-scripts",
    "--prefix",
];

/// Variables an install takes from the gateway's environment, so that it trusts what the host
/// trusts (a company's TLS-inspecting proxy CA) and uses the host's registry mirrors.
pub const INSTALL_ENV_FROM_HOST: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
    "npm_config_cafile",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "npm_config_registry",
];

/// The host of an index URL (`https://mirror.example:8443/simple` → `mirror.example`).
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host.split(':').next()?;
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub stdout: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr: Vec<u8>,
    /// `None` when killed by a signal (the timeout's kill included).
    pub exit: Option<i32>,
    pub timed_out: bool,
}

/// Why a call could not run at all (a tool error naming it).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "the sandbox for authored tools could not be built: {0}; run `manifold doctor` to see what this host lacks"
    )]
    Sandbox(#[from] manifold_sandbox::SandboxError),
    #[error("cannot prepare {path}: {source}")]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the {language} interpreter {program:?} was not found on {TOOL_PATH}; install it")]
    NoInterpreter {
        language: &'static str,
        program: &'static str,
    },
    #[error("installing the dependencies failed: {0}")]
    Install(String),
    #[error("the tool's process failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs authored tools under one data directory.
#[derive(Debug, Clone)]
pub struct Runner {
    launcher: PathBuf,
    /// `<data_dir>/authored`: `code/`, `tools/<name>/`, `deps/`, `install/`.
    root: PathBuf,
    /// One install of a dependency set at a time.
    installing: Arc<tokio::sync::Mutex<()>>,
}

fn prepare(path: &Path) -> Result<(), RunError> {
    std::fs::create_dir_all(path).map_err(|source| RunError::Prepare {
        path: path.to_owned(),
        source,
    })?;
    // A root gateway runs sandboxed code as an unprivileged uid: hand it what it may write.
    if nix::unistd::geteuid().is_root() {
        let (uid, gid) = manifold_sandbox::spec::DEFAULT_ROOT_RUN_AS;
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .map_err(|e| RunError::Prepare {
            path: path.to_owned(),
            source: e.into(),
        })?;
    }
    Ok(())
}

fn interpreter(language: Language) -> (&'static str, &'static str) {
    match language {
        Language::Python => ("python3", "python"),
        Language::Node => ("node", "node"),
        Language::Sh => ("sh", "sh"),
    }
}

fn find_program(program: &'static str, language: &'static str) -> Result<PathBuf, RunError> {
    TOOL_PATH
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
        .ok_or(RunError::NoInterpreter { language, program })
}

async fn read_capped(mut from: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(buf.get(..n.min(room)).unwrap_or_default());
                truncated |= n > room;
            }
        }
    }
    (kept, truncated)
}

impl Runner {
    pub fn new(launcher: PathBuf, root: PathBuf) -> Runner {
        Runner {
            launcher,
            root,
            installing: Arc::default(),
        }
    }

    /// The directory a tool's calls may write (`/workspace` inside).
    pub fn workspace_of(&self, tool: &str) -> PathBuf {
        self.root.join("tools").join(tool).join("workspace")
    }

    /// A strict sandbox whose workspace, output and home live under `base`.
    fn spec(&self, base: &Path, network: Network) -> Result<SandboxSpec, RunError> {
        let (workspace, output, home) = (
            base.join("workspace"),
            base.join("output"),
            base.join("home"),
        );
        for dir in [&workspace, &output, &home] {
            prepare(dir)?;
        }
        let mut spec = SandboxSpec::new(workspace, output, home);
        spec.network = network;
        spec.memory = TOOL_MEMORY;
        spec.pids = TOOL_PIDS;
        // Strict: a tool runs with these, or not at all.
        spec.require = vec![Control::Filesystem, Control::Network, Control::TreeKill];
        Ok(spec)
    }

    /// Builds the sandboxed command for `program args` with the documented environment.
    fn command(
        &self,
        mut spec: SandboxSpec,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
    ) -> Result<manifold_sandbox::SandboxedCommand, RunError> {
        let program_text = program.to_string_lossy().into_owned();
        let lookup = manifold_sandbox::Lookup {
            path: Some(TOOL_PATH.to_owned()),
            cwd: PathBuf::from("/"),
            home: None,
        };
        let exposure = manifold_sandbox::expose_command(&spec, &program_text, args, &lookup);
        spec.read_only.extend(exposure.read_only);
        let mut command =
            manifold_sandbox::SandboxedCommand::new(&self.launcher, &spec, &program_text, args)?;
        let cmd = command.command_mut();
        cmd.env_clear()
            .env("PATH", TOOL_PATH)
            .env("HOME", "/home/sandbox")
            .env("TMPDIR", "/tmp")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        if spec.network == Network::Allow {
            for (k, v) in manifold_sandbox::spec::PROXY_ENV {
                cmd.env(k, v);
            }
        }
        Ok(command)
    }

    /// Writes the code where the sandbox reads it: one file per (code, dependency dir), never
    /// changed. A node tool's dependencies are linked beside it as `node_modules`, where both
    /// `import` and `require` look.
    fn code_dir(&self, def: &ToolDefinition, deps: Option<&Path>) -> Result<PathBuf, RunError> {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(def.code.as_bytes());
        if let Some(deps) = deps {
            hasher.update(b"\0");
            hasher.update(deps.as_os_str().as_encoded_bytes());
        }
        let digest = hasher.finalize();
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let dir = self.root.join("code").join(hex);
        let file = dir.join(def.language.script_name());
        if !file.is_file() {
            std::fs::create_dir_all(&dir).map_err(|source| RunError::Prepare {
                path: dir.clone(),
                source,
            })?;
            let partial = dir.join(format!("{}.partial", def.language.script_name()));
            std::fs::write(&partial, &def.code)
                .and_then(|()| std::fs::rename(&partial, &file))
                .map_err(|source| RunError::Prepare {
                    path: file.clone(),
                    source,
                })?;
        }
        let link = dir.join("node_modules");
        if let (Language::Node, Some(deps)) = (def.language, deps)
            && !link.exists()
        {
            std::os::unix::fs::symlink(deps.join("node_modules"), &link).map_err(|source| {
                RunError::Prepare {
                    path: link.clone(),
                    source,
                }
            })?;
        }
        Ok(dir)
    }

    /// One call: installs what the tool depends on (once), then runs it with `arguments` on
    /// stdin until it exits or `timeout_ms` passes.
    pub async fn run(
        &self,
        def: &ToolDefinition,
        version: i64,
        arguments: &serde_json::Value,
        progress: &Progress,
    ) -> Result<Run, RunError> {
        let deps = def.parsed_dependencies();
        let deps_dir = if deps.is_empty() {
            None
        } else {
            Some(self.install(def.language, &deps, progress).await?)
        };
        let code = self.code_dir(def, deps_dir.as_deref())?;
        let (program, language) = interpreter(def.language);
        let program = find_program(program, language)?;
        let mut spec = self.spec(&self.root.join("tools").join(&def.name), Network::None)?;
        spec.read_only.push(code.clone());
        let mut env = vec![
            ("MANIFOLD_TOOL_NAME", def.name.clone()),
            ("MANIFOLD_TOOL_VERSION", version.to_string()),
        ];
        if let Some(dir) = &deps_dir {
            spec.read_only.push(dir.clone());
            match def.language {
                Language::Python => env.push(("PYTHONPATH", dir.display().to_string())),
                Language::Node => {
                    env.push(("NODE_PATH", dir.join("node_modules").display().to_string()));
                }
                Language::Sh => {}
            }
        }
        let script = code.join(def.language.script_name()).display().to_string();
        let command = self.command(spec, &program, &[script], &env)?;
        let mut started = command.spawn_with(|cmd| {
            let mut cmd = tokio::process::Command::from(cmd);
            cmd.kill_on_drop(true);
            cmd.spawn()
        })?;
        // Held until the call ends: dropping it kills every process left in the tool's cgroup.
        let _cgroup = started.cgroup.take();
        let mut child = started.child;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(RunError::Io(std::io::Error::other(
                "the tool's pipes were not set up",
            )));
        };
        let input = arguments.to_string();
        let feed = async move {
            // A tool that never reads its stdin closes it early: not an error.
            let _ = stdin.write_all(input.as_bytes()).await;
            let _ = stdin.shutdown().await;
        };
        let run = async {
            let ((out, truncated), (err, _), (), status) = tokio::join!(
                read_capped(stdout, MAX_STDOUT_BYTES),
                read_capped(stderr, MAX_STDERR_BYTES),
                feed,
                child.wait()
            );
            (out, truncated, err, status)
        };
        match tokio::time::timeout(Duration::from_millis(def.timeout_ms), run).await {
            Ok((stdout, stdout_truncated, stderr, status)) => Ok(Run {
                stdout,
                stdout_truncated,
                stderr,
                exit: status?.code(),
                timed_out: false,
            }),
            // Dropping the run dropped the child (killed) and `_cgroup` kills the rest.
            Err(_) => Ok(Run {
                stdout: Vec::new(),
                stdout_truncated: false,
                stderr: Vec::new(),
                exit: None,
                timed_out: true,
            }),
        }
    }

    /// Installs `deps` into their cache dir unless an earlier install did; the dir to read.
    #[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
    pub async fn install(
        &self,
        language: Language,
        deps: &[Dependency],
        progress: &Progress,
    ) -> Result<PathBuf, RunError> {
        let dir = dependencies::cache_dir(&self.root.join("deps"), language, deps);
        if dir.join(".installed").is_file() {
            return Ok(dir);
        }
        let _one_at_a_time = self.installing.lock().await;
        if dir.join(".installed").is_file() {
            return Ok(dir);
        }
        let specs: Vec<String> = deps.iter().map(|d| d.spec(language)).collect();
        progress(format!("installing {} for the tool", specs.join(" ")));
        let partial = dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        prepare(&partial)?;
        // Each installer's flags, then the target directory, then the specs.
        let (program, flags): (PathBuf, &[&str]) = match language {
            Language::Python => (find_program("python3", "python")?, PIP_INSTALL),
            Language::Node => (find_program("npm", "node")?, NPM_INSTALL),
            Language::Sh => return Ok(dir),
        };
        let args: Vec<String> = flags
            .iter()
            .map(|s| (*s).to_owned())
            .chain([partial.display().to_string()])
            .chain(specs.iter().cloned())
            .collect();
        let mut spec = self.spec(&self.root.join("install"), Network::Allow)?;
        spec.read_write.push(partial.clone());
        spec.allow_hosts = REGISTRY_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        let mut env = vec![
            ("npm_config_cache", "/home/sandbox/.npm".to_owned()),
            ("npm_config_update_notifier", "false".to_owned()),
        ];
        for name in INSTALL_ENV_FROM_HOST {
            let Ok(value) = std::env::var(name) else {
                continue;
            };
            if name.ends_with("URL") || name.ends_with("registry") {
                spec.allow_hosts
                    .extend(value.split_whitespace().filter_map(url_host));
            } else if Path::new(&value).exists()
                && !value.starts_with("/usr/")
                && !value.starts_with("/etc/")
            {
                // /usr and the /etc entries a sandbox sees are there already.
                spec.read_only.push(PathBuf::from(&value));
            }
            env.push((name, value));
        }
        spec.allow_hosts.sort();
        spec.allow_hosts.dedup();
        let command = self.command(spec.clone(), &program, &args, &env)?;
        let mut started = command.spawn_with(|cmd| {
            let mut cmd = tokio::process::Command::from(cmd);
            cmd.kill_on_drop(true);
            cmd.spawn()
        })?;
        let _cgroup = started.cgroup.take();
        let _egress = match started.egress_listener.take() {
            Some(listener) => Some(serve_egress(&spec, listener)?),
            None => None,
        };
        let mut child = started.child;
        drop(child.stdin.take());
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(RunError::Io(std::io::Error::other(
                "the installer's pipes were not set up",
            )));
        };
        let waited = async {
            tokio::join!(
                read_capped(stdout, MAX_STDERR_BYTES),
                read_capped(stderr, MAX_STDERR_BYTES),
                child.wait()
            )
        };
        tokio::pin!(waited);
        let mut ticks = tokio::time::interval(INSTALL_PROGRESS_EVERY);
        ticks.tick().await;
        let deadline = tokio::time::sleep(INSTALL_TIMEOUT);
        tokio::pin!(deadline);
        let began = std::time::Instant::now();
        let ((out, _), (err, _), status) = loop {
            tokio::select! {
                done = &mut waited => break done,
                _ = ticks.tick() => progress(format!(
                    "still installing {} ({} s)",
                    specs.join(" "),
                    began.elapsed().as_secs()
                )),
                () = &mut deadline => {
                    return Err(RunError::Install(format!(
                        "{} did not finish within {} s",
                        specs.join(" "),
                        INSTALL_TIMEOUT.as_secs()
                    )));
                }
            }
        };
        let status = status?;
        if !status.success() {
            let text = String::from_utf8_lossy(&err).into_owned() + &String::from_utf8_lossy(&out);
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = lines
                .get(lines.len().saturating_sub(INSTALL_ERROR_LINES)..)
                .unwrap_or_default()
                .join("\n");
            return Err(RunError::Install(format!(
                "{} exited with {status}:\n{tail}",
                program.display()
            )));
        }
        std::fs::write(partial.join(".installed"), specs.join("\n"))
            .and_then(|()| std::fs::rename(&partial, &dir))
            .map_err(|source| RunError::Prepare {
                path: dir.clone(),
                source,
            })?;
        progress(format!("installed {}", specs.join(" ")));
        Ok(dir)
    }
}

/// The egress proxy of one install, open to the registries only; stops when dropped.
struct EgressTask(tokio::task::AbortHandle);

impl Drop for EgressTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn serve_egress(
    spec: &SandboxSpec,
    listener: std::net::TcpListener,
) -> Result<EgressTask, RunError> {
    let policy = manifold_egress::Policy::new(&spec.allow_hosts, &spec.allow_private)
        .map_err(|e| RunError::Install(format!("the registry allow-list: {e}")))?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let task = tokio::spawn(manifold_egress::serve(
        listener,
        manifold_egress::Egress::new("authored-tool-install", policy),
    ));
    Ok(EgressTask(task.abort_handle()))
}

#[cfg(test)]
mod tests {
    use super::{read_capped, url_host};

    #[tokio::test]
    async fn output_is_read_to_the_end_and_kept_to_its_cap() {
        let big = vec![b'x'; 100_000];
        let (kept, truncated) = read_capped(&big[..], 1000).await;
        assert_eq!((kept.len(), truncated), (1000, true));
        let (kept, truncated) = read_capped(&b"short"[..], super::MAX_STDERR_BYTES).await;
        assert_eq!((kept.as_slice(), truncated), (&b"short"[..], false));
    }

    #[test]
    fn index_urls_give_their_hosts() {
        assert_eq!(
            url_host("https://mirror.example:8443/simple").as_deref(),
            Some("mirror.example")
        );
        assert_eq!(
            url_host("https://u:p@Pypi.Internal/x").as_deref(),
            Some("pypi.internal")
        );
        assert_eq!(url_host("not a url"), None);
    }
}
