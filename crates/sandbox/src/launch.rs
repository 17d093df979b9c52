//! The launcher (`manifold-sandbox-exec`): a fresh single-threaded process that sets the sandbox up
//! and execs the server, so nothing unsafe runs between fork and exec of the multi-threaded gateway.
//! Stage 1 joins the cgroups, opens the bind sources, drops to the server's uid and unshares; its
//! fork (pid 1 of the new pid namespace) builds the root, confines itself and execs the server. Its
//! report goes to the gateway over fd 3, which closes at exec.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nix::sched::CloneFlags;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Gid, Uid};
use serde::{Deserialize, Serialize};

use crate::confine::{LandlockPaths, no_new_privs_and_landlock, rlimits, seccomp};
use crate::probe::ForcedProbe;
use crate::root::{HOME, OUTPUT, RootPlan, WORKSPACE};
use crate::spec::{Control, Network, PROXY_ENV, PROXY_PORT, Report, SandboxSpec, State};

/// Env var carrying the JSON `Plan` from the gateway to the launcher (removed before exec).
pub const PLAN_ENV: &str = "MANIFOLD_SANDBOX_PLAN";
/// Exit status of the launcher when setup failed (the report says why).
pub const SETUP_FAILED: u8 = 125;

/// What the gateway asks the launcher to do.
#[derive(Debug, Serialize, Deserialize)]
pub struct Plan {
    pub spec: SandboxSpec,
    /// `cgroup.procs` files to join before anything else.
    pub cgroup_procs: Vec<PathBuf>,
    /// A memory cgroup holds the server, so RLIMIT_AS is not needed.
    pub memory_cgroup: bool,
    /// The gateway can kill the whole tree through the cgroup.
    pub cgroup_kills_tree: bool,
    /// The gateway's pid: a launcher whose parent is already another process exits at once.
    pub gateway_pid: u32,
    /// A weaker host to pretend (tests of the fallbacks); ignored by a release launcher.
    #[serde(default)]
    pub forced: Option<ForcedProbe>,
}

impl Plan {
    /// The forced answer this launcher honours: none in a release build.
    fn forced(&self) -> ForcedProbe {
        self.forced
            .filter(|_| cfg!(debug_assertions))
            .unwrap_or_default()
    }
}

/// One line on the report pipe.
#[derive(Debug, Serialize, Deserialize)]
pub enum LauncherMessage {
    /// Everything was applied; exec follows.
    Ready(Report),
    /// Setup failed or a required control was not enforced; the server did not run.
    Failed {
        control: Control,
        detail: String,
        refused: bool,
        report: Report,
    },
}

struct Channel(Option<OwnedFd>);

impl Channel {
    /// Sends `fd` to the gateway as SCM_RIGHTS on one newline byte (an empty report line, which
    /// the reader skips).
    fn send_fd(&self, fd: &impl AsRawFd) -> nix::Result<()> {
        use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
        let Some(channel) = &self.0 else {
            return Err(nix::errno::Errno::EBADF);
        };
        let fds = [fd.as_raw_fd()];
        let iov = [std::io::IoSlice::new(b"\n")];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        sendmsg::<()>(channel.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None).map(|_| ())
    }

    /// Writes one JSON line; a gateway that stopped listening is not the launcher's problem.
    fn send(&self, message: &LauncherMessage) {
        let (Some(fd), Ok(mut line)) = (&self.0, serde_json::to_vec(message)) else {
            return;
        };
        line.push(b'\n');
        let mut rest = line.as_slice();
        while !rest.is_empty() {
            match nix::unistd::write(fd, rest) {
                Ok(0) | Err(_) => return,
                Ok(n) => rest = rest.get(n..).unwrap_or_default(),
            }
        }
    }
}

type Step = Result<(), (Control, String)>;

/// Entry point of the launcher binary: `manifold-sandbox-exec -- PROGRAM ARGS...`.
pub fn run() -> ExitCode {
    let mut channel = Channel(crate::sys::adopt_report_fd());
    if let Some(fd) = &channel.0 {
        let _ = nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
    }
    let mut report = Report::default();
    match stage1(&mut channel, &mut report) {
        Ok(code) => code,
        Err((control, detail)) => {
            let refused = false;
            eprintln!("manifold-sandbox-exec: {control:?}: {detail}");
            channel.send(&LauncherMessage::Failed {
                control,
                detail,
                refused,
                report,
            });
            ExitCode::from(SETUP_FAILED)
        }
    }
}

fn stage1(channel: &mut Channel, report: &mut Report) -> Result<ExitCode, (Control, String)> {
    let plan: Plan = std::env::var(PLAN_ENV)
        .map_err(|e| format!("{PLAN_ENV}: {e}"))
        .and_then(|text| serde_json::from_str(&text).map_err(|e| format!("{PLAN_ENV}: {e}")))
        .map_err(|e| {
            (
                Control::Namespaces,
                format!("{e}; start the launcher through manifold-sandbox only"),
            )
        })?;
    let argv: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
    let Some((program, args)) = argv.split_first() else {
        return Err((Control::Namespaces, "no program after `--`".into()));
    };
    // PDEATHSIG follows the gateway *thread* that spawned us: spawn from a long-lived thread.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if u32::try_from(nix::unistd::getppid().as_raw()).ok() != Some(plan.gateway_pid) {
        return Err((
            Control::TreeKill,
            "the gateway exited before the sandbox was set up".into(),
        ));
    }
    for procs in &plan.cgroup_procs {
        std::fs::write(procs, std::process::id().to_string()).map_err(|e| {
            (
                Control::Memory,
                format!(
                    "join {}: {e}; the gateway must own that cgroup",
                    procs.display()
                ),
            )
        })?;
    }
    let spec = &plan.spec;
    let root_plan = if spec.namespaces {
        Some(RootPlan::gather(spec).map_err(|e| (Control::Filesystem, e))?)
    } else {
        None
    };
    drop_uid(spec)?;
    let tier_a = match (root_plan, spec.namespaces) {
        (Some(root), true) => {
            match unshare(spec, plan.forced()).and_then(|()| network_setup(spec, channel)) {
                Ok(()) => Some(root),
                Err(e) if e.starts_with(NETWORK_SETUP) => return Err((Control::Network, e)),
                Err(e) => {
                    // The probe names the sysctl or AppArmor setting when one is the cause.
                    let fix = match crate::probe::user_namespaces() {
                    Err(why) if !plan.forced().no_userns => why,
                    _ => "allow unprivileged user namespaces (sysctl or an AppArmor profile for manifold)".into(),
                };
                    report.push(
                        Control::Namespaces,
                        State::Missing,
                        format!("fallback tier: {e}; {fix}"),
                    );
                    None
                }
            }
        }
        _ => {
            report.push(
                Control::Namespaces,
                State::Off,
                "namespaces off in the spec",
            );
            None
        }
    };
    let Some(root) = tier_a else {
        confine_and_exec(&plan, None, program, args, channel, report)?;
        return Ok(ExitCode::from(SETUP_FAILED));
    };
    match crate::sys::fork_single_threaded() {
        Err(e) => Err((
            Control::Namespaces,
            format!("fork into the pid namespace: {}", e.desc()),
        )),
        Ok(ForkResult::Child) => {
            confine_and_exec(&plan, Some(&root), program, args, channel, report)?;
            Ok(ExitCode::from(SETUP_FAILED))
        }
        Ok(ForkResult::Parent { child }) => {
            // Only pid 1 reports; the gateway sees EOF when it execs.
            channel.0 = None;
            drop(root);
            Ok(wait_for(child))
        }
    }
}

/// Waits for pid 1 of the sandbox and passes its status on (a signal death as 128 + signal).
fn wait_for(child: nix::unistd::Pid) -> ExitCode {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => {
                return ExitCode::from(u8::try_from(code).unwrap_or(SETUP_FAILED));
            }
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                return ExitCode::from(128u8.saturating_add(signal as u8));
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return ExitCode::from(SETUP_FAILED),
        }
    }
}

/// When root, becomes the spec's uid (default nobody) before unsharing, so the server is unprivileged
/// on the host even if it leaves its namespaces. Re-sets dumpable, which a uid change clears and
/// without which /proc/self/uid_map cannot be written.
fn drop_uid(spec: &SandboxSpec) -> Step {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let (uid, gid) = spec.run_as.unwrap_or(crate::spec::DEFAULT_ROOT_RUN_AS);
    let fail = |what: &str, e: nix::Error| (Control::NoNewPrivs, format!("{what}: {}", e.desc()));
    nix::unistd::setgroups(&[Gid::from_raw(gid)]).map_err(|e| fail("setgroups", e))?;
    let gid = Gid::from_raw(gid);
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| fail("setresgid", e))?;
    let uid = Uid::from_raw(uid);
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| fail("setresuid", e))?;
    nix::sys::prctl::set_dumpable(true).map_err(|e| fail("prctl(PR_SET_DUMPABLE)", e))
}

/// Prefix of errors from `network_setup`, which are network failures, not a refused unshare.
const NETWORK_SETUP: &str = "network setup: ";

/// In the new network namespace: `lo` up for loopback and allow; for allow, the proxy listener on
/// 127.0.0.1:PROXY_PORT, handed to the gateway by SCM_RIGHTS and closed here, so the server never
/// holds it (a listening socket keeps its namespace, so the gateway accepts from the host's).
fn network_setup(spec: &SandboxSpec, channel: &Channel) -> Result<(), String> {
    if !matches!(spec.network, Network::Loopback | Network::Allow) {
        return Ok(());
    }
    crate::sys::loopback_up().map_err(|e| format!("{NETWORK_SETUP}bring lo up: {}", e.desc()))?;
    if spec.network != Network::Allow {
        return Ok(());
    }
    let listener = std::net::TcpListener::bind(("127.0.0.1", PROXY_PORT)).map_err(|e| {
        format!("{NETWORK_SETUP}bind the egress proxy listener 127.0.0.1:{PROXY_PORT}: {e}")
    })?;
    channel.send_fd(&listener).map_err(|e| {
        format!(
            "{NETWORK_SETUP}hand the proxy listener to the gateway: {}",
            e.desc()
        )
    })
}

fn unshare(spec: &SandboxSpec, forced: ForcedProbe) -> Result<(), String> {
    if forced.no_userns {
        return Err(format!("unshare: {}", crate::probe::FORCED_USERNS_TEXT));
    }
    let mut flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    if spec.network.isolated() {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    nix::sched::unshare(flags).map_err(|e| format!("unshare: {}", e.desc()))?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| format!("write {file}: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))
}

/// Tier A (with `root`): pid 1 of the namespaces builds the root. Either way: rlimits, NNP,
/// Landlock, seccomp, the report, exec. Returns only on failure.
fn confine_and_exec(
    plan: &Plan,
    root: Option<&RootPlan>,
    program: &str,
    args: &[String],
    channel: &Channel,
    report: &mut Report,
) -> Step {
    let spec = &plan.spec;
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let paths = filesystem(spec, root, report)?;
    rlimits(spec, plan.memory_cgroup, report);
    // Without a network namespace of its own the server must not reach the host's network at all.
    let network = match (root, spec.network) {
        (None, n) if n.isolated() => Network::None,
        (_, n) => n,
    };
    no_new_privs_and_landlock(&paths.landlock, network, plan.forced().landlock_abi, report)
        .map_err(|e| (Control::NoNewPrivs, e))?;
    if root.is_none() {
        fallback_filesystem_state(report);
    }
    network_state(spec, root.is_some(), report);
    tree_kill_state(plan.cgroup_kills_tree, root.is_some(), report);
    if spec.seccomp {
        seccomp(root.is_none() && spec.network.isolated(), report)
            .map_err(|e| (Control::Seccomp, e))?;
    } else {
        report.push(Control::Seccomp, State::Off, "seccomp off in the spec");
    }
    if let Some((control, detail)) = report.first_unmet(&spec.require) {
        let detail = detail.to_string();
        channel.send(&LauncherMessage::Failed {
            control,
            detail: detail.clone(),
            refused: true,
            report: report.clone(),
        });
        std::process::exit(i32::from(SETUP_FAILED));
    }
    channel.send(&LauncherMessage::Ready(report.clone()));
    let proxy_env = match (spec.network, root) {
        (Network::Allow, Some(_)) => PROXY_ENV,
        _ => &[],
    };
    let error = std::process::Command::new(program)
        .args(args)
        .env_remove(PLAN_ENV)
        .envs(proxy_env.iter().copied())
        .env("HOME", &paths.home)
        .env("TMPDIR", &paths.tmp)
        .exec();
    Err((
        Control::Filesystem,
        format!("exec {program}: {error}; put it under a read-only path of the spec"),
    ))
}

/// Where the server's files are once its filesystem view is in place.
struct ServerPaths {
    landlock: LandlockPaths,
    home: PathBuf,
    tmp: PathBuf,
}

/// Tier A: builds the minimal root and pivots into it. Fallback: Landlock paths on the host. Either
/// way ends in the server's working directory.
fn filesystem(
    spec: &SandboxSpec,
    root: Option<&RootPlan>,
    report: &mut Report,
) -> Result<ServerPaths, (Control, String)> {
    let (landlock, home, tmp) = if let Some(root) = root {
        report.push(
            Control::Namespaces,
            State::Enforced,
            "user, mount, pid, ipc, uts".to_string()
                + if spec.network.isolated() { ", net" } else { "" },
        );
        root.enter().map_err(|e| (Control::Filesystem, e))?;
        let _ = nix::unistd::sethostname("sandbox");
        report.push(Control::Filesystem, State::Enforced, "minimal read-only root by pivot_root; rw /workspace /output /home/sandbox, private /tmp");
        let read = vec![PathBuf::from("/")];
        let write = [WORKSPACE, OUTPUT, HOME, "/tmp"]
            .iter()
            .map(PathBuf::from)
            .chain(spec.read_write.iter().cloned())
            .collect();
        (
            LandlockPaths {
                read,
                write,
                devices: vec![PathBuf::from("/dev")],
            },
            PathBuf::from(HOME),
            PathBuf::from("/tmp"),
        )
    } else {
        let read = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc"]
            .iter()
            .map(PathBuf::from)
            .chain(spec.read_only.iter().cloned())
            .collect();
        let write = [&spec.workspace, &spec.output, &spec.home]
            .into_iter()
            .chain(&spec.read_write)
            .cloned()
            .collect();
        report.push(
            Control::Filesystem,
            State::Partial,
            "Landlock paths only in the host mount namespace (other processes visible in /proc)",
        );
        (
            LandlockPaths {
                read,
                write,
                devices: vec![PathBuf::from("/dev")],
            },
            spec.home.clone(),
            spec.home.clone(),
        )
    };
    let _ = nix::unistd::setsid();
    let workdir = match (&spec.workdir, root.is_some()) {
        (Some(dir), _) => dir.as_path(),
        (None, true) => Path::new(WORKSPACE),
        (None, false) => spec.workspace.as_path(),
    };
    nix::unistd::chdir(workdir).map_err(|e| {
        (
            Control::Filesystem,
            format!("chdir {}: {}", workdir.display(), e.desc()),
        )
    })?;
    Ok(ServerPaths {
        landlock,
        home,
        tmp,
    })
}

/// Without the minimal root, the filesystem control is only as good as Landlock: partial at best
/// (the host mount namespace shows other processes in /proc), missing when Landlock is.
fn fallback_filesystem_state(report: &mut Report) {
    let landlock = report
        .enforcements
        .iter()
        .rev()
        .find(|e| e.control == Control::Landlock)
        .map(|e| (e.state, e.detail.clone()));
    let (state, detail) = match landlock {
        Some((State::Enforced, _)) => (
            State::Partial,
            "Landlock paths only in the host mount namespace (other processes visible in /proc)"
                .to_string(),
        ),
        Some((State::Partial, why)) => (
            State::Partial,
            format!(
                "Landlock paths only in the host mount namespace, and Landlock is partial ({why})"
            ),
        ),
        Some((_, why)) => (
            State::Missing,
            format!("no minimal root and no Landlock ({why}): the server sees the host's files"),
        ),
        None => (
            State::Missing,
            "no minimal root and Landlock was not applied: the server sees the host's files"
                .to_string(),
        ),
    };
    report.set(Control::Filesystem, state, detail);
}

/// Whether every process of the server dies with it, and by what.
fn tree_kill_state(cgroup_kills_tree: bool, namespaced: bool, report: &mut Report) {
    let tree = if namespaced {
        "pid namespace: every process dies with the server"
    } else if cgroup_kills_tree {
        "cgroup kill when the server ends"
    } else {
        ""
    };
    report.push(
        Control::TreeKill,
        if tree.is_empty() {
            State::Missing
        } else {
            State::Enforced
        },
        if tree.is_empty() {
            "no pid namespace and no cgroup: orphans may outlive the server"
        } else {
            tree
        },
    );
}

fn network_state(spec: &SandboxSpec, netns: bool, report: &mut Report) {
    let landlock_tcp = report.state(Control::Landlock) == State::Enforced;
    let (state, detail) = match spec.network {
        Network::Host => (State::Off, "network: host (unrestricted)".to_string()),
        Network::None if netns => (
            State::Enforced,
            format!(
                "own network namespace, lo down{}",
                if landlock_tcp {
                    "; Landlock TCP denied"
                } else {
                    ""
                }
            ),
        ),
        Network::Loopback if netns => (
            State::Enforced,
            "own network namespace, lo up: private loopback only".to_string(),
        ),
        Network::Allow if netns => (
            State::Enforced,
            format!(
                "allow-list: {} hosts via the egress proxy on 127.0.0.1:{PROXY_PORT}; own network namespace with lo only{}",
                spec.allow_hosts.len(),
                if landlock_tcp {
                    "; Landlock TCP connect to the proxy port only"
                } else {
                    ""
                }
            ),
        ),
        _ if spec.seccomp => (
            State::Partial,
            "no network namespace: socket(2) denied by seccomp (loopback and the allow-list need namespaces)".to_string(),
        ),
        _ => (
            State::Missing,
            "no network namespace and seccomp off: the host network is reachable".to_string(),
        ),
    };
    report.push(Control::Network, state, detail);
}
