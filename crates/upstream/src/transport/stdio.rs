//! Upstream servers run as child processes speaking newline-delimited JSON on stdin/stdout.
//!
//! A child starts from an empty environment (plus an allowlist and its own variables), in its own
//! process group so that its whole tree can be signalled, with stderr read into the log under the
//! server's name and never mixed into the protocol stream. Shutdown escalates from closing stdin to
//! SIGTERM to SIGKILL of the group, and always reaps.
//!
//! With a sandbox (`StdioSandbox::On`) the child is spawned through the `manifold-sandbox-exec`
//! launcher beside the running binary; what each control really enforced is logged at start and
//! kept on the transport (`Transport::sandbox`) for health and metrics.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use manifold_sandbox::{Control, SandboxError, State};
use manifold_wire::line::{DEFAULT_MAX_LINE, Frame, LineFramer, encode_line};
use manifold_wire::{FaultKind, Id, Message, Revision};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Inbound, InboundRx, InboundTx, Transport, inbound_channel, stderr_cause};
use crate::connection::lock;
use crate::error::UpstreamError;

/// The sandbox's report types, for the gateway's health and metrics without another dependency.
pub use manifold_sandbox::{
    Control as SandboxControl, Enforcement as SandboxEnforcement, Network as SandboxNetwork,
    Report as SandboxReport, State as SandboxState,
};

/// Parent variables a child sees unless the configuration says otherwise: where it runs, its
/// locale, and which certificate authorities to trust (a host whose TLS goes through its own CA,
/// a company proxy's, names it in these; without them `uvx`, pip, curl and node fail with an
/// unknown issuer). None of them holds a secret.
pub const DEFAULT_ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TERM",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
];
/// Non-JSON lines tolerated on stdout before the first message (a banner); more closes the link.
pub const MAX_BANNER_LINES: usize = 100;
/// Longest stderr line logged whole; longer lines are cut.
pub const MAX_STDERR_LINE: usize = 8 * 1024;
/// stderr lines logged per second; the rest are counted and summarised.
pub const STDERR_LINES_PER_SECOND: u32 = 100;
/// stderr lines remembered for error messages and health.
pub const STDERR_TAIL_LINES: usize = 20;
/// Messages that may wait to be written to stdin.
pub const OUTBOUND_QUEUE: usize = 1024;
/// Bytes gathered from that queue into one write to the child's stdin (a batch stops growing
/// once it reaches this; a single longer line still goes out whole).
pub const MAX_BATCHED_WRITE: usize = 256 * 1024;
/// How long a child gets to exit after its stdin closes.
pub const STDIN_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How long a child's group gets to exit after SIGTERM.
pub const SIGTERM_GRACE: Duration = Duration::from_secs(2);

/// How to start a stdio server. Equal specs start the same process the same way (what a
/// configuration reload compares).
#[derive(Clone, Default, PartialEq)]
pub struct StdioSpec {
    /// The executable (looked up on the child's PATH when it has no slash).
    pub command: String,
    pub args: Vec<String>,
    /// Variables set for the child, after the allowlist.
    pub env: Vec<(String, String)>,
    /// Parent variables passed through; `None` means [`DEFAULT_ENV_ALLOW`].
    pub env_allow: Option<Vec<String>>,
    pub cwd: Option<PathBuf>,
    /// Longest stdout line accepted; `None` means the wire default.
    pub max_line: Option<usize>,
    /// Whether the child runs inside a kernel sandbox.
    pub sandbox: StdioSandbox,
}

impl StdioSpec {
    /// How the child's program is looked up: on the PATH it gets (its `env`'s, else the
    /// gateway's), relative paths against `cwd` (else the gateway's directory).
    pub fn lookup(&self) -> manifold_sandbox::Lookup {
        let path = (self.env.iter().rev())
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("PATH").ok());
        manifold_sandbox::Lookup {
            path,
            cwd: self
                .cwd
                .clone()
                .or_else(|| std::env::current_dir().ok())
                .unwrap_or_else(|| PathBuf::from("/")),
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }

    /// Why the program cannot be started, when it cannot be found or is no executable file:
    /// `"uvx" is not on the PATH it gets (/usr/bin:/bin)`.
    pub fn missing_program(&self) -> Option<String> {
        let lookup = self.lookup();
        if manifold_sandbox::find_program(&self.command, &lookup).is_some() {
            return None;
        }
        Some(if self.command.contains('/') {
            format!(
                "{:?} does not exist (relative to {})",
                self.command,
                lookup.cwd.display()
            )
        } else {
            format!(
                "{:?} is not an executable file in any dir of the PATH it gets ({})",
                self.command,
                lookup.path.as_deref().unwrap_or("no PATH")
            )
        })
    }
}

/// A stdio server's sandbox choice.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum StdioSandbox {
    /// A spec built in code with no sandbox decided (tests, embedders): unsandboxed, silently.
    /// The configuration never yields it: no `profile` written is `Default`.
    #[default]
    Unset,
    /// `profile = "off"` written: unsandboxed, with a warning at every start.
    Off,
    /// A `profile` written: spawned through the launcher with this spec (paths resolved, dirs
    /// under `data_dir`); a sandbox that cannot be built refuses the server.
    On(Box<manifold_sandbox::SandboxSpec>),
    /// No `profile` written anywhere: the default profile. Spawned like `On`, but where the
    /// sandbox cannot be built at all (no launcher, a setup step failing) the server starts
    /// unsandboxed, with a warning at every start and every control reported missing.
    Default(Box<manifold_sandbox::SandboxSpec>),
    /// No `profile` written, and the command is a container engine (`docker run -i --rm IMAGE`):
    /// the server runs in the container the engine starts, and that container is its sandbox.
    /// A box around the engine's CLI would hide the engine's socket the CLI needs, and would not
    /// confine what the engine runs, so the CLI starts as it is; health reports every control
    /// off, saying why.
    ContainerEngine,
}

impl StdioSandbox {
    /// The spec the launcher gets, for `On` and `Default`.
    pub fn spec(&self) -> Option<&manifold_sandbox::SandboxSpec> {
        match self {
            StdioSandbox::On(spec) | StdioSandbox::Default(spec) => Some(spec),
            StdioSandbox::Off | StdioSandbox::Unset | StdioSandbox::ContainerEngine => None,
        }
    }
}

impl std::fmt::Debug for StdioSpec {
    /// Variable values often hold secrets: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioSpec")
            .field("command", &self.command)
            .field("args", &self.args)
            .field(
                "env",
                &self
                    .env
                    .iter()
                    .map(|(k, _)| format!("{k}=<redacted>"))
                    .collect::<Vec<_>>(),
            )
            .field("env_allow", &self.env_allow)
            .field("cwd", &self.cwd)
            .field("max_line", &self.max_line)
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

/// A running child process and its pipes.
pub struct StdioTransport {
    server: String,
    command: String,
    pid: Option<u32>,
    writer: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    child: tokio::sync::Mutex<Option<Child>>,
    /// Held for the child's life: its drop kills whatever the sandboxed server left behind.
    _cgroup: Option<manifold_sandbox::cgroup::Cgroup>,
    /// The launcher's report, for a sandboxed child.
    sandbox: Option<Arc<manifold_sandbox::Report>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    closed: AtomicBool,
    /// `network = "allow"`: the egress proxy serving this child's sandbox; aborted with it.
    _egress: Option<EgressTask>,
}

impl std::fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Spawns the child and starts its reader, writer and stderr tasks.
pub fn spawn(
    server: &str,
    spec: &StdioSpec,
) -> Result<(Arc<StdioTransport>, InboundRx), UpstreamError> {
    let mut cmd = std::process::Command::new(&spec.command);
    cmd.args(&spec.args);
    configure(&mut cmd, spec);
    let mut egress = None;
    let spawn_plain = |cmd: std::process::Command| {
        tokio_command(cmd)
            .spawn()
            .map_err(|e| UpstreamError::Spawn {
                server: server.to_owned(),
                reason: format!("{}: {e}", spec.command),
            })
    };
    // A sandbox cannot be built around a program that is not there; saying so plainly beats
    // the launcher's failed exec (and the default profile's fallback to running unsandboxed).
    if matches!(spec.sandbox, StdioSandbox::On(_) | StdioSandbox::Default(_))
        && let Some(why) = spec.missing_program()
    {
        return Err(UpstreamError::Spawn {
            server: server.to_owned(),
            reason: why,
        });
    }
    let (mut child, cgroup, report) = match &spec.sandbox {
        StdioSandbox::On(sandbox) => {
            spawn_sandboxed(server, spec, sandbox, &mut egress).map_err(|e| e.into_error(server))?
        }
        StdioSandbox::Default(sandbox) => match spawn_sandboxed(server, spec, sandbox, &mut egress)
        {
            Ok(sandboxed) => sandboxed,
            Err(SandboxedFailure::Sandbox(e)) if !matches!(e, SandboxError::Refused { .. }) => {
                tracing::warn!(
                    server,
                    error = %e,
                    "sandbox: the default profile could not be built, so the server runs unsandboxed, with the gateway's full access to files and network; fix the cause above, or write profile = \"off\" to choose this"
                );
                let report = unsandboxed_report(&e);
                (spawn_plain(cmd)?, None, Some(report))
            }
            Err(e) => return Err(e.into_error(server)),
        },
        StdioSandbox::ContainerEngine => {
            let report = container_engine_report(&spec.command);
            (spawn_plain(cmd)?, None, Some(report))
        }
        StdioSandbox::Off | StdioSandbox::Unset => {
            if spec.sandbox == StdioSandbox::Off {
                tracing::warn!(
                    server,
                    "sandbox profile is \"off\": the server runs with the gateway's full access to files and network; remove `profile = \"off\"` or set profile = \"strict\""
                );
            }
            (spawn_plain(cmd)?, None, None)
        }
    };
    let pid = child.id();
    let missing = |what: &str| UpstreamError::Spawn {
        server: server.to_owned(),
        reason: format!("the child's {what} pipe was not available"),
    };
    let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
    let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;

    let (inbound_tx, inbound_rx) = inbound_channel();
    let (writer_tx, writer_rx) = mpsc::channel(OUTBOUND_QUEUE);
    let stderr_tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_LINES)));
    let transport = Arc::new(StdioTransport {
        server: server.to_owned(),
        command: spec.command.clone(),
        pid,
        writer: Mutex::new(Some(writer_tx)),
        child: tokio::sync::Mutex::new(Some(child)),
        _cgroup: cgroup,
        sandbox: report.map(Arc::new),
        stderr_tail: Arc::clone(&stderr_tail),
        closed: AtomicBool::new(false),
        _egress: egress,
    });
    tokio::spawn(write_stdin(stdin, writer_rx));
    let stderr_done = tokio::spawn(read_stderr(server.to_owned(), stderr, stderr_tail));
    tokio::spawn(read_stdout(
        Arc::downgrade(&transport),
        server.to_owned(),
        stdout,
        spec.max_line.unwrap_or(DEFAULT_MAX_LINE),
        inbound_tx,
        stderr_done,
    ));
    tracing::debug!(server, pid, command = %spec.command, "started stdio server");
    Ok((transport, inbound_rx))
}

/// Environment and pipes, shared by the plain and the sandboxed spawn (the sandbox owns
/// the working directory: `/workspace`).
fn configure(cmd: &mut std::process::Command, spec: &StdioSpec) {
    use std::os::unix::process::CommandExt;
    cmd.env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let allow: Vec<String> = spec
        .env_allow
        .clone()
        .unwrap_or_else(|| DEFAULT_ENV_ALLOW.iter().map(|s| (*s).to_owned()).collect());
    for name in &allow {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let (Some(dir), StdioSandbox::Off | StdioSandbox::Unset | StdioSandbox::ContainerEngine) =
        (&spec.cwd, &spec.sandbox)
    {
        cmd.current_dir(dir);
    }
}

fn tokio_command(cmd: std::process::Command) -> Command {
    let mut cmd = Command::from(cmd);
    cmd.kill_on_drop(true);
    cmd
}

/// Spawns through the launcher beside the running binary and logs each control's enforcement.
/// Blocks this worker for the launcher's report (milliseconds): the launcher's PDEATHSIG follows
/// the spawning thread, so it must be a long-lived runtime thread, not a `spawn_blocking` one.
fn spawn_sandboxed(
    server: &str,
    spec: &StdioSpec,
    sandbox: &manifold_sandbox::SandboxSpec,
    egress: &mut Option<EgressTask>,
) -> Result<Sandboxed, SandboxedFailure> {
    let failed = SandboxedFailure::Sandbox;
    let launcher = manifold_sandbox::default_launcher().map_err(failed)?;
    let sandbox = &with_exposure(server, spec, sandbox);
    let mut sandboxed =
        manifold_sandbox::SandboxedCommand::new(&launcher, sandbox, &spec.command, &spec.args)
            .map_err(failed)?;
    configure(sandboxed.command_mut(), spec);
    let mut started = sandboxed
        .spawn_with(|cmd| tokio_command(cmd).spawn())
        .map_err(failed)?;
    if let Some(listener) = started.egress_listener.take() {
        *egress = Some(start_egress(server, sandbox, listener).map_err(SandboxedFailure::Other)?);
    }
    // Partial or missing controls are what an operator must see without `-v`; enforced ones and
    // those the configuration turned off are the expected state.
    for e in &started.report.enforcements {
        match e.state {
            State::Enforced | State::Off => {
                tracing::info!(server, control = ?e.control, state = ?e.state, detail = %e.detail, "sandbox control");
            }
            State::Partial | State::Missing => {
                tracing::warn!(server, control = ?e.control, state = ?e.state, detail = %e.detail, "sandbox control");
            }
        }
    }
    Ok((started.child, started.cgroup, Some(started.report)))
}

/// `sandbox` plus what the command needs to run (manifold_sandbox::exposure's rule), looked up
/// on the PATH the child gets. A path the server's uid cannot reach is logged, not bound: the
/// bind would refuse the whole server, and the command may not need it (e.g. a shim).
fn with_exposure(
    server: &str,
    spec: &StdioSpec,
    sandbox: &manifold_sandbox::SandboxSpec,
) -> manifold_sandbox::SandboxSpec {
    let exposure =
        manifold_sandbox::expose_command(sandbox, &spec.command, &spec.args, &spec.lookup());
    for (path, dir) in &exposure.unreachable {
        tracing::warn!(
            server,
            path = %path.display(),
            blocked_by = %dir.display(),
            "sandbox: the command needs this path, but the server's uid cannot search {}, so it is not bound; make that dir searchable (chmod o+x) or install the program outside it",
            dir.display()
        );
    }
    for path in &exposure.unwritable {
        tracing::warn!(
            server,
            path = %path.display(),
            "sandbox: the server may write this dir (read_write lists it, or the default profile was handed it on the command line), but the server's uid cannot write it (a root gateway runs its sandboxed servers as uid 65534); chown it to that uid, or make it writable by others"
        );
    }
    let mut sandbox = sandbox.clone();
    sandbox.read_only.extend(exposure.read_only);
    sandbox
}

/// Why a sandboxed spawn failed: the sandbox itself (which the default profile survives by
/// starting unsandboxed), or something no sandbox choice changes.
enum SandboxedFailure {
    Sandbox(SandboxError),
    Other(UpstreamError),
}

impl SandboxedFailure {
    fn into_error(self, server: &str) -> UpstreamError {
        match self {
            SandboxedFailure::Sandbox(e) => UpstreamError::Spawn {
                server: server.to_owned(),
                reason: format!("sandbox: {e}"),
            },
            SandboxedFailure::Other(e) => e,
        }
    }
}

/// What health and metrics show for a default-profile server that runs unsandboxed: every
/// control missing, each with the reason the sandbox could not be built.
fn unsandboxed_report(error: &SandboxError) -> manifold_sandbox::Report {
    let detail =
        format!("the default profile could not be built ({error}); the server runs unsandboxed");
    manifold_sandbox::Report {
        enforcements: manifold_sandbox::Control::ALL
            .iter()
            .map(|c| manifold_sandbox::Enforcement::new(*c, State::Missing, detail.clone()))
            .collect(),
    }
}

/// What health shows for a container engine's CLI started under the default profile.
fn container_engine_report(command: &str) -> manifold_sandbox::Report {
    let engine = std::path::Path::new(command)
        .file_name()
        .map_or(command.into(), |n| n.to_string_lossy());
    let detail = format!(
        "the server runs in the container {engine} starts, which is its sandbox; Manifold starts {engine}'s CLI as it is (a box around it would hide the engine's socket and not confine the container); write a profile to box the CLI anyway"
    );
    manifold_sandbox::Report {
        enforcements: manifold_sandbox::Control::ALL
            .iter()
            .map(|c| manifold_sandbox::Enforcement::new(*c, State::Off, detail.clone()))
            .collect(),
    }
}

/// A sandboxed child, its cgroup and the launcher's report.
type Sandboxed = (
    Child,
    Option<manifold_sandbox::cgroup::Cgroup>,
    Option<manifold_sandbox::Report>,
);

/// The egress proxy task of one sandboxed child: aborted when the transport (and so the child)
/// goes, which closes the listener.
struct EgressTask(tokio::task::AbortHandle);

impl Drop for EgressTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves the allow-list proxy on the listener the launcher bound inside the child's network
/// namespace. The config loader validated the lists, so a parse error here means a spec built by
/// hand; it refuses the server rather than run it with no way out it was promised.
fn start_egress(
    server: &str,
    sandbox: &manifold_sandbox::SandboxSpec,
    listener: std::net::TcpListener,
) -> Result<EgressTask, UpstreamError> {
    let failed = |reason: String| UpstreamError::Spawn {
        server: server.to_owned(),
        reason,
    };
    let policy = manifold_egress::Policy::new(&sandbox.allow_hosts, &sandbox.allow_private)
        .map_err(|e| failed(format!("sandbox: {e}")))?;
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|e| failed(format!("sandbox: serve the egress proxy listener: {e}")))?;
    tracing::info!(
        server,
        hosts = policy.host_count(),
        "egress proxy serving the sandbox's 127.0.0.1:{}",
        manifold_sandbox::spec::PROXY_PORT
    );
    let task = tokio::spawn(manifold_egress::serve(
        listener,
        manifold_egress::Egress::new(server, policy),
    ));
    Ok(EgressTask(task.abort_handle()))
}

async fn write_stdin(mut stdin: impl AsyncWrite + Unpin, mut queue: mpsc::Receiver<Vec<u8>>) {
    while let Some(mut batch) = queue.recv().await {
        // Lines queued while the last write ran go out together: one system call and one wake-up
        // of the child for many calls under load, and nothing added for a lone call.
        while batch.len() < MAX_BATCHED_WRITE {
            match queue.try_recv() {
                Ok(line) => batch.extend_from_slice(&line),
                Err(_) => break,
            }
        }
        if stdin.write_all(&batch).await.is_err() || stdin.flush().await.is_err() {
            // The child is gone or closed stdin; the stdout reader reports the closure.
            return;
        }
    }
    // Dropping stdin here closes the pipe: the polite way to ask a stdio server to exit.
}

async fn read_stdout(
    transport: std::sync::Weak<StdioTransport>,
    server: String,
    mut stdout: impl AsyncRead + Unpin,
    max_line: usize,
    inbound: InboundTx,
    stderr_done: tokio::task::JoinHandle<()>,
) {
    let mut framer = LineFramer::new(max_line);
    let mut buf = vec![0u8; 64 * 1024];
    let mut seen_message = false;
    let mut banner_lines = 0usize;
    let cause = loop {
        let n = match stdout.read(&mut buf).await {
            Ok(0) => break None,
            Ok(n) => n,
            Err(e) => break Some(format!("reading its stdout failed: {e}")),
        };
        framer.push(buf.get(..n).unwrap_or_default());
        while let Some(frame) = framer.next_frame() {
            let item = match frame {
                Frame::TooLong { limit, seen } => {
                    tracing::warn!(server = %server, limit, seen, "the server wrote a line longer than the limit; skipped it");
                    match framer.take_skipped_id() {
                        Some(id) => Inbound::AnswerTooLong { id, limit },
                        None => continue,
                    }
                }
                Frame::Line(line) => match Message::decode(&line) {
                    Ok(message) => {
                        seen_message = true;
                        Inbound::Message {
                            message,
                            related: None,
                        }
                    }
                    Err(fault)
                        if fault.id.is_none() && matches!(fault.kind, FaultKind::NotJson(_)) =>
                    {
                        if !seen_message {
                            banner_lines += 1;
                            if banner_lines > MAX_BANNER_LINES {
                                break;
                            }
                            tracing::info!(server = %server, line = %String::from_utf8_lossy(line.get(..line.len().min(MAX_STDERR_LINE)).unwrap_or_default()), "skipped a non-JSON line on stdout (banner)");
                        } else {
                            tracing::warn!(server = %server, line = %String::from_utf8_lossy(line.get(..line.len().min(200)).unwrap_or_default()), "skipped a non-JSON line on stdout");
                        }
                        continue;
                    }
                    Err(fault) => Inbound::Fault(fault),
                },
            };
            if inbound.send(item).await.is_err() {
                return;
            }
        }
        // An over-long line whose id came after the limit: read by now if the line ended.
        if let Some(id) = framer.take_skipped_id() {
            let limit = max_line;
            if inbound
                .send(Inbound::AnswerTooLong { id, limit })
                .await
                .is_err()
            {
                return;
            }
        }
        if banner_lines > MAX_BANNER_LINES {
            break Some(format!(
                "it printed more than {MAX_BANNER_LINES} lines that are not JSON before any message; is it an MCP stdio server, and does it log to stdout?"
            ));
        }
    };
    if let Some(tail) = framer.finish() {
        tracing::warn!(server = %server, bytes = tail.len(), "the server's output ended in the middle of a message");
    }
    let cause = match cause {
        Some(c) => c,
        None => {
            // Give stderr a moment to drain so the cause can quote the child's last words.
            let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done).await;
            match transport.upgrade() {
                Some(t) => t.exit_description().await,
                None => "its stdout closed".to_owned(),
            }
        }
    };
    let _ = inbound.send(Inbound::Closed { cause }).await;
}

async fn read_stderr(
    server: String,
    mut stderr: impl AsyncRead + Unpin,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut framer = LineFramer::new(MAX_STDERR_LINE);
    let mut buf = vec![0u8; 64 * 1024];
    let mut window = Instant::now();
    let mut logged = 0u32;
    let mut suppressed = 0u64;
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        framer.push(buf.get(..n).unwrap_or_default());
        while let Some(frame) = framer.next_frame() {
            let line = match frame {
                Frame::Line(l) => String::from_utf8_lossy(&l).into_owned(),
                Frame::TooLong { seen, .. } => {
                    format!("(a stderr line of more than {seen} bytes, cut)")
                }
            };
            if window.elapsed() >= Duration::from_secs(1) {
                if suppressed > 0 {
                    tracing::warn!(target: "manifold::upstream::stderr", server = %server, suppressed, "stderr lines not logged (rate limit)");
                }
                window = Instant::now();
                logged = 0;
                suppressed = 0;
            }
            if logged < STDERR_LINES_PER_SECOND {
                logged += 1;
                tracing::info!(target: "manifold::upstream::stderr", server = %server, "{line}");
            } else {
                suppressed += 1;
            }
            let mut t = lock(&tail);
            if t.len() == STDERR_TAIL_LINES {
                t.pop_front();
            }
            t.push_back(line);
        }
    }
    if let Some(rest) = framer.finish() {
        let mut t = lock(&tail);
        if t.len() == STDERR_TAIL_LINES {
            t.pop_front();
        }
        t.push_back(String::from_utf8_lossy(&rest).into_owned());
    }
    if suppressed > 0 {
        tracing::warn!(target: "manifold::upstream::stderr", server = %server, suppressed, "stderr lines not logged (rate limit)");
    }
}

impl StdioTransport {
    /// The child's process id (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The last lines the child wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        lock(&self.stderr_tail).iter().cloned().collect()
    }

    async fn exit_description(&self) -> String {
        let status = {
            let mut guard = self.child.lock().await;
            match guard.as_mut() {
                Some(child) => tokio::time::timeout(Duration::from_millis(300), child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok),
                None => None,
            }
        };
        let tail = self.stderr_tail();
        let mut out = match status {
            Some(s) => format!("the server process exited ({s})"),
            None => "the server closed its stdout".to_owned(),
        };
        let Some(line) = stderr_cause::telling_line(&tail) else {
            return out;
        };
        out.push_str(&format!(
            "; its stderr said: {}",
            crate::connection::truncate(line)
        ));
        let hides_paths = self.sandbox.as_ref().is_some_and(|report| {
            matches!(
                report.state(Control::Filesystem),
                State::Enforced | State::Partial
            )
        });
        if hides_paths && stderr_cause::names_a_refused_path(line) {
            out.push_str(&format!(
                " (it runs sandboxed, where a path it needs may be hidden or read-only: `manifold \
                 doctor` shows what it gets; list the path in [servers.{}.sandbox] read_only or \
                 read_write)",
                self.server
            ));
        }
        out
    }

    fn signal_group(&self, signal: Signal) {
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            // ESRCH (the group is already gone) is the outcome we want; nothing else can be done.
            let _ = killpg(Pid::from_raw(pid), signal);
        }
    }

    /// The escalating shutdown: close stdin, SIGTERM the group, SIGKILL the group, reap.
    async fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        lock(&self.writer).take();
        let mut guard = self.child.lock().await;
        if let Some(child) = guard.as_mut() {
            let exited = tokio::time::timeout(STDIN_CLOSE_GRACE, child.wait())
                .await
                .is_ok();
            if !exited {
                self.signal_group(Signal::SIGTERM);
                if tokio::time::timeout(SIGTERM_GRACE, child.wait())
                    .await
                    .is_err()
                {
                    tracing::warn!(server = %self.server, pid = self.pid, "the server ignored SIGTERM; killing its process group");
                }
            }
            // Grandchildren may outlive the leader: the group is always killed.
            self.signal_group(Signal::SIGKILL);
            let _ = child.wait().await;
        }
        guard.take();
    }
}

impl Transport for StdioTransport {
    fn send(&self, message: Message) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(async move {
            let tx = lock(&self.writer).clone();
            let closed = || UpstreamError::Closed {
                server: self.server.clone(),
                cause: "the server process is no longer accepting input".to_owned(),
            };
            let tx = tx.ok_or_else(closed)?;
            tx.send(encode_line(message.as_str()))
                .await
                .map_err(|_| closed())
        })
    }

    fn cancel_request(&self, _id: &Id) -> bool {
        false
    }

    fn negotiated(&self, _revision: Revision) {}

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shutdown())
    }

    fn sandbox(&self) -> Option<Arc<manifold_sandbox::Report>> {
        self.sandbox.clone()
    }

    fn describe(&self) -> String {
        match self.pid {
            Some(pid) => format!("stdio {} (pid {pid})", self.command),
            None => format!("stdio {}", self.command),
        }
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::Acquire) {
            // Not shut down politely: make sure no process of the tree survives. The child handle's
            // kill_on_drop lets the runtime reap the leader.
            self.signal_group(Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A writer that records the size of every write it gets.
    struct Recorder(Arc<Mutex<Vec<Vec<u8>>>>);

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            lock(&self.0).push(buf.to_vec());
            std::task::Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn queued_lines_go_out_in_order_in_batches_no_larger_than_the_bound() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        let line = |i: usize, len: usize| {
            let mut l = format!("{i:06}").into_bytes();
            l.resize(len - 1, b'x');
            l.push(b'\n');
            l
        };
        // Queued before the writer runs, so it finds them all waiting: 20 lines of 64 KiB (a
        // batch takes four, reaching the bound), then one small line.
        let mut sent = Vec::new();
        for i in 0..20 {
            sent.push(line(i, 64 * 1024));
        }
        sent.push(line(20, 10));
        for l in &sent {
            tx.send(l.clone()).await.unwrap();
        }
        drop(tx);
        write_stdin(Recorder(Arc::clone(&writes)), rx).await;
        let writes = lock(&writes).clone();
        assert_eq!(writes.concat(), sent.concat(), "every byte, in order");
        assert!(
            writes.len() > 1 && writes.len() < sent.len(),
            "{} writes",
            writes.len()
        );
        for w in &writes {
            assert!(
                w.len() < MAX_BATCHED_WRITE + 64 * 1024,
                "a batch of {}",
                w.len()
            );
            assert_eq!(w.last(), Some(&b'\n'), "a batch ends with a whole line");
        }
    }
}
