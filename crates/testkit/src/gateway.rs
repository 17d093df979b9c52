//! Why: every end-to-end test of the binary starts `manifold serve` the same way (a configuration
//! in a scratch directory, `--config`, the data and XDG directories inside it, stderr to a log
//! file, the bound URL read from the first line of stdout) and each test file used to carry its
//! own copy. One definition here; the process is killed when its owner drops it, even on panic.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::child::ChildGuard;
use crate::error::TestkitError;

/// The log file a gateway's stderr goes to unless [`ServeCommand::log`] names another.
pub const DEFAULT_SERVE_LOG: &str = "serve.log";
/// The configuration file [`ServeCommand::config_text`] writes into the directory.
pub const CONFIG_FILE: &str = "manifold.toml";
/// How long [`ServeCommand::start`] waits for the URL before calling the gateway hung (a hang
/// guard only: a debug build starts in well under a second, and its servers start afterwards).
pub const SERVE_START_HANG_GUARD: Duration = Duration::from_secs(120);
/// How often [`GatewayProcess::wait_for_exit`] and [`GatewayProcess::wait_for_log`] look again.
const POLL: Duration = Duration::from_millis(50);

/// `manifold serve`, about to start: `BINARY [GLOBAL...] serve [--config FILE] [ARGS...]` in
/// `dir`, with `XDG_DATA_HOME=dir/xdg`, `NO_COLOR=1`, no `RUST_LOG` (unless set with
/// [`env`](Self::env)), stdin closed and stderr written to `dir/serve.log`.
#[derive(Debug, Clone)]
pub struct ServeCommand {
    binary: PathBuf,
    dir: PathBuf,
    config: Option<PathBuf>,
    config_text: Option<String>,
    global_args: Vec<OsString>,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    log: String,
    append_log: bool,
    hang_guard: Duration,
}

impl ServeCommand {
    /// `binary serve` run in `dir` (the manifold crate's tests pass `env!("CARGO_BIN_EXE_manifold")`;
    /// other crates [`crate::workspace_binary`]`("manifold", "manifold")`).
    pub fn new(binary: impl AsRef<Path>, dir: impl AsRef<Path>) -> ServeCommand {
        ServeCommand {
            binary: binary.as_ref().to_path_buf(),
            dir: dir.as_ref().to_path_buf(),
            config: None,
            config_text: None,
            global_args: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            log: DEFAULT_SERVE_LOG.to_owned(),
            append_log: false,
            hang_guard: SERVE_START_HANG_GUARD,
        }
    }

    /// `--config PATH`, a file the test wrote.
    pub fn config(mut self, path: impl AsRef<Path>) -> ServeCommand {
        self.config = Some(path.as_ref().to_path_buf());
        self.config_text = None;
        self
    }

    /// Writes `text` to `dir/manifold.toml` when started, and passes `--config` that file.
    pub fn config_text(mut self, text: impl Into<String>) -> ServeCommand {
        self.config = Some(self.dir.join(CONFIG_FILE));
        self.config_text = Some(text.into());
        self
    }

    /// Arguments before `serve` (`-v`, `--log-format json`).
    pub fn global_args<I, S>(mut self, args: I) -> ServeCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.global_args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Arguments after `serve` (and after `--config FILE`).
    pub fn args<I, S>(mut self, args: I) -> ServeCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable for the gateway.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> ServeCommand {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Removes an environment variable from the gateway's environment.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> ServeCommand {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// The file (in the directory) the gateway's stderr goes to, emptied at the start.
    pub fn log(mut self, file_name: &str) -> ServeCommand {
        file_name.clone_into(&mut self.log);
        self
    }

    /// Keeps what earlier starts wrote to the log file (a gateway restarted in the same directory)
    /// instead of emptying it.
    pub fn append_log(mut self) -> ServeCommand {
        self.append_log = true;
        self
    }

    /// How long [`start`](Self::start) waits for the URL ([`SERVE_START_HANG_GUARD`] unless set).
    pub fn start_hang_guard(mut self, hang_guard: Duration) -> ServeCommand {
        self.hang_guard = hang_guard;
        self
    }

    /// Starts the gateway and returns once it printed its URL. A gateway that exits first, prints
    /// something other than an `http://127.0.0.1:PORT/mcp` URL or prints nothing within the hang
    /// guard is an error quoting its log (and is killed).
    pub fn start(self) -> Result<GatewayProcess, TestkitError> {
        let io = |what: &str, path: &Path, source: std::io::Error| TestkitError::Io {
            what: format!("{what} {}", path.display()),
            source,
        };
        self.write_config()?;
        let log = self.dir.join(&self.log);
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(self.append_log)
            .truncate(!self.append_log)
            .open(&log)
            .map_err(|e| io("could not open", &log, e))?;
        let mut command = self.command(["serve"]);
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut guard = ChildGuard::spawn(command)?;
        let Some(stdout) = guard.child_mut().stdout.take() else {
            return Err(TestkitError::GatewayStart {
                printed: String::new(),
                log: "(stdout was not captured)".to_owned(),
            });
        };
        // Read on a thread, so that a gateway that never prints is given up at the hang guard.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = String::new();
            let read = stdout.read_line(&mut line);
            let _ = tx.send((read.map(|_| line), stdout));
        });
        let Ok((line, stdout)) = rx.recv_timeout(self.hang_guard) else {
            return Err(TestkitError::GatewayStart {
                printed: format!("nothing within {:?}", self.hang_guard),
                log: std::fs::read_to_string(&log).unwrap_or_default(),
            });
        };
        let line = line.map_err(|e| io("could not read the stdout of", &self.binary, e))?;
        let url = line.trim().to_owned();
        if !(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp")) {
            return Err(TestkitError::GatewayStart {
                printed: url,
                log: std::fs::read_to_string(&log).unwrap_or_default(),
            });
        }
        Ok(GatewayProcess {
            guard,
            _stdout: stdout,
            base: url.trim_end_matches("/mcp").to_owned(),
            url,
            dir: self.dir,
            log,
        })
    }
}

impl ServeCommand {
    /// Another command of the same binary, run to completion in the same directory and
    /// environment and with the same `--config` (none when none is set): `BINARY [global_args]
    /// ARGS [--config FILE]`, for the commands that share the gateway's configuration (`keys`,
    /// `pins`, `approvals`, `audit`). Writes the configuration first when it is given as text.
    pub fn run<I, S>(&self, args: I) -> Result<std::process::Output, TestkitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.write_config()?;
        let mut command = self.command(args);
        command.stdin(Stdio::null());
        command.output().map_err(|source| TestkitError::Spawn {
            program: self.binary.display().to_string(),
            source,
        })
    }

    /// `keys create NAME ARGS` (`--groups`, `--scopes`): the key it printed once. A failure is an
    /// error quoting its stderr.
    pub fn create_key(&self, name: &str, args: &[&str]) -> Result<String, TestkitError> {
        let mut argv = vec!["keys", "create", name];
        argv.extend_from_slice(args);
        let out = self.run(argv)?;
        if !out.status.success() {
            return Err(TestkitError::CommandFailed {
                command: format!("manifold keys create {name} {}", args.join(" ")),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// `audit search FILTERS --json`, run again every 200 ms until its output holds `wanted`
    /// (the trail is written off the request path, so a row lags its answer): that output. Past
    /// `guard`, a `Hung` error quoting the last output and its stderr.
    pub fn audit_search_until(
        &self,
        filters: &[&str],
        wanted: &str,
        guard: Duration,
    ) -> Result<String, TestkitError> {
        let started = Instant::now();
        loop {
            let mut argv = vec!["audit", "search"];
            argv.extend_from_slice(filters);
            argv.push("--json");
            let out = self.run(argv)?;
            let rows = String::from_utf8_lossy(&out.stdout).into_owned();
            if rows.contains(wanted) {
                return Ok(rows);
            }
            if started.elapsed() >= guard {
                return Err(TestkitError::Hung {
                    what: format!(
                        "an audit row holding {wanted:?} (audit search {}: {rows}{})",
                        filters.join(" "),
                        String::from_utf8_lossy(&out.stderr)
                    ),
                    timeout: guard,
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `BINARY [global_args] ARGS [--config FILE]` in the directory, with the environment.
    fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new(&self.binary);
        command.args(&self.global_args).args(args);
        if let Some(config) = &self.config {
            command.arg("--config").arg(config);
        }
        command
            .current_dir(&self.dir)
            .env("XDG_DATA_HOME", self.dir.join("xdg"))
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG");
        for (key, value) in &self.env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        command
    }

    fn write_config(&self) -> Result<(), TestkitError> {
        if let (Some(path), Some(text)) = (&self.config, &self.config_text) {
            std::fs::write(path, text).map_err(|source| TestkitError::Io {
                what: format!("could not write {}", path.display()),
                source,
            })?;
        }
        Ok(())
    }
}

/// A running `manifold serve`; dropping it kills it (and its process group) and reaps it.
#[derive(Debug)]
pub struct GatewayProcess {
    guard: ChildGuard,
    /// Kept open: serve's stdout must stay writable.
    _stdout: BufReader<ChildStdout>,
    url: String,
    base: String,
    dir: PathBuf,
    log: PathBuf,
}

impl GatewayProcess {
    /// `manifold serve --config DIR/manifold.toml` with `config` written there, started in `dir`.
    pub fn start(
        binary: impl AsRef<Path>,
        dir: impl AsRef<Path>,
        config: &str,
    ) -> Result<GatewayProcess, TestkitError> {
        ServeCommand::new(binary, dir).config_text(config).start()
    }

    /// The MCP endpoint it printed: `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `http://127.0.0.1:PORT`, for its other endpoints.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `base` followed by `path` (which starts with `/`).
    pub fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `127.0.0.1:PORT`.
    pub fn authority(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// The directory it runs in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file its stderr goes to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// What it wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// Sends `signal` to the gateway process alone (not its group).
    pub fn signal(&self, signal: Signal) -> Result<(), TestkitError> {
        let pid = i32::try_from(self.pid()).map_err(|_| TestkitError::Signal {
            pid: self.pid(),
            errno: nix::errno::Errno::EINVAL,
        })?;
        kill(Pid::from_raw(pid), signal).map_err(|errno| TestkitError::Signal {
            pid: self.pid(),
            errno,
        })
    }

    /// Its exit status if it has exited, without blocking.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, TestkitError> {
        self.guard.try_wait()
    }

    /// Waits until it exits; `hang_guard` only stops a test that would otherwise wait forever.
    pub fn wait_for_exit(&mut self, hang_guard: Duration) -> Result<ExitStatus, TestkitError> {
        let deadline = Instant::now() + hang_guard;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(TestkitError::Hung {
                    what: format!("manifold serve (pid {}) to exit", self.pid()),
                    timeout: hang_guard,
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until its log holds `needle` at least `times` times.
    pub fn wait_for_log(
        &self,
        needle: &str,
        times: usize,
        hang_guard: Duration,
    ) -> Result<(), TestkitError> {
        let deadline = Instant::now() + hang_guard;
        while self.log().matches(needle).count() < times {
            if Instant::now() >= deadline {
                return Err(TestkitError::Hung {
                    what: format!(
                        "{times} log line(s) with {needle:?}; the log:\n{}",
                        self.log()
                    ),
                    timeout: hang_guard,
                });
            }
            std::thread::sleep(POLL);
        }
        Ok(())
    }

    /// Kills it (SIGKILL to its group) and reaps it, returning its exit status.
    pub fn kill(self) -> Result<ExitStatus, TestkitError> {
        self.guard.kill()
    }
}
