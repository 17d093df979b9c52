//! The gateway's side: turns a program and its arguments into a `std::process::Command` that runs
//! through the launcher, spawns it with whatever spawner the caller uses (std or tokio), and reads
//! the launcher's report of what was really enforced before the caller talks to the server.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::cgroup::Cgroup;
use crate::error::SandboxError;
use crate::launch::{LauncherMessage, PLAN_ENV, Plan};
use crate::probe::ForcedProbe;
use crate::spec::{Control, Enforcement, Network, Report, SandboxSpec, State};

/// Largest report the gateway reads from a launcher.
pub const MAX_REPORT_BYTES: u64 = 64 * 1024;
/// File name of the launcher binary, looked for next to the gateway's own binary.
pub const LAUNCHER_NAME: &str = "manifold-sandbox-exec";

/// The launcher next to the running binary.
pub fn default_launcher() -> Result<PathBuf, SandboxError> {
    let exe = std::env::current_exe().map_err(|source| SandboxError::Launcher {
        path: LAUNCHER_NAME.into(),
        source,
    })?;
    Ok(exe.with_file_name(LAUNCHER_NAME))
}

/// A command that will run `program` inside the sandbox of `spec`, not yet spawned.
pub struct SandboxedCommand {
    command: Command,
    plan: Plan,
    cgroup: Option<Cgroup>,
    cgroup_states: Vec<Enforcement>,
}

/// A spawned sandboxed server: the caller's child handle, what was enforced, and the cgroup whose
/// drop kills every process the server left behind.
pub struct Sandboxed<C> {
    pub child: C,
    pub report: Report,
    pub cgroup: Option<Cgroup>,
    /// `network = "allow"` (namespaced tier): the listening socket on 127.0.0.1:PROXY_PORT inside
    /// the server's network namespace; the caller serves the egress proxy on it.
    pub egress_listener: Option<std::net::TcpListener>,
}

impl SandboxedCommand {
    /// Prepares the server's dirs and cgroup. Refuses here when a required limit has no cgroup.
    /// In a debug build, `MANIFOLD_SANDBOX_FORCE_PROBE` goes into the plan (see [`ForcedProbe`]);
    /// a value that does not parse is a `Setup` error naming it.
    pub fn new<S: AsRef<OsStr>>(
        launcher: &Path,
        spec: &SandboxSpec,
        program: impl AsRef<OsStr>,
        args: impl IntoIterator<Item = S>,
    ) -> Result<Self, SandboxError> {
        std::fs::metadata(launcher).map_err(|source| SandboxError::Launcher {
            path: launcher.into(),
            source,
        })?;
        let forced = ForcedProbe::from_env().map_err(|detail| SandboxError::Setup {
            control: Control::Namespaces,
            detail,
        })?;
        prepare_dirs(spec)?;
        let (cgroup, cgroup_states) = Cgroup::create(spec);
        for state in &cgroup_states {
            if spec.require.contains(&state.control) && state.state != State::Enforced {
                return Err(SandboxError::Refused {
                    control: state.control,
                    detail: state.detail.clone(),
                });
            }
        }
        let mut command = Command::new(launcher);
        command.arg("--").arg(program).args(args);
        let plan = Plan {
            spec: spec.clone(),
            cgroup_procs: cgroup.as_ref().map(Cgroup::procs_files).unwrap_or_default(),
            memory_cgroup: cgroup_states
                .iter()
                .any(|s| s.control == Control::Memory && s.state == State::Enforced),
            cgroup_kills_tree: cgroup.as_ref().is_some_and(Cgroup::kills_tree),
            gateway_pid: std::process::id(),
            forced,
        };
        Ok(Self {
            command,
            plan,
            cgroup,
            cgroup_states,
        })
    }

    /// Pretends the host is weaker than it is, whatever the environment says: a test of the
    /// fallbacks. The launcher honours it only in a debug build.
    pub fn force_probe(&mut self, forced: ForcedProbe) {
        self.plan.forced = Some(forced);
    }

    /// The launcher's command, for stdio, env (`env_clear` is fine: the plan is added at spawn),
    /// process group and the like. Its program and arguments belong to the sandbox.
    pub fn command_mut(&mut self) -> &mut Command {
        &mut self.command
    }

    /// Spawns with std and waits for the report; a refused or failed server is reaped.
    pub fn spawn(self) -> Result<Sandboxed<Child>, SandboxError> {
        self.spawn_with(|mut command| command.spawn())
    }

    /// Spawns with the caller's spawner (e.g. `|c| tokio::process::Command::from(c).spawn()`), then
    /// blocks until the launcher reports (it does so before exec, in milliseconds).
    pub fn spawn_with<C>(
        mut self,
        spawn: impl FnOnce(Command) -> std::io::Result<C>,
    ) -> Result<Sandboxed<C>, SandboxError> {
        let plan =
            serde_json::to_string(&self.plan).map_err(|e| SandboxError::Report(e.to_string()))?;
        self.command.env(PLAN_ENV, plan);
        // A socket rather than a pipe, so the launcher can hand over the proxy listener too.
        let (read, write) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::Stream,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )
        .map_err(SandboxError::Pipe)?;
        crate::sys::pass_report_fd(&mut self.command, write.as_raw_fd());
        let child = spawn(self.command).map_err(SandboxError::Spawn)?;
        drop(write);
        let (message, received) = read_message(read)?;
        let mut report = Report {
            enforcements: self.cgroup_states,
        };
        match message {
            LauncherMessage::Ready(applied) => {
                report.enforcements.extend(applied.enforcements);
                let egress_listener = received.map(std::net::TcpListener::from);
                let namespaced = report.state(Control::Namespaces) == State::Enforced;
                if self.plan.spec.network == Network::Allow
                    && namespaced
                    && egress_listener.is_none()
                {
                    drop(child);
                    return Err(SandboxError::Setup {
                        control: Control::Network,
                        detail: "the launcher reported ready without handing over the egress proxy listener; this is a bug in manifold-sandbox-exec".into(),
                    });
                }
                Ok(Sandboxed {
                    child,
                    report,
                    cgroup: self.cgroup,
                    egress_listener,
                })
            }
            LauncherMessage::Failed {
                control,
                detail,
                refused,
                ..
            } => {
                drop(child);
                if refused {
                    Err(SandboxError::Refused { control, detail })
                } else {
                    Err(SandboxError::Setup { control, detail })
                }
            }
        }
    }
}

/// Reads the launcher's messages to EOF (at most `MAX_REPORT_BYTES`), keeping the first fd sent
/// by SCM_RIGHTS (the proxy listener; any further fd is closed), and parses the last report line.
fn read_message(read: OwnedFd) -> Result<(LauncherMessage, Option<OwnedFd>), SandboxError> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut text = Vec::new();
    let mut received: Option<OwnedFd> = None;
    let mut buf = [0u8; 4096];
    while (text.len() as u64) < MAX_REPORT_BYTES {
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let msg = match recvmsg::<()>(
            read.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                return Err(SandboxError::Report(format!(
                    "read the launcher's report: {}",
                    e.desc()
                )));
            }
        };
        let n = msg.bytes;
        let mut fds = Vec::new();
        if let Ok(cmsgs) = msg.cmsgs() {
            for cmsg in cmsgs {
                if let ControlMessageOwned::ScmRights(list) = cmsg {
                    fds.extend(list);
                }
            }
        }
        for fd in fds {
            let fd = crate::sys::adopt_received_fd(fd);
            if received.is_none() {
                received = Some(fd);
            }
        }
        if n == 0 {
            break;
        }
        text.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&text);
    let last = text.lines().rev().find(|l| !l.trim().is_empty());
    let Some(last) = last else {
        return Err(SandboxError::Report(
            "the launcher exited without a report".into(),
        ));
    };
    let message = serde_json::from_str(last).map_err(|e| SandboxError::Report(e.to_string()))?;
    Ok((message, received))
}

/// Creates workspace, output and home; when the gateway is root, hands their top dirs to the uid
/// the server runs as so it can write there.
fn prepare_dirs(spec: &SandboxSpec) -> Result<(), SandboxError> {
    let owner = nix::unistd::geteuid()
        .is_root()
        .then(|| spec.run_as.unwrap_or(crate::spec::DEFAULT_ROOT_RUN_AS));
    for dir in [&spec.workspace, &spec.output, &spec.home] {
        let fail = |source| SandboxError::Directory {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(fail)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(fail)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::assertions_on_constants)]
    fn report_cap_holds_a_full_report() {
        assert!(MAX_REPORT_BYTES >= 16 * 1024);
    }
}
