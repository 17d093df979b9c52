//! The fallbacks, on a machine that has every mechanism: the probe's answer is forced weaker
//! (`SandboxedCommand::force_probe`, honoured by a debug launcher) and each test checks both the
//! report and what the server can really do, so a report that lied would fail here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use manifold_sandbox::{
    Control, ForcedProbe, Report, SandboxError, SandboxSpec, SandboxedCommand, State,
};

const NO_USERNS: ForcedProbe = ForcedProbe {
    no_userns: true,
    landlock_abi: None,
};

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
    /// Strict, but requiring nothing: a fallback tier is allowed to start.
    fn spec(&self) -> SandboxSpec {
        let mut spec = SandboxSpec::new(
            self.path("workspace"),
            self.path("output"),
            self.path("home"),
        );
        spec.require = Vec::new();
        spec
    }
    fn command(
        &self,
        spec: &SandboxSpec,
        forced: ForcedProbe,
        program: &str,
        args: &[&str],
    ) -> SandboxedCommand {
        let launcher = Path::new(env!("CARGO_BIN_EXE_manifold-sandbox-exec"));
        let mut command = SandboxedCommand::new(launcher, spec, program, args).unwrap();
        command.force_probe(forced);
        command
            .command_mut()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
    /// Runs `script` under `forced`; the report and what the script printed.
    fn run(&self, spec: &SandboxSpec, forced: ForcedProbe, script: &str) -> (Report, String) {
        let sandboxed = self
            .command(spec, forced, "sh", &["-c", script])
            .spawn()
            .unwrap();
        let out = sandboxed.child.wait_with_output().unwrap();
        drop(sandboxed.cgroup);
        (sandboxed.report, text(&out))
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}rc={:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        out.status.code()
    )
}

fn detail(report: &Report, control: Control) -> String {
    report
        .controls()
        .iter()
        .find(|e| e.control == control)
        .map(|e| e.detail.clone())
        .unwrap_or_default()
}

fn host_user_ns() -> String {
    std::fs::read_link("/proc/self/ns/user")
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn without_user_namespaces_the_server_starts_on_the_fallback_tier() {
    let env = Env::new();
    std::fs::write(env.path("secret"), "hunter2").unwrap();
    let script = format!(
        "readlink /proc/self/ns/user; cat {} || echo denied",
        env.path("secret").display()
    );
    let (report, out) = env.run(&env.spec(), NO_USERNS, &script);
    // It really ran in the host's user namespace, and Landlock still hid the secret.
    assert!(out.contains(&host_user_ns()), "{out}");
    assert!(
        out.contains("Permission denied") && !out.contains("hunter2"),
        "{out}"
    );
    assert_eq!(report.state(Control::Namespaces), State::Missing);
    let why = detail(&report, Control::Namespaces);
    assert!(
        why.contains("EPERM") && why.contains("allow unprivileged user namespaces"),
        "errno and fix: {why}"
    );
    assert_eq!(report.state(Control::Filesystem), State::Partial);
    assert_eq!(report.state(Control::Network), State::Partial);
    for control in [
        Control::Memory,
        Control::Pids,
        Control::Rlimits,
        Control::NoNewPrivs,
        Control::Landlock,
        Control::Seccomp,
        Control::TreeKill,
    ] {
        assert_eq!(
            report.state(control),
            State::Enforced,
            "{control:?}: {report:?}"
        );
    }
    let degraded: Vec<Control> = report.degraded().iter().map(|e| e.control).collect();
    assert_eq!(
        degraded,
        vec![Control::Namespaces, Control::Filesystem, Control::Network]
    );
}

#[test]
fn with_namespaces_the_same_spec_is_fully_enforced() {
    let env = Env::new();
    let (report, out) = env.run(
        &env.spec(),
        ForcedProbe::default(),
        "readlink /proc/self/ns/user",
    );
    assert!(!out.contains(&host_user_ns()), "{out}");
    assert!(report.degraded().is_empty(), "{report:?}");
}

#[test]
fn an_older_landlock_abi_leaves_the_fallback_filesystem_partial_and_lets_truncate_through() {
    let env = Env::new();
    // A world-writable file under a read_only path: only Landlock (TRUNCATE, ABI 3) stops
    // truncate(2) on the fallback tier.
    let shelf = env.path("shelf");
    std::fs::create_dir(&shelf).unwrap();
    std::fs::set_permissions(&shelf, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = shelf.join("book");
    std::fs::write(&file, "pages").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut spec = env.spec();
    spec.read_only.push(shelf.clone());
    let truncate = format!(
        "python3 -c 'import os\ntry:\n os.truncate(\"{}\", 0); print(\"truncated\")\nexcept OSError as e: print(e.strerror)'",
        file.display()
    );
    let (full, out) = env.run(&spec, NO_USERNS, &truncate);
    assert!(out.contains("Permission denied"), "current ABI: {out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "pages");
    assert_eq!(full.state(Control::Landlock), State::Enforced);

    let old = ForcedProbe {
        no_userns: true,
        landlock_abi: Some(1),
    };
    let (report, out) = env.run(&spec, old, &truncate);
    assert!(
        out.contains("truncated"),
        "ABI 1 has no TRUNCATE right: {out}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "");
    assert_eq!(report.state(Control::Landlock), State::Partial);
    let landlock = detail(&report, Control::Landlock);
    assert!(
        landlock.contains("V1") && landlock.contains("no TRUNCATE"),
        "{landlock}"
    );
    assert_eq!(report.state(Control::Filesystem), State::Partial);
    let fs = detail(&report, Control::Filesystem);
    assert!(fs.contains("Landlock is partial"), "{fs}");
}

#[test]
fn an_older_landlock_abi_with_namespaces_leaves_only_landlock_partial() {
    let env = Env::new();
    let old = ForcedProbe {
        no_userns: false,
        landlock_abi: Some(1),
    };
    let (report, out) = env.run(&env.spec(), old, "echo ran");
    assert!(out.contains("ran"), "{out}");
    assert_eq!(report.state(Control::Landlock), State::Partial);
    assert_eq!(report.state(Control::Namespaces), State::Enforced);
    assert_eq!(
        report.state(Control::Filesystem),
        State::Enforced,
        "the minimal root does not depend on Landlock"
    );
    assert_eq!(report.state(Control::Network), State::Enforced);
}

#[test]
fn without_landlock_the_fallback_filesystem_is_missing_and_the_host_files_show() {
    let env = Env::new();
    let secret = env.path("secret");
    std::fs::write(&secret, "hunter2").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let none = ForcedProbe {
        no_userns: true,
        landlock_abi: Some(0),
    };
    let (report, out) = env.run(&env.spec(), none, &format!("cat {}", secret.display()));
    assert!(out.contains("hunter2"), "missing means missing: {out}");
    assert_eq!(report.state(Control::Landlock), State::Missing);
    assert_eq!(report.state(Control::Filesystem), State::Missing);
    assert!(
        detail(&report, Control::Landlock).contains("EOPNOTSUPP"),
        "{report:?}"
    );
}

#[test]
fn a_server_requiring_namespaces_is_refused_without_user_namespaces() {
    let env = Env::new();
    let mut spec = env.spec();
    spec.require = vec![Control::Namespaces];
    let marker = env.path("workspace/ran");
    let err = env
        .command(&spec, NO_USERNS, "touch", &[marker.to_str().unwrap()])
        .spawn()
        .err()
        .expect("refused");
    assert!(matches!(err, SandboxError::Refused { .. }), "{err}");
    assert_eq!(err.control(), Some(Control::Namespaces));
    let message = err.to_string();
    assert!(
        message.contains("Namespaces is not enforced")
            && message.contains("EPERM")
            && message.contains("allow unprivileged user namespaces"),
        "{message}"
    );
    assert!(!marker.exists(), "the server never ran");
}
