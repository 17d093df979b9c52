//! Why: each contender is a different program started its own way in front of the same echo
//! server; this is the one place that knows how (command lines, configuration, readiness, the
//! exposed tool name) and which scenarios a contender cannot take part in, and why.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::child_process::{ChildProcess, free_port};
use crate::client::Endpoint;
use crate::setup::{NodeContenders, PythonContender};

/// How long a contender may take to come up before it is recorded as failed.
const START_HANG_GUARD: Duration = Duration::from_secs(90);

/// Who is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Kind {
    /// The client talking to the echo server itself: the physical limit.
    Direct,
    /// The workspace's `manifold serve`.
    Manifold,
    /// npm `supergateway` (stdio -> Streamable HTTP, `--stateful`).
    Supergateway,
    /// npm `mcp-proxy`.
    #[value(name = "mcp-proxy-npm")]
    McpProxyNpm,
    /// PyPI `mcp-proxy`.
    #[value(name = "mcp-proxy-py")]
    McpProxyPy,
}

/// Every contender, in table order.
pub const ALL: [Kind; 5] = [
    Kind::Direct,
    Kind::Manifold,
    Kind::Supergateway,
    Kind::McpProxyNpm,
    Kind::McpProxyPy,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Direct => "direct",
            Kind::Manifold => "manifold",
            Kind::Supergateway => "supergateway",
            Kind::McpProxyNpm => "mcp-proxy-npm",
            Kind::McpProxyPy => "mcp-proxy-py",
        }
    }

    /// A stdio-to-HTTP bridge installed by `manifold-bench setup`.
    pub fn is_bridge(self) -> bool {
        matches!(
            self,
            Kind::Supergateway | Kind::McpProxyNpm | Kind::McpProxyPy
        )
    }
}

/// What a contender fronts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// One stdio echo server.
    Stdio,
    /// One Streamable HTTP echo server.
    Http,
    /// `servers` stdio echo servers of `tools` tools each.
    Many { servers: usize, tools: u32 },
}

impl Upstream {
    /// Why `kind` cannot front this upstream, if it cannot.
    pub fn unsupported_by(self, kind: Kind) -> Option<&'static str> {
        match (self, kind) {
            (Upstream::Http, k) if k.is_bridge() => Some(
                "a stdio-to-HTTP bridge: it cannot put an HTTP server behind its HTTP endpoint",
            ),
            (Upstream::Many { .. }, k) if k.is_bridge() => {
                Some("fronts one stdio server per process: it cannot aggregate several upstreams")
            }
            _ => None,
        }
    }
}

/// What starting contenders needs.
pub struct Launcher {
    pub manifold: PathBuf,
    pub echo: PathBuf,
    pub workdir: PathBuf,
    pub node: Option<Result<NodeContenders, String>>,
    pub python: Option<Result<PythonContender, String>>,
    /// Whether this manifold accepts `[telemetry] call_log = false` (older builds do not).
    manifold_call_log_setting: bool,
    /// Whether this build reads `[sandbox]` (builds before the sandbox have none to turn off).
    manifold_sandbox_setting: bool,
    /// Whether this manifold knows `[audit]` (older builds keep no audit trail).
    manifold_audit_setting: bool,
    /// Shared with launchers made by [`Launcher::with_echo`], so their files never collide.
    started: Arc<AtomicUsize>,
}

/// The configuration that turns Manifold's line per tool call off: every contender runs without
/// per-request logging (supergateway `--logLevel none`, mcp-proxy (PyPI) `--log-level WARNING`,
/// mcp-proxy (npm) logs none by default), so figures measure forwarding, not log formatting.
/// `[sandbox] profile = "off"` for every bench server (the default profile would sandbox them).
const UNSANDBOXED_DEFAULT: &str = "\n[sandbox]\nprofile = \"off\"\n";

const QUIET_CALL_LOG: &str = "\n[telemetry]\ncall_log = false\n";

/// A configuration that only names the audit trail's default, to ask a build whether it has one.
const AUDIT_PROBE: &str = "\n[audit]\nenabled = true\n";

/// Whether `manifold check` accepts `setting` (a configuration fragment without servers).
fn accepts_setting(manifold: &Path, workdir: &Path, name: &str, setting: &str) -> bool {
    let probe = workdir.join(format!("{name}-probe.toml"));
    // Its own data dir inside the run's work directory, so a check that opens the store creates
    // nothing outside it.
    let data_dir = workdir.join(format!("{name}-probe-data"));
    let text = format!(
        "[gateway]\ndata_dir = {}\n{setting}",
        toml_string(&data_dir.to_string_lossy())
    );
    if std::fs::write(&probe, text).is_err() {
        return false;
    }
    let accepted = std::process::Command::new(manifold)
        .arg("check")
        .arg(&probe)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let _ = std::fs::remove_file(&probe);
    let _ = std::fs::remove_dir_all(&data_dir);
    accepted
}

/// A contender that is up, and the processes it needs.
pub struct Contender {
    pub kind: Kind,
    pub endpoint: Endpoint,
    /// The echo tool's name as this contender exposes it.
    pub tool: String,
    gateway: ChildProcess,
    /// An HTTP echo server Manifold fronts (HTTP route only).
    upstream: Option<ChildProcess>,
}

impl Contender {
    /// The process whose CPU and memory count as the gateway's (the echo server itself for
    /// `direct`).
    pub fn gateway_pid(&self) -> u32 {
        self.gateway.pid()
    }

    /// Whether the gateway process has exited.
    pub fn has_exited(&mut self) -> bool {
        self.gateway.has_exited()
    }

    pub async fn stop(self) {
        self.gateway.stop().await;
        if let Some(upstream) = self.upstream {
            upstream.stop().await;
        }
    }
}

impl Launcher {
    pub fn new(
        manifold: PathBuf,
        echo: PathBuf,
        workdir: PathBuf,
        node: Option<Result<NodeContenders, String>>,
        python: Option<Result<PythonContender, String>>,
    ) -> Self {
        let manifold_call_log_setting =
            accepts_setting(&manifold, &workdir, "call-log", QUIET_CALL_LOG);
        let manifold_audit_setting = accepts_setting(&manifold, &workdir, "audit", AUDIT_PROBE);
        let manifold_sandbox_setting =
            accepts_setting(&manifold, &workdir, "sandbox", UNSANDBOXED_DEFAULT);
        Launcher {
            manifold,
            echo,
            workdir,
            node,
            python,
            manifold_call_log_setting,
            manifold_sandbox_setting,
            manifold_audit_setting,
            started: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A launcher for Manifold only that runs `echo` as its stdio server (the sandbox scenario's
    /// copy in a directory a sandboxed uid can reach), writing into the same work directory.
    pub fn with_echo(&self, echo: PathBuf) -> Launcher {
        Launcher {
            manifold: self.manifold.clone(),
            echo,
            workdir: self.workdir.clone(),
            node: None,
            python: None,
            manifold_call_log_setting: self.manifold_call_log_setting,
            manifold_sandbox_setting: self.manifold_sandbox_setting,
            manifold_audit_setting: self.manifold_audit_setting,
            started: Arc::clone(&self.started),
        }
    }

    fn next_file(&self, stem: &str, extension: &str) -> PathBuf {
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        self.workdir.join(format!("{stem}-{n}.{extension}"))
    }

    /// Starts `kind` in front of `upstream` and returns once it answers HTTP.
    pub async fn start(&self, kind: Kind, upstream: Upstream) -> Result<Contender, String> {
        if let Some(reason) = upstream.unsupported_by(kind) {
            return Err(reason.to_owned());
        }
        match kind {
            Kind::Direct => {
                let tools = match upstream {
                    Upstream::Many { servers, tools } => u32::try_from(servers)
                        .unwrap_or(u32::MAX)
                        .saturating_mul(tools),
                    _ => 1,
                };
                let (process, endpoint) = self.echo_http(tools).await?;
                Ok(Contender {
                    kind,
                    endpoint,
                    tool: "echo".to_owned(),
                    gateway: process,
                    upstream: None,
                })
            }
            Kind::Manifold => self.manifold(upstream).await,
            Kind::Supergateway => self.supergateway().await,
            Kind::McpProxyNpm => self.mcp_proxy_npm().await,
            Kind::McpProxyPy => self.mcp_proxy_py().await,
        }
    }

    /// Spawns an HTTP echo server (not waited for) and returns it with the moment it was spawned.
    pub fn spawn_echo_http(&self, tools: u32) -> Result<ChildProcess, String> {
        let log = self.next_file("echo-http", "log");
        ChildProcess::spawn(
            "manifold-echo http",
            &self.echo,
            &[
                "http".to_owned(),
                "--listen".to_owned(),
                "127.0.0.1:0".to_owned(),
                "--tools".to_owned(),
                tools.to_string(),
            ],
            &[],
            &log,
        )
    }

    async fn echo_http(&self, tools: u32) -> Result<(ChildProcess, Endpoint), String> {
        let mut process = self.spawn_echo_http(tools)?;
        let url = process.first_stdout_line(START_HANG_GUARD).await?;
        let endpoint = Endpoint::parse(&url).map_err(|e| e.to_string())?;
        Ok((process, endpoint))
    }

    /// Writes Manifold's configuration for `upstream` and spawns `manifold serve` (not waited for).
    /// The audit trail is left at Manifold's default (on, best effort, SQLite in the data dir):
    /// the cross-gateway figures are what a user of the default gets.
    pub fn spawn_manifold(
        &self,
        upstream: Upstream,
        http_url: Option<&str>,
    ) -> Result<ChildProcess, String> {
        self.spawn_manifold_with(upstream, http_url, &self.workdir.join("manifold-data"), "")
    }

    /// `spawn_manifold` with its own `data_dir` and `extra` appended to the configuration (the
    /// audit scenario's `[audit]` and `[store]` sections). Manifolds running at the same time
    /// need different data dirs: a SQLite store belongs to one process.
    pub fn spawn_manifold_with(
        &self,
        upstream: Upstream,
        http_url: Option<&str>,
        data_dir: &Path,
        extra: &str,
    ) -> Result<ChildProcess, String> {
        self.spawn_manifold_in(upstream, http_url, data_dir, "", extra)
    }

    fn spawn_manifold_in(
        &self,
        upstream: Upstream,
        http_url: Option<&str>,
        data_dir: &Path,
        gateway_extra: &str,
        extra: &str,
    ) -> Result<ChildProcess, String> {
        let config =
            self.write_manifold_config_in(upstream, http_url, data_dir, gateway_extra, extra)?;
        let log = config.with_extension("log");
        ChildProcess::spawn(
            "manifold serve",
            &self.manifold,
            &serve_args(&config),
            &[],
            &log,
        )
    }

    /// Writes the configuration `spawn_manifold_with` starts Manifold with and returns its path,
    /// for a scenario that starts `manifold serve` itself (under valgrind, say).
    pub fn write_manifold_config(
        &self,
        upstream: Upstream,
        http_url: Option<&str>,
        data_dir: &Path,
        extra: &str,
    ) -> Result<PathBuf, String> {
        self.write_manifold_config_in(upstream, http_url, data_dir, "", extra)
    }

    /// `write_manifold_config` with `gateway_extra` (lines of `key = value`) inside the
    /// `[gateway]` table, which `extra` cannot reopen: TOML allows a table only once.
    fn write_manifold_config_in(
        &self,
        upstream: Upstream,
        http_url: Option<&str>,
        data_dir: &Path,
        gateway_extra: &str,
        extra: &str,
    ) -> Result<PathBuf, String> {
        let config = self.next_file("manifold", "toml");
        let mut text = format!(
            "# Written by manifold-bench for one run.\n[gateway]\ndata_dir = {}\n{gateway_extra}",
            toml_string(&data_dir.to_string_lossy())
        );
        if self.manifold_call_log_setting {
            text.push_str(QUIET_CALL_LOG);
        }
        // The other contenders run the echo unsandboxed, so the forwarding scenarios compare
        // like with like; the sandbox scenario writes each server's own profile over this.
        if self.manifold_sandbox_setting {
            text.push_str(UNSANDBOXED_DEFAULT);
        }
        let echo = toml_string(&self.echo.to_string_lossy());
        match (upstream, http_url) {
            (Upstream::Http, Some(url)) => {
                text.push_str(&format!("\n[servers.echo]\nurl = {}\n", toml_string(url)));
            }
            (Upstream::Many { servers, tools }, _) => {
                for index in 0..servers {
                    text.push_str(&format!(
                        "\n[servers.s{index:03}]\ncommand = {echo}\nargs = [\"stdio\", \"--tools\", \"{tools}\"]\n"
                    ));
                }
            }
            _ => {
                text.push_str(&format!(
                    "\n[servers.echo]\ncommand = {echo}\nargs = [\"stdio\"]\n"
                ));
            }
        }
        text.push_str(extra);
        std::fs::write(&config, text)
            .map_err(|e| format!("could not write {}: {e}", config.display()))?;
        Ok(config)
    }

    async fn manifold(&self, upstream: Upstream) -> Result<Contender, String> {
        self.manifold_with(upstream, &self.workdir.join("manifold-data"), "", "")
            .await
    }

    /// Manifold in front of one stdio echo server, with its own data dir and `extra`
    /// configuration (see [`Launcher::spawn_manifold_with`]); returns once it answers HTTP.
    pub async fn start_manifold_with(
        &self,
        data_dir: &Path,
        extra: &str,
    ) -> Result<Contender, String> {
        self.manifold_with(Upstream::Stdio, data_dir, "", extra)
            .await
    }

    /// `start_manifold_with` with `gateway_extra` inside `[gateway]` (the replicas scenario's
    /// shared `session_key`).
    pub async fn start_manifold_in(
        &self,
        data_dir: &Path,
        gateway_extra: &str,
        extra: &str,
    ) -> Result<Contender, String> {
        self.manifold_with(Upstream::Stdio, data_dir, gateway_extra, extra)
            .await
    }

    /// Whether this manifold has an audit trail (`[audit]`) to measure.
    pub fn manifold_has_audit_trail(&self) -> bool {
        self.manifold_audit_setting
    }

    async fn manifold_with(
        &self,
        upstream: Upstream,
        data_dir: &Path,
        gateway_extra: &str,
        extra: &str,
    ) -> Result<Contender, String> {
        let (upstream_process, url) = match upstream {
            Upstream::Http => {
                let (process, endpoint) = self.echo_http(1).await?;
                (Some(process), Some(endpoint.url().to_owned()))
            }
            _ => (None, None),
        };
        let mut gateway =
            self.spawn_manifold_in(upstream, url.as_deref(), data_dir, gateway_extra, extra)?;
        let url = gateway.first_stdout_line(START_HANG_GUARD).await?;
        let endpoint = Endpoint::parse(&url).map_err(|e| e.to_string())?;
        Ok(Contender {
            kind: Kind::Manifold,
            endpoint,
            tool: "echo__echo".to_owned(),
            gateway,
            upstream: upstream_process,
        })
    }

    fn node(&self) -> Result<&NodeContenders, String> {
        match &self.node {
            Some(Ok(node)) => Ok(node),
            Some(Err(e)) => Err(format!("setup failed: {e}")),
            None => Err("not installed (run manifold-bench setup)".to_owned()),
        }
    }

    async fn bridge(
        &self,
        kind: Kind,
        program: &Path,
        args: Vec<String>,
        port: u16,
    ) -> Result<Contender, String> {
        let log = self.next_file(kind.name(), "log");
        let mut gateway = ChildProcess::spawn(kind.name(), program, &args, &[], &log)?;
        gateway.wait_for_port(port, START_HANG_GUARD).await?;
        let endpoint =
            Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).map_err(|e| e.to_string())?;
        Ok(Contender {
            kind,
            endpoint,
            tool: "echo".to_owned(),
            gateway,
            upstream: None,
        })
    }

    async fn supergateway(&self) -> Result<Contender, String> {
        let node = self.node()?;
        let port = free_port()?;
        // Stateful: its stateless mode starts a new server process for every request.
        // supergateway runs the stdio command through a shell, hence the quoting.
        let args = vec![
            "--require".to_owned(),
            node.loopback_preload.to_string_lossy().into_owned(),
            node.supergateway.to_string_lossy().into_owned(),
            "--stdio".to_owned(),
            format!("{} stdio", shell_quote(&self.echo.to_string_lossy())),
            "--outputTransport".to_owned(),
            "streamableHttp".to_owned(),
            "--stateful".to_owned(),
            "--port".to_owned(),
            port.to_string(),
            "--logLevel".to_owned(),
            "none".to_owned(),
        ];
        self.bridge(Kind::Supergateway, Path::new("node"), args, port)
            .await
    }

    async fn mcp_proxy_npm(&self) -> Result<Contender, String> {
        let node = self.node()?;
        let port = free_port()?;
        let args = vec![
            node.mcp_proxy.to_string_lossy().into_owned(),
            "--host".to_owned(),
            "127.0.0.1".to_owned(),
            "--port".to_owned(),
            port.to_string(),
            "--server".to_owned(),
            "stream".to_owned(),
            "--".to_owned(),
            self.echo.to_string_lossy().into_owned(),
            "stdio".to_owned(),
        ];
        self.bridge(Kind::McpProxyNpm, Path::new("node"), args, port)
            .await
    }

    async fn mcp_proxy_py(&self) -> Result<Contender, String> {
        let python = match &self.python {
            Some(Ok(python)) => python,
            Some(Err(e)) => return Err(format!("setup failed: {e}")),
            None => return Err("not installed (run manifold-bench setup)".to_owned()),
        };
        let port = free_port()?;
        // WARNING: its default INFO level writes a log line per request, which no other
        // contender does.
        let args = vec![
            "--host".to_owned(),
            "127.0.0.1".to_owned(),
            "--port".to_owned(),
            port.to_string(),
            "--log-level".to_owned(),
            "WARNING".to_owned(),
            "--".to_owned(),
            self.echo.to_string_lossy().into_owned(),
            "stdio".to_owned(),
        ];
        self.bridge(Kind::McpProxyPy, &python.mcp_proxy, args, port)
            .await
    }

    /// The command line each contender runs with, for the report.
    pub fn describe(&self, kind: Kind) -> String {
        match kind {
            Kind::Direct => "manifold-echo http (the client talks to the echo server itself)".to_owned(),
            Kind::Manifold => {
                let call_log = if self.manifold_call_log_setting {
                    "with [telemetry] call_log = false"
                } else {
                    "this build has no call_log setting"
                };
                let audit = if self.manifold_audit_setting {
                    "[audit] left at its default: on, best effort, SQLite in data_dir"
                } else {
                    "this build keeps no audit trail"
                };
                format!("manifold serve --config <generated, {call_log}; {audit}> --listen 127.0.0.1:0")
            }
            Kind::Supergateway => "node supergateway --stdio 'manifold-echo stdio' --outputTransport streamableHttp --stateful --port P --logLevel none".to_owned(),
            Kind::McpProxyNpm => "node mcp-proxy --host 127.0.0.1 --port P --server stream -- manifold-echo stdio".to_owned(),
            Kind::McpProxyPy => "mcp-proxy --host 127.0.0.1 --port P --log-level WARNING -- manifold-echo stdio".to_owned(),
        }
    }
}

/// A TOML basic string whose `$` Manifold does not interpolate.
pub fn toml_string(text: &str) -> String {
    let escaped = text.replace('$', "$$");
    serde_json::to_string(&escaped).unwrap_or_else(|_| "\"\"".to_owned())
}

/// `text` as one POSIX shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The arguments of `manifold serve` on a generated configuration, on a free loopback port.
pub fn serve_args(config: &Path) -> Vec<String> {
    vec![
        "serve".to_owned(),
        "--config".to_owned(),
        config.to_string_lossy().into_owned(),
        "--listen".to_owned(),
        "127.0.0.1:0".to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn paths_are_quoted_for_toml_and_the_shell() {
        assert_eq!(toml_string("/a/$b\"c"), r#""/a/$$b\"c""#);
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }

    #[test]
    fn bridges_sit_out_http_upstreams_and_aggregation_only() {
        for kind in ALL {
            assert!(Upstream::Stdio.unsupported_by(kind).is_none());
            let many = Upstream::Many {
                servers: 2,
                tools: 1,
            };
            assert_eq!(
                Upstream::Http.unsupported_by(kind).is_some(),
                kind.is_bridge()
            );
            assert_eq!(many.unsupported_by(kind).is_some(), kind.is_bridge());
        }
    }
}
