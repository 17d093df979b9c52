//! `manifold doctor`: what the sandbox would enforce on this host, shown before any server starts.
//!
//! The host probe alone can only guess; so doctor also builds real sandboxes around a trivial
//! command (the default strict spec, then each configured stdio server's own spec) and prints the
//! launcher's real report, so what it says is what `serve` would get.

use std::path::{Path, PathBuf};

use manifold_config::{ServerConfig, ServerKind};
use manifold_sandbox::{
    Control, Enforcement, HostProbe, Network, Report, SandboxError, SandboxSpec, SandboxedCommand,
    State,
};
use manifold_upstream::transport::stdio::{StdioSandbox, StdioSpec};

use crate::report::{CliError, Outcome};

/// The trivial program doctor runs inside each sandbox: present in every minimal root (/usr binds).
pub const TRIVIAL_PROGRAM: &str = "/bin/true";

/// `manifold doctor [--config FILE]`: exit 0 when every stdio server would start, 1 otherwise.
pub fn doctor(given: Option<&Path>) -> Result<Outcome, CliError> {
    let config = crate::config_file::load_config(given)?;
    println!("host:");
    print_probe(&manifold_sandbox::probe());
    let launcher = manifold_sandbox::default_launcher().map_err(|e| {
        CliError::with_hint(
            e.to_string(),
            "install manifold-sandbox-exec beside the manifold binary",
        )
    })?;
    println!("strict sandbox around {TRIVIAL_PROGRAM}:");
    let scratch = std::env::temp_dir().join(format!("manifold-doctor-{}", std::process::id()));
    let mut strict = SandboxSpec::new(
        scratch.join("workspace"),
        scratch.join("output"),
        scratch.join("home"),
    );
    // Nothing required here, so every control's state is shown instead of the first refusal.
    strict.require.clear();
    let outcome = run_trivial(&launcher, &strict);
    let _ = std::fs::remove_dir_all(&scratch);
    match outcome {
        Ok(report) => print_report(&report),
        Err(e) => println!("  could not build a sandbox: {e}"),
    }
    println!("servers:");
    let unmet: Vec<String> = config
        .servers
        .iter()
        .filter_map(|server| print_server(&launcher, server))
        .collect();
    if unmet.is_empty() {
        return Ok(Outcome::Success);
    }
    Err(CliError::with_hint(
        format!(
            "{} server(s) would not start: {}",
            unmet.len(),
            unmet.join("; ")
        ),
        "fix the control on this host (see its line above) or drop it from that server's sandbox `require`",
    ))
}

/// Spawns the trivial program in `spec`'s sandbox, waits for it and returns what was enforced.
fn run_trivial(launcher: &Path, spec: &SandboxSpec) -> Result<Report, SandboxError> {
    let mut command =
        SandboxedCommand::new(launcher, spec, TRIVIAL_PROGRAM, std::iter::empty::<&str>())?;
    command
        .command_mut()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    let mut sandboxed = command.spawn()?;
    let _ = sandboxed.child.wait();
    Ok(sandboxed.report)
}

fn print_probe(host: &HostProbe) {
    let line = |name: &str, state: State, detail: &str| {
        println!("  {name:<16} {:<8} {detail}", state_word(state));
    };
    match &host.user_namespaces {
        Ok(()) => line("user_namespaces", State::Enforced, "available"),
        Err(e) => line("user_namespaces", State::Missing, e),
    }
    match &host.landlock_abi {
        Ok(abi) => line("landlock", State::Enforced, &format!("ABI {abi}")),
        Err(e) => line(
            "landlock",
            State::Missing,
            &format!("{e}; boot with lsm=...,landlock (kernel 5.13+)"),
        ),
    }
    if host.seccomp {
        line("seccomp", State::Enforced, "filters available");
    } else {
        line(
            "seccomp",
            State::Missing,
            "no Seccomp: in /proc/self/status; use a kernel with CONFIG_SECCOMP_FILTER",
        );
    }
    let v1 = host.cgroup_v1.join(" ");
    let v1_state = if host.cgroup_v1.is_empty() {
        State::Missing
    } else {
        State::Enforced
    };
    line("cgroup_v1", v1_state, &format!("controllers: {v1}"));
    match &host.cgroup_v2 {
        Some(c) if c.is_empty() => line(
            "cgroup_v2",
            State::Partial,
            "mounted, no controllers delegated; enable memory pids cpu in cgroup.subtree_control",
        ),
        Some(c) => line(
            "cgroup_v2",
            State::Enforced,
            &format!("controllers: {}", c.join(" ")),
        ),
        None => line("cgroup_v2", State::Missing, "not mounted"),
    }
    if host.cgroup_kill {
        line("cgroup.kill", State::Enforced, "available");
    } else {
        line(
            "cgroup.kill",
            State::Missing,
            "needs cgroup v2 on kernel 5.14+; trees are killed by bounded SIGKILL rounds instead",
        );
    }
}

fn print_report(report: &Report) {
    for Enforcement {
        control,
        state,
        detail,
    } in &report.enforcements
    {
        let name = control_name(*control);
        println!("    {name:<14} {:<8} {detail}", state_word(*state));
    }
}

fn state_word(state: State) -> &'static str {
    match state {
        State::Enforced => "enforced",
        State::Partial => "partial",
        State::Missing => "missing",
        State::Off => "off",
    }
}

/// Prints one server; returns why it would not start, if so.
fn print_server(launcher: &Path, server: &ServerConfig) -> Option<String> {
    let ServerKind::Stdio { spec: stdio, .. } = &server.kind else {
        return None;
    };
    let name = &server.name;
    let disabled = if server.enabled { "" } else { " (disabled)" };
    let spec_sandbox = &stdio.sandbox;
    let spec = match spec_sandbox {
        StdioSandbox::Unset => {
            println!("  {name}{disabled}: no sandbox decided: unsandboxed");
            return None;
        }
        StdioSandbox::Off => {
            println!(
                "  {name}{disabled}: profile off: unsandboxed, full access to files and network"
            );
            return None;
        }
        StdioSandbox::ContainerEngine => {
            println!(
                "  {name}{disabled}: profile default (none written), a container engine: the server runs in its container, which is its sandbox; the CLI starts unboxed (write a profile to box it)"
            );
            return None;
        }
        StdioSandbox::On(spec) | StdioSandbox::Default(spec) => spec,
    };
    let unwritten = matches!(spec_sandbox, StdioSandbox::Default(_));
    println!("  {name}{disabled}: {}", describe(spec, unwritten));
    print_exposure(stdio, spec);
    match run_trivial(launcher, spec) {
        Ok(report) => {
            print_report(&report);
            match report.first_unmet(&spec.require) {
                Some((control, detail)) => Some(unmet(name, control, detail)),
                None => {
                    println!("    would start");
                    None
                }
            }
        }
        Err(SandboxError::Refused { control, detail }) => Some(unmet(name, control, &detail)),
        Err(e) if unwritten => {
            println!(
                "    would start unsandboxed (the default profile falls back when its sandbox cannot be built): {e}"
            );
            None
        }
        Err(e) => {
            let why = format!("{name}: {e}");
            println!("    would not start: {e}");
            Some(why)
        }
    }
}

fn unmet(name: &str, control: Control, detail: &str) -> String {
    let control = control_name(control);
    println!("    would not start: required {control} is not enforced ({detail})");
    format!("{name}: required {control} is not enforced")
}

/// The resolved spec in one line: what the config layers merged into.
/// What the exposure rule adds for the server's command line (the same call as at start), what
/// it cannot bind, and a program that is not there: what "the sandbox hides a path" comes to.
fn print_exposure(stdio: &StdioSpec, spec: &SandboxSpec) {
    if let Some(why) = stdio.missing_program() {
        println!("    its program: {why}");
    }
    let exposure =
        manifold_sandbox::expose_command(spec, &stdio.command, &stdio.args, &stdio.lookup());
    let shown: Vec<String> = (exposure.read_only.iter())
        .map(|p| p.display().to_string())
        .collect();
    match shown.is_empty() {
        true => println!("    sees besides the system dirs and the lists above: nothing more"),
        false => println!(
            "    sees read-only besides the system dirs and the lists above (its command's needs): {}",
            shown.join(", ")
        ),
    }
    for (path, dir) in &exposure.unreachable {
        println!(
            "    cannot see {}: the server's uid cannot search {} (chmod o+x it, or install the program elsewhere)",
            path.display(),
            dir.display()
        );
    }
}

fn describe(spec: &SandboxSpec, unwritten: bool) -> String {
    let network = match spec.network {
        Network::None => "none",
        Network::Loopback => "loopback",
        Network::Allow => "allow",
        Network::Host => "host",
    };
    let profile = match (unwritten, spec.network) {
        (true, _) => "default (none written)",
        (false, Network::Host) => "network",
        (false, _) => "strict",
    };
    let dirs = |p: &PathBuf| p.display().to_string();
    let require: Vec<String> = spec.require.iter().map(|c| control_name(*c)).collect();
    let read_only: Vec<String> = spec.read_only.iter().map(dirs).collect();
    let read_write: Vec<String> = spec.read_write.iter().map(dirs).collect();
    format!(
        "profile {profile}, network {network}, workspace {}, output {}, home {}, read_only [{}], read_write [{}], memory {}, pids {}, cpu {}m, file_size {}, open_files {}, tmp_size {}, seccomp {}, require [{}]",
        dirs(&spec.workspace),
        dirs(&spec.output),
        dirs(&spec.home),
        read_only.join(", "),
        read_write.join(", "),
        spec.memory,
        spec.pids,
        spec.cpu_millis,
        spec.file_size,
        spec.open_files,
        spec.tmp_size,
        spec.seccomp,
        require.join(", ")
    )
}

/// The control as `require` and the logs spell it (`no_new_privs`, `tree_kill`).
fn control_name(control: Control) -> String {
    serde_json::to_value(control)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{control:?}"))
}
