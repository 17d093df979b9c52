//! Escape matrix: each row runs a real attempt inside the sandbox and asserts its exact outcome, and
//! runs the same attempt unsandboxed to show it succeeds there (so the test can fail). Targets are
//! 127.0.0.1 listeners and files in the test's own temp dir; every loop is bounded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use manifold_sandbox::{Control, SandboxSpec, SandboxedCommand, State};

/// Processes a sandboxed fork bomb may hold; the bomb's own bound (`FORK_BOUND`) is far above it.
const PIDS_LIMIT: u64 = 32;
const FORK_BOUND: usize = 200;
const MEMORY_LIMIT: u64 = 64 * 1024 * 1024;
/// How long a daemonised grandchild waits to be killed before the test gives up on it.
const ORPHAN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn spec(&self) -> SandboxSpec {
        let mut spec = SandboxSpec::new(
            self.path("workspace"),
            self.path("output"),
            self.path("home"),
        );
        spec.pids = PIDS_LIMIT;
        spec.memory = MEMORY_LIMIT;
        spec
    }
    fn sandboxed(&self, spec: &SandboxSpec, program: &str, args: &[&str]) -> Output {
        let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
        let mut command = SandboxedCommand::new(launcher, spec, program, args).unwrap();
        command
            .command_mut()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let sandboxed = command.spawn().unwrap();
        let out = sandboxed.child.wait_with_output().unwrap();
        drop(sandboxed.cgroup);
        out
    }
    fn sh_in(&self, script: &str) -> String {
        text(&self.sandboxed(&self.spec(), "sh", &["-c", script]))
    }
}

fn sh_out(script: &str) -> String {
    text(
        &Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .output()
            .unwrap(),
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}rc={:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        out.status.code()
    )
}

/// A python snippet that prints the errno name of `expr` failing, or "ok".
fn py_errno(body: &str) -> String {
    format!(
        "python3 -c 'import errno,socket,os,ctypes,sys\ntry:\n {body}\n print(\"ok\")\nexcept OSError as e:\n print(errno.errorcode[e.errno])'"
    )
}

#[test]
fn secret_outside_the_workspace_is_not_there() {
    let env = Env::new();
    std::fs::write(env.path("secret"), "hunter2").unwrap();
    let cmd = format!("cat {}", env.path("secret").display());
    assert!(
        env.sh_in(&cmd).contains("No such file or directory"),
        "{}",
        env.sh_in(&cmd)
    );
    assert!(sh_out(&cmd).contains("hunter2"));
}

#[test]
fn gateway_environ_is_not_there() {
    let env = Env::new();
    let cmd = format!(
        "cat /proc/{}/environ >/dev/null && echo read",
        std::process::id()
    );
    assert!(
        env.sh_in(&cmd).contains("No such file or directory"),
        "{}",
        env.sh_in(&cmd)
    );
    assert!(sh_out(&cmd).contains("read"));
}

#[test]
fn writes_land_only_in_workspace_output_and_tmp() {
    let env = Env::new();
    std::fs::create_dir(env.path("outside")).unwrap();
    std::fs::set_permissions(env.path("outside"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let outside = format!("touch {}/x && echo wrote", env.path("outside").display());
    assert!(
        env.sh_in(&outside).contains("No such file or directory"),
        "{}",
        env.sh_in(&outside)
    );
    assert!(sh_out(&outside).contains("wrote"));
    let inside = env.sh_in("touch /workspace/a /output/b /tmp/c /home/sandbox/d && echo wrote");
    assert!(inside.contains("wrote"), "{inside}");
    assert!(env.path("workspace/a").exists() && env.path("output/b").exists());
}

#[test]
fn usr_is_read_only() {
    let env = Env::new();
    let probe = format!("/usr/.manifold-escape-{}", std::process::id());
    let cmd = format!("touch {probe} && echo wrote");
    assert!(
        env.sh_in(&cmd).contains("Read-only file system"),
        "{}",
        env.sh_in(&cmd)
    );
    assert!(sh_out(&cmd).contains("wrote"));
    std::fs::remove_file(&probe).unwrap();
}

#[test]
fn tcp_and_udp_to_host_loopback_fail() {
    let env = Env::new();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (tp, up) = (
        tcp.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
    );
    let connect = py_errno(&format!(
        "socket.create_connection((\"127.0.0.1\", {tp}), timeout=2)"
    ));
    assert!(
        env.sh_in(&connect).contains("EACCES"),
        "{}",
        env.sh_in(&connect)
    );
    assert!(sh_out(&connect).contains("ok"));
    let send = py_errno(&format!(
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"127.0.0.1\", {up}))"
    ));
    assert!(
        env.sh_in(&send).contains("ENETUNREACH"),
        "{}",
        env.sh_in(&send)
    );
    assert!(sh_out(&send).contains("ok"));
    let mut buf = [0u8; 4];
    udp.set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    assert_eq!(
        udp.recv(&mut buf).unwrap(),
        1,
        "only the unsandboxed datagram arrives"
    );
}

#[test]
fn host_unix_sockets_fail_by_path_and_abstract_name() {
    use std::os::linux::net::SocketAddrExt;
    let env = Env::new();
    let path = env.path("host.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let by_path = py_errno(&format!(
        "socket.socket(socket.AF_UNIX).connect(\"{}\")",
        path.display()
    ));
    assert!(
        env.sh_in(&by_path).contains("ENOENT"),
        "{}",
        env.sh_in(&by_path)
    );
    assert!(sh_out(&by_path).contains("ok"));
    let name = format!("manifold-escape-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _abstract = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let abstract_ = py_errno(&format!(
        "socket.socket(socket.AF_UNIX).connect(\"\\0{name}\")"
    ));
    let inside = env.sh_in(&abstract_);
    assert!(
        inside.contains("ECONNREFUSED"),
        "abstract names are per network namespace: {inside}"
    );
    assert!(sh_out(&abstract_).contains("ok"));
}

#[test]
fn fork_bomb_stops_at_the_pids_limit() {
    let env = Env::new();
    let bomb = format!(
        "python3 -c 'import os,time\nn=0\nfor i in range({FORK_BOUND}):\n try:\n  p=os.fork()\n except OSError as e:\n  print(\"stopped\", e.errno); break\n if p==0:\n  os.close(1); os.close(2); time.sleep(2); os._exit(0)\n n+=1\nprint(\"forked\", n)'"
    );
    let inside = env.sh_in(&bomb);
    assert!(
        inside.contains("stopped 11"),
        "EAGAIN before the bound: {inside}"
    );
    let forked: usize = inside
        .split("forked ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(forked < PIDS_LIMIT as usize, "{inside}");
    assert!(sh_out(&bomb).contains(&format!("forked {FORK_BOUND}")));
}

#[test]
fn memory_hog_is_killed_at_the_memory_limit() {
    let env = Env::new();
    let hog = "python3 -c 'b=bytearray(256*1024*1024); b[::4096]=b\"x\"*len(b[::4096]); print(\"allocated\")'";
    let inside = env.sh_in(hog);
    assert!(
        !inside.contains("allocated") && inside.contains("rc=Some(137)"),
        "{inside}"
    );
    assert!(sh_out(hog).contains("allocated"));
}

#[test]
fn ptrace_is_denied() {
    let env = Env::new();
    let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
    let attach = py_errno(&format!(
        "libc=ctypes.CDLL(None, use_errno=True)\n if libc.ptrace(16, {}, 0, 0) != 0: raise OSError(ctypes.get_errno(), \"ptrace\")",
        victim.id()
    ));
    assert!(
        env.sh_in(&attach).contains("EPERM"),
        "{}",
        env.sh_in(&attach)
    );
    assert!(
        sh_out(&attach).contains("ok"),
        "unsandboxed root attaches (no Yama here)"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
fn gateway_cannot_be_signalled() {
    let env = Env::new();
    let cmd = format!("kill -0 {} && echo reached", std::process::id());
    assert!(
        env.sh_in(&cmd).contains("No such process"),
        "{}",
        env.sh_in(&cmd)
    );
    assert!(sh_out(&cmd).contains("reached"));
}

#[test]
fn setuid_binary_gains_nothing() {
    let env = Env::new();
    let spec = env.spec();
    std::fs::create_dir_all(&spec.workspace).unwrap();
    let id = spec.workspace.join("id");
    std::fs::copy("/usr/bin/id", &id).unwrap();
    std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o4755)).unwrap();
    assert_eq!(env.sh_in("/workspace/id -u").lines().next(), Some("65534"));
    let baseline = sh_out(&format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups {} -u",
        id.display()
    ));
    assert_eq!(baseline.lines().next(), Some("0"), "{baseline}");
}

#[test]
fn nested_user_namespace_is_refused() {
    let env = Env::new();
    assert!(
        env.sh_in("unshare -U true && echo nested")
            .contains("Operation not permitted")
    );
    assert!(sh_out("unshare -U true && echo nested").contains("nested"));
}

/// Pids whose command line holds `marker` (a number unique to this test run).
fn pids_with_arg(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

fn alive_with_arg(marker: &str) -> bool {
    !pids_with_arg(marker).is_empty()
}

/// Waits (bounded by `ORPHAN_WAIT`) for a process carrying `marker` to show, and says whether
/// one did. A process in the middle of `execve` briefly has an empty command line, and a
/// backgrounded `setsid sleep` may not have been exec'd yet when its shell returns: one look can
/// miss it. Seen once is enough: a second look could race with something else on the machine
/// signalling a process group whose number the orphan has just reused.
fn seen_within_wait(marker: &str) -> bool {
    let deadline = std::time::Instant::now() + ORPHAN_WAIT;
    loop {
        if alive_with_arg(marker) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn daemonised_grandchild_dies_with_its_server() {
    let env = Env::new();
    let marker = format!("29.{}", std::process::id());
    let script = format!("setsid sleep {marker} </dev/null >/dev/null 2>&1 & echo started");
    assert!(env.sh_in(&script).contains("started"));
    assert!(
        gone_within_wait(&marker),
        "the orphan outlived its sandboxed server"
    );
    assert!(sh_out(&script).contains("started"));
    let survives = seen_within_wait(&marker);
    kill_marked(&marker);
    assert!(survives, "unsandboxed, the orphan survives");
}

#[test]
fn node_and_python_run_inside() {
    let env = Env::new();
    let out = env.sandboxed(
        &env.spec(),
        "python3",
        &[
            "-c",
            "import json,sys; print(json.dumps({'py': sys.version_info[0]}))",
        ],
    );
    assert!(text(&out).contains("{\"py\": 3}"), "{}", text(&out));
    let js = "const cp=require('child_process'); console.log('node', cp.execFileSync('/bin/echo',['child']).toString().trim())";
    let out = env.sandboxed(&env.spec(), "node", &["-e", js]);
    assert!(text(&out).contains("node child"), "{}", text(&out));
}

#[test]
fn report_names_every_enforced_control() {
    let env = Env::new();
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    let mut command =
        SandboxedCommand::new(launcher, &env.spec(), "true", [] as [&str; 0]).unwrap();
    command.command_mut().stdin(Stdio::null());
    let mut sandboxed = command.spawn().unwrap();
    assert!(sandboxed.child.wait().unwrap().success());
    for control in [
        Control::Namespaces,
        Control::Filesystem,
        Control::Network,
        Control::Memory,
        Control::Pids,
        Control::Cpu,
        Control::Rlimits,
        Control::NoNewPrivs,
        Control::Landlock,
        Control::Seccomp,
        Control::TreeKill,
    ] {
        assert_eq!(
            sandboxed.report.state(control),
            State::Enforced,
            "{control:?}: {:?}",
            sandboxed.report
        );
    }
}

#[test]
fn a_required_control_that_is_off_refuses_the_server() {
    let env = Env::new();
    let mut spec = env.spec();
    spec.seccomp = false;
    spec.require.push(Control::Seccomp);
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    let marker = env.path("workspace/ran");
    let command = SandboxedCommand::new(launcher, &spec, "touch", ["/workspace/ran"]).unwrap();
    let err = command.spawn().err().expect("refused");
    assert_eq!(err.control(), Some(Control::Seccomp), "{err}");
    assert!(!marker.exists(), "the server never ran");
}

#[test]
fn without_namespaces_landlock_still_hides_the_secret() {
    let env = Env::new();
    std::fs::write(env.path("secret"), "hunter2").unwrap();
    let mut spec = env.spec();
    spec.namespaces = false;
    spec.require = vec![Control::Landlock];
    let out = text(&env.sandboxed(&spec, "cat", &[env.path("secret").to_str().unwrap()]));
    assert!(out.contains("Permission denied"), "{out}");
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    let mut command = SandboxedCommand::new(launcher, &spec, "true", [] as [&str; 0]).unwrap();
    command.command_mut().stdin(Stdio::null());
    let mut sandboxed = command.spawn().unwrap();
    sandboxed.child.wait().unwrap();
    assert_eq!(sandboxed.report.state(Control::Filesystem), State::Partial);
    assert_eq!(sandboxed.report.state(Control::Namespaces), State::Off);
    assert_eq!(sandboxed.report.state(Control::Network), State::Partial);
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let connect = py_errno(&format!(
        "socket.create_connection((\"127.0.0.1\", {}), timeout=2)",
        tcp.local_addr().unwrap().port()
    ));
    let inside = text(&env.sandboxed(&spec, "sh", &["-c", connect.as_str()]));
    assert!(
        inside.contains("EPERM"),
        "seccomp denies socket(2) without a network namespace: {inside}"
    );
    assert!(sh_out(&connect).contains("ok"));
}

#[test]
fn the_server_holds_no_capabilities() {
    let env = Env::new();
    let cmd = "grep CapEff /proc/self/status";
    assert!(
        env.sh_in(cmd).contains("CapEff:\t0000000000000000"),
        "{}",
        env.sh_in(cmd)
    );
    assert!(
        !sh_out(cmd).contains("CapEff:\t0000000000000000"),
        "the test runs as root with capabilities"
    );
}

/// Waits (bounded by `ORPHAN_WAIT`) for every process carrying `marker` to go.
fn gone_within_wait(marker: &str) -> bool {
    let deadline = std::time::Instant::now() + ORPHAN_WAIT;
    while alive_with_arg(marker) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    !alive_with_arg(marker)
}

fn kill_marked(marker: &str) {
    for pid in pids_with_arg(marker) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[test]
fn killing_the_launcher_takes_the_whole_tree_down() {
    let env = Env::new();
    let marker = format!("28.{}", std::process::id());
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    let script = format!("sleep {marker} & sleep {marker}.1 & echo up; wait");
    let mut command =
        SandboxedCommand::new(launcher, &env.spec(), "sh", ["-c", script.as_str()]).unwrap();
    command
        .command_mut()
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut sandboxed = command.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(sandboxed.child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "up");
    assert!(seen_within_wait(&marker));
    sandboxed.child.kill().unwrap();
    sandboxed.child.wait().unwrap();
    // The cgroup is still held: PDEATHSIG and the pid namespace alone must end the tree.
    let gone = gone_within_wait(&marker);
    kill_marked(&marker);
    assert!(gone, "a sandboxed process outlived the killed launcher");
    drop(sandboxed.cgroup);
}

#[test]
fn without_namespaces_the_cgroup_kills_the_orphan() {
    let env = Env::new();
    let marker = format!("27.{}", std::process::id());
    let mut spec = env.spec();
    spec.namespaces = false;
    spec.require = vec![Control::TreeKill];
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    let script = format!("setsid sleep {marker} </dev/null >/dev/null 2>&1 & echo started");
    let mut command =
        SandboxedCommand::new(launcher, &spec, "sh", ["-c", script.as_str()]).unwrap();
    command
        .command_mut()
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let sandboxed = command.spawn().unwrap();
    assert_eq!(sandboxed.report.state(Control::TreeKill), State::Enforced);
    assert!(text(&sandboxed.child.wait_with_output().unwrap()).contains("started"));
    assert!(
        seen_within_wait(&marker),
        "without a pid namespace the orphan survives its server"
    );
    drop(sandboxed.cgroup);
    let gone = gone_within_wait(&marker);
    kill_marked(&marker);
    assert!(gone, "dropping the cgroup must kill the orphan");
}

#[test]
fn a_tokio_command_runs_sandboxed() {
    let env = Env::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    let mut command =
        SandboxedCommand::new(launcher, &env.spec(), "hostname", [] as [&str; 0]).unwrap();
    command
        .command_mut()
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let out = runtime.block_on(async {
        let sandboxed = command
            .spawn_with(|c| tokio::process::Command::from(c).kill_on_drop(true).spawn())
            .unwrap();
        sandboxed.child.wait_with_output().await.unwrap()
    });
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "sandbox");
}

#[test]
fn read_only_paths_are_readable_and_not_writable() {
    let env = Env::new();
    std::fs::create_dir(env.path("tools")).unwrap();
    std::fs::write(env.path("tools/tool.txt"), "tool").unwrap();
    let mut spec = env.spec();
    spec.read_only.push(env.path("tools"));
    let tools = env.path("tools");
    let script = format!(
        "cat {0}/tool.txt; touch {0}/new && echo wrote",
        tools.display()
    );
    let inside = text(&env.sandboxed(&spec, "sh", &["-c", script.as_str()]));
    assert!(
        inside.starts_with("tool") && inside.contains("Read-only file system"),
        "{inside}"
    );
    assert!(!inside.contains("wrote"));
    assert!(sh_out(&script).contains("wrote"));
}

#[test]
fn read_write_paths_are_writable_and_the_inner_listing_wins() {
    let env = Env::new();
    for dir in ["notes", "notes/frozen", "shelf", "shelf/drafts"] {
        std::fs::create_dir(env.path(dir)).unwrap();
    }
    if nix::unistd::geteuid().is_root() {
        // What a user does for a root gateway, whose servers run as nobody.
        let (uid, gid) = manifold_sandbox::spec::DEFAULT_ROOT_RUN_AS;
        for dir in ["notes", "notes/frozen", "shelf", "shelf/drafts"] {
            std::os::unix::fs::chown(env.path(dir), Some(uid), Some(gid)).unwrap();
            assert!(!manifold_sandbox::unwritable_for(&env.path(dir), uid, gid));
        }
    }
    let mut spec = env.spec();
    spec.read_write.push(env.path("notes"));
    spec.read_only.push(env.path("notes/frozen"));
    spec.read_only.push(env.path("shelf"));
    spec.read_write.push(env.path("shelf/drafts"));
    let attempt = |dir: &str| {
        format!(
            "touch {0}/new 2>/dev/null && echo {1}:wrote || echo {1}:refused",
            env.path(dir).display(),
            dir
        )
    };
    let script = ["notes", "notes/frozen", "shelf", "shelf/drafts"]
        .map(attempt)
        .join("; ");
    let inside = text(&env.sandboxed(&spec, "sh", &["-c", script.as_str()]));
    for expected in [
        "notes:wrote",
        "notes/frozen:refused",
        "shelf:refused",
        "shelf/drafts:wrote",
    ] {
        assert!(inside.contains(expected), "{expected}: {inside}");
    }
    assert!(env.path("notes/new").exists() && env.path("shelf/drafts/new").exists());
    assert!(!env.path("shelf/new").exists());
}

#[test]
fn a_program_missing_inside_is_a_setup_error_naming_it() {
    let env = Env::new();
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    let command = SandboxedCommand::new(
        launcher,
        &env.spec(),
        "/opt/no-such-server",
        [] as [&str; 0],
    )
    .unwrap();
    let err = command.spawn().err().expect("setup error");
    assert!(
        matches!(
            err,
            manifold_sandbox::SandboxError::Setup {
                control: Control::Filesystem,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("/opt/no-such-server"), "{err}");
}

/// An HTTP server on the host's 127.0.0.1 answering every request `hello`, one thread per test.
fn host_http_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    port
}

#[test]
fn loopback_network_has_a_private_lo_and_no_host_listener() {
    let env = Env::new();
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let mut spec = env.spec();
    spec.network = manifold_sandbox::Network::Loopback;
    let private = py_errno(
        "l=socket.create_server((\"127.0.0.1\", 0)); c=socket.create_connection(l.getsockname(), timeout=2); l.accept()",
    );
    let inside = text(&env.sandboxed(&spec, "sh", &["-c", &private]));
    assert!(inside.contains("ok"), "lo is up inside: {inside}");
    let strict = env.sh_in(&private);
    assert!(
        !strict.contains("ok"),
        "with network none lo stays down: {strict}"
    );
    let to_host = py_errno(&format!(
        "socket.create_connection((\"127.0.0.1\", {port}), timeout=2)"
    ));
    let inside = text(&env.sandboxed(&spec, "sh", &["-c", &to_host]));
    assert!(inside.contains("ECONNREFUSED"), "{inside}");
    assert!(sh_out(&to_host).contains("ok"));
}

#[test]
fn allow_list_proxy_allows_one_host_refuses_another_and_direct_connects_fail() {
    use manifold_egress::{Egress, Policy, serve};
    let env = Env::new();
    let port = host_http_server();
    let mut spec = env.spec();
    spec.network = manifold_sandbox::Network::Allow;
    spec.allow_hosts = vec![format!("localhost:{port}")];
    // The test host is the host's loopback, which the proxy refuses unless opened here.
    spec.allow_private = vec!["127.0.0.0/8".into(), "::1".into()];
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    // `localhost.` (trailing dot) is not in NO_PROXY, so urllib sends it to the proxy.
    let lines = [
        "import urllib.request,urllib.error,socket,errno,os".to_string(),
        format!("for url in (\"http://localhost.:{port}/x\", \"http://other.invalid:{port}/x\"):"),
        " try:".into(),
        "  r=urllib.request.urlopen(url, timeout=5); print(url, r.status, r.read().decode())".into(),
        " except urllib.error.HTTPError as e:".into(),
        "  print(url, e.code, e.read().decode().strip())".into(),
        "try:".into(),
        format!(" socket.create_connection((\"127.0.0.1\", {port}), timeout=2); print(\"direct ok\")"),
        "except OSError as e:".into(),
        " print(\"direct\", errno.errorcode[e.errno])".into(),
        "print(\"proxy env\", os.environ.get(\"HTTP_PROXY\"), os.environ.get(\"NODE_USE_ENV_PROXY\"))".into(),
    ];
    let script = format!("python3 -c '{}'", lines.join("\n"));
    let mut command = SandboxedCommand::new(launcher, &spec, "sh", ["-c", &script]).unwrap();
    command
        .command_mut()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let sandboxed = command.spawn().unwrap();
    let network = sandboxed
        .report
        .enforcements
        .iter()
        .rev()
        .find(|e| e.control == Control::Network)
        .unwrap()
        .clone();
    assert_eq!(network.state, State::Enforced);
    assert!(
        network.detail.contains("allow-list: 1 hosts"),
        "{network:?}"
    );
    let listener = sandboxed
        .egress_listener
        .expect("allow hands over the proxy listener");
    listener.set_nonblocking(true).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let policy = Policy::new(&spec.allow_hosts, &spec.allow_private).unwrap();
    {
        let _guard = runtime.enter();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        runtime.spawn(serve(listener, Egress::new("escape-test", policy)));
    }
    let out = text(&sandboxed.child.wait_with_output().unwrap());
    drop(sandboxed.cgroup);
    assert!(
        out.contains(&format!("http://localhost.:{port}/x 200 hello")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "http://other.invalid:{port}/x 403 manifold egress proxy: refused other.invalid:{port}: not in allow_hosts"
        )),
        "{out}"
    );
    assert!(out.contains("direct EACCES"), "{out}");
    assert!(out.contains("proxy env http://127.0.0.1:3128 1"), "{out}");
    let baseline = py_errno(&format!(
        "socket.create_connection((\"127.0.0.1\", {port}), timeout=2)"
    ));
    assert!(
        sh_out(&baseline).contains("ok"),
        "unsandboxed the direct connect succeeds"
    );
}

#[test]
fn allow_without_namespaces_falls_back_to_no_network_reported_partial() {
    let env = Env::new();
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let mut spec = env.spec();
    spec.network = manifold_sandbox::Network::Allow;
    spec.allow_hosts = vec!["example.com".into()];
    spec.namespaces = false;
    spec.require = Vec::new();
    let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
    let connect = py_errno(&format!(
        "socket.create_connection((\"127.0.0.1\", {port}), timeout=2)"
    ));
    let mut command = SandboxedCommand::new(launcher, &spec, "sh", ["-c", &connect]).unwrap();
    command
        .command_mut()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let sandboxed = command.spawn().unwrap();
    assert_eq!(sandboxed.report.state(Control::Network), State::Partial);
    assert!(
        sandboxed.egress_listener.is_none(),
        "no proxy listener without a network namespace"
    );
    let out = text(&sandboxed.child.wait_with_output().unwrap());
    drop(sandboxed.cgroup);
    assert!(out.contains("EPERM"), "socket(2) denied: {out}");
    assert!(sh_out(&connect).contains("ok"));
}

/// Dirs every hierarchy's server cgroups are made in (our own cgroup there).
fn cgroup_parents() -> Vec<PathBuf> {
    manifold_sandbox::cgroup::hierarchies()
        .into_iter()
        .filter(|h| {
            h.v2 || h
                .controllers
                .iter()
                .any(|c| matches!(c.as_str(), "memory" | "pids" | "cpu"))
        })
        .map(|h| h.own_dir)
        .collect()
}

#[test]
fn cgroups_left_by_an_earlier_process_with_our_pid_do_not_cost_the_limits() {
    // A gateway killed outright leaves its servers' cgroups; a later process given the same pid
    // picks the same names.
    let left: Vec<PathBuf> = cgroup_parents()
        .iter()
        .flat_map(|parent| {
            (0..8)
                .map(move |id| parent.join(format!("manifold-sandbox-{}-{id}", std::process::id())))
        })
        .collect();
    for dir in &left {
        let _ = std::fs::create_dir(dir);
    }
    let env = Env::new();
    let hog = "python3 -c 'b=bytearray(256*1024*1024); b[::4096]=b\"x\"*len(b[::4096]); print(\"allocated\")'";
    let inside = env.sh_in(hog);
    for dir in &left {
        let _ = std::fs::remove_dir(dir);
    }
    assert!(
        !inside.contains("allocated") && inside.contains("rc=Some(137)"),
        "{inside}"
    );
}

#[test]
fn cgroups_of_a_gateway_that_is_gone_are_swept_with_their_processes() {
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let mut orphan = Command::new("sleep").arg("30").spawn().unwrap();
    let stale: Vec<PathBuf> = cgroup_parents()
        .iter()
        .map(|parent| parent.join(format!("manifold-sandbox-{}-0", gone.id())))
        .collect();
    for dir in &stale {
        std::fs::create_dir(dir).unwrap();
    }
    std::fs::write(stale[0].join("cgroup.procs"), orphan.id().to_string()).unwrap();
    let env = Env::new();
    assert!(env.sh_in("echo started").contains("started"));
    let still: Vec<&PathBuf> = stale.iter().filter(|d| d.exists()).collect();
    let until = std::time::Instant::now() + ORPHAN_WAIT;
    let mut orphan_exit = orphan.try_wait().unwrap();
    while orphan_exit.is_none() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
        orphan_exit = orphan.try_wait().unwrap();
    }
    for dir in &still {
        let _ = std::fs::remove_dir(dir);
    }
    if orphan_exit.is_none() {
        let _ = orphan.kill();
        let _ = orphan.wait();
    }
    assert!(still.is_empty(), "left behind: {still:?}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        orphan_exit.and_then(|s| s.signal()),
        Some(9),
        "the orphan is killed by the sweep"
    );
}
