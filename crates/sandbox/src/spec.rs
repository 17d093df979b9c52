//! What a server's sandbox should be (`SandboxSpec`) and what the launcher really applied (`Report`),
//! kept apart so health and logs show the applied state, not the intended one.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Size of the private `/tmp` when a spec does not say.
pub const DEFAULT_TMP_SIZE: u64 = 64 * 1024 * 1024;
/// cgroup memory limit (swap 0) when a spec does not say.
pub const DEFAULT_MEMORY: u64 = 1024 * 1024 * 1024;
/// cgroup pids limit when a spec does not say.
pub const DEFAULT_PIDS: u64 = 256;
/// CPU share in thousandths of one CPU (1000 = one CPU) when a spec does not say.
pub const DEFAULT_CPU_MILLIS: u64 = 1000;
/// RLIMIT_FSIZE when a spec does not say.
pub const DEFAULT_FILE_SIZE: u64 = 1024 * 1024 * 1024;
/// RLIMIT_NOFILE when a spec does not say.
pub const DEFAULT_OPEN_FILES: u64 = 4096;
/// Host uid and gid a server runs as when the gateway runs as root and the spec names none ("nobody").
pub const DEFAULT_ROOT_RUN_AS: (u32, u32) = (65534, 65534);

/// Port of the egress proxy's listener inside an `allow` sandbox (127.0.0.1 in its own netns).
pub const PROXY_PORT: u16 = 3128;
/// The proxy's URL as the server's environment names it.
pub const PROXY_URL: &str = "http://127.0.0.1:3128";
/// Environment an `allow` server gets so HTTP clients (curl, python, node >= 24 with
/// `NODE_USE_ENV_PROXY`) send every request through the proxy.
pub const PROXY_ENV: &[(&str, &str)] = &[
    ("HTTP_PROXY", PROXY_URL),
    ("HTTPS_PROXY", PROXY_URL),
    ("ALL_PROXY", PROXY_URL),
    ("http_proxy", PROXY_URL),
    ("https_proxy", PROXY_URL),
    ("all_proxy", PROXY_URL),
    ("NO_PROXY", "localhost,127.0.0.1"),
    ("no_proxy", "localhost,127.0.0.1"),
    ("NODE_USE_ENV_PROXY", "1"),
];

/// Whether the server gets a network of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// A new network namespace whose `lo` stays down, and Landlock handles TCP with nothing allowed.
    None,
    /// A new network namespace with `lo` up: the server may listen and connect privately on its
    /// own loopback and reach nothing else.
    Loopback,
    /// `Loopback` plus the egress proxy on `127.0.0.1:PROXY_PORT`, served by the gateway from the
    /// host namespace with the spec's `allow_hosts`/`allow_private`; Landlock allows TCP connect
    /// to the proxy port only.
    Allow,
    /// The host's network, unrestricted (reported as `off`).
    Host,
}

impl Network {
    /// Whether the server gets a network namespace of its own.
    pub fn isolated(self) -> bool {
        self != Network::Host
    }
}

/// One thing the sandbox enforces, as reported and as named in `require`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// User, mount, pid, ipc, uts (and net) namespaces.
    Namespaces,
    /// Minimal read-only root by pivot_root, or Landlock paths only (partial).
    Filesystem,
    /// No network, or the host's.
    Network,
    /// cgroup memory limit with swap 0.
    Memory,
    /// cgroup pids limit.
    Pids,
    /// cgroup CPU quota.
    Cpu,
    /// Core, file size and open-file rlimits.
    Rlimits,
    /// `PR_SET_NO_NEW_PRIVS` and a non-root uid.
    NoNewPrivs,
    /// Landlock filesystem, TCP and scope rules.
    Landlock,
    /// The seccomp deny filter.
    Seccomp,
    /// Killing every process of the server when it ends (pid namespace or cgroup kill).
    TreeKill,
}

impl Control {
    /// Every control, in the order reports and health list them.
    pub const ALL: [Control; 11] = [
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
    ];

    /// The name used in `require`, health JSON and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Control::Namespaces => "namespaces",
            Control::Filesystem => "filesystem",
            Control::Network => "network",
            Control::Memory => "memory",
            Control::Pids => "pids",
            Control::Cpu => "cpu",
            Control::Rlimits => "rlimits",
            Control::NoNewPrivs => "no_new_privs",
            Control::Landlock => "landlock",
            Control::Seccomp => "seccomp",
            Control::TreeKill => "tree_kill",
        }
    }
}

/// How far one control was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Enforced,
    Partial,
    Missing,
    Off,
}

impl State {
    /// The name used in health JSON and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Enforced => "enforced",
            State::Partial => "partial",
            State::Missing => "missing",
            State::Off => "off",
        }
    }

    /// Weaker than configured: the server runs, but health calls its sandbox degraded. `Off` is
    /// the configuration's own choice, not a shortfall.
    pub fn is_degraded(self) -> bool {
        matches!(self, State::Partial | State::Missing)
    }
}

/// The applied state of one control, with what the kernel said (errno) and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforcement {
    pub control: Control,
    pub state: State,
    pub detail: String,
}

impl Enforcement {
    pub fn new(control: Control, state: State, detail: impl Into<String>) -> Self {
        Self {
            control,
            state,
            detail: detail.into(),
        }
    }
}

/// Everything applied to one sandboxed server, sent by the launcher just before exec.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub enforcements: Vec<Enforcement>,
}

impl Report {
    /// The state of `control`; `Missing` when the launcher never got as far as reporting it.
    pub fn state(&self, control: Control) -> State {
        self.enforcements
            .iter()
            .rev()
            .find(|e| e.control == control)
            .map_or(State::Missing, |e| e.state)
    }

    pub(crate) fn push(&mut self, control: Control, state: State, detail: impl Into<String>) {
        self.enforcements
            .push(Enforcement::new(control, state, detail));
    }

    /// Replaces what was reported for `control` (a later step learnt more), or adds it.
    pub(crate) fn set(&mut self, control: Control, state: State, detail: impl Into<String>) {
        self.enforcements.retain(|e| e.control != control);
        self.push(control, state, detail);
    }

    /// The last word on each control, in [`Control::ALL`] order (a control reported twice, e.g.
    /// by the gateway's cgroup step and again by the launcher, shows its later state).
    pub fn controls(&self) -> Vec<&Enforcement> {
        Control::ALL
            .iter()
            .filter_map(|c| self.enforcements.iter().rev().find(|e| e.control == *c))
            .collect()
    }

    /// The controls that are partial or missing: what makes a sandbox degraded.
    pub fn degraded(&self) -> Vec<&Enforcement> {
        self.controls()
            .into_iter()
            .filter(|e| e.state.is_degraded())
            .collect()
    }

    /// The first control in `require` that is not enforced.
    pub fn first_unmet<'a>(&'a self, require: &[Control]) -> Option<(Control, &'a str)> {
        require.iter().find_map(|control| {
            let found = self
                .enforcements
                .iter()
                .rev()
                .find(|e| e.control == *control);
            match found {
                Some(e) if e.state == State::Enforced => None,
                Some(e) => Some((*control, e.detail.as_str())),
                None => Some((*control, "not applied")),
            }
        })
    }
}

/// The sandbox one server should get. Paths are host paths; inside they appear at `/workspace`,
/// `/output` and `/home/sandbox`, and `read_only` and `read_write` paths at their own path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SandboxSpec {
    pub workspace: PathBuf,
    pub output: PathBuf,
    pub home: PathBuf,
    pub read_only: Vec<PathBuf>,
    /// Host paths the server may write, at their own path (a repository it commits to, a notes
    /// dir it edits). Where one listed path (of either list) lies inside another, the inner
    /// one's mode holds for it.
    #[serde(default)]
    pub read_write: Vec<PathBuf>,
    pub tmp_size: u64,
    pub memory: u64,
    pub pids: u64,
    pub cpu_millis: u64,
    pub file_size: u64,
    pub open_files: u64,
    pub network: Network,
    /// `network = "allow"`: host patterns the egress proxy lets through (validated by the config
    /// loader with manifold-egress; `*.x` never matches the apex `x`).
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// `network = "allow"`: CIDRs the proxy may still connect to although they are private,
    /// loopback or link-local.
    #[serde(default)]
    pub allow_private: Vec<String>,
    pub seccomp: bool,
    /// Controls that must be `enforced`, or the server is refused before it runs.
    pub require: Vec<Control>,
    /// Host uid/gid the server runs as when the gateway is root (default `DEFAULT_ROOT_RUN_AS`);
    /// ignored otherwise, where the server keeps the gateway's uid.
    pub run_as: Option<(u32, u32)>,
    /// false skips the namespaces and the minimal root (the fallback tier: Landlock, seccomp,
    /// rlimits and cgroups in the host namespaces). The launcher falls back by itself when the
    /// kernel refuses user namespaces.
    pub namespaces: bool,
    /// Where the server starts, a host path also listed in `read_write` or `read_only` (so it
    /// is seen at its own path); `None` starts it in the workspace.
    #[serde(default)]
    pub workdir: Option<PathBuf>,
}

impl SandboxSpec {
    /// A strict spec: no network, seccomp on, default limits, `filesystem` and `network` required.
    pub fn new(
        workspace: impl Into<PathBuf>,
        output: impl Into<PathBuf>,
        home: impl Into<PathBuf>,
    ) -> Self {
        Self {
            workspace: workspace.into(),
            output: output.into(),
            home: home.into(),
            read_only: Vec::new(),
            read_write: Vec::new(),
            tmp_size: DEFAULT_TMP_SIZE,
            memory: DEFAULT_MEMORY,
            pids: DEFAULT_PIDS,
            cpu_millis: DEFAULT_CPU_MILLIS,
            file_size: DEFAULT_FILE_SIZE,
            open_files: DEFAULT_OPEN_FILES,
            network: Network::None,
            allow_hosts: Vec::new(),
            allow_private: Vec::new(),
            seccomp: true,
            require: vec![Control::Filesystem, Control::Network],
            run_as: None,
            namespaces: true,
            workdir: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_defaults_use_the_named_bounds() {
        let spec = SandboxSpec::new("/w", "/o", "/h");
        assert_eq!(
            (
                spec.tmp_size,
                spec.memory,
                spec.pids,
                spec.cpu_millis,
                spec.file_size,
                spec.open_files
            ),
            (
                DEFAULT_TMP_SIZE,
                DEFAULT_MEMORY,
                DEFAULT_PIDS,
                DEFAULT_CPU_MILLIS,
                DEFAULT_FILE_SIZE,
                DEFAULT_OPEN_FILES
            )
        );
        assert_eq!(spec.network, Network::None);
        assert!(spec.seccomp && spec.namespaces);
        assert_eq!(spec.require, vec![Control::Filesystem, Control::Network]);
        assert_eq!(DEFAULT_ROOT_RUN_AS, (65534, 65534));
    }

    #[test]
    fn proxy_env_names_the_proxy_port_in_both_cases() {
        assert_eq!(PROXY_URL, format!("http://127.0.0.1:{PROXY_PORT}"));
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
            for n in [name.to_string(), name.to_ascii_lowercase()] {
                assert!(PROXY_ENV.contains(&(n.as_str(), PROXY_URL)), "{n}");
            }
        }
        assert!(PROXY_ENV.contains(&("NODE_USE_ENV_PROXY", "1")));
        assert!(Network::Allow.isolated() && Network::Loopback.isolated());
        assert!(!Network::Host.isolated());
    }

    #[test]
    fn controls_lists_each_once_with_its_last_state_and_degraded_picks_the_shortfalls() {
        let mut report = Report::default();
        report.push(Control::Memory, State::Missing, "no cgroup yet");
        report.push(Control::Namespaces, State::Missing, "unshare: EPERM");
        report.push(Control::Memory, State::Enforced, "cgroup v1");
        report.push(Control::Network, State::Off, "host");
        report.set(Control::Filesystem, State::Enforced, "root");
        report.set(Control::Filesystem, State::Partial, "landlock abi 1");
        let listed: Vec<(Control, State)> = report
            .controls()
            .iter()
            .map(|e| (e.control, e.state))
            .collect();
        assert_eq!(
            listed,
            vec![
                (Control::Namespaces, State::Missing),
                (Control::Filesystem, State::Partial),
                (Control::Network, State::Off),
                (Control::Memory, State::Enforced),
            ]
        );
        let degraded: Vec<Control> = report.degraded().iter().map(|e| e.control).collect();
        assert_eq!(degraded, vec![Control::Namespaces, Control::Filesystem]);
        assert_eq!(
            report
                .enforcements
                .iter()
                .filter(|e| e.control == Control::Filesystem)
                .count(),
            1,
            "set replaces"
        );
    }

    #[test]
    fn names_match_the_serde_names() {
        for control in Control::ALL {
            assert_eq!(
                serde_json::to_string(&control).unwrap_or_default(),
                format!("\"{}\"", control.as_str())
            );
        }
        for state in [State::Enforced, State::Partial, State::Missing, State::Off] {
            assert_eq!(
                serde_json::to_string(&state).unwrap_or_default(),
                format!("\"{}\"", state.as_str())
            );
        }
    }

    #[test]
    fn first_unmet_names_a_missing_or_partial_control() {
        let mut report = Report::default();
        report.push(Control::Filesystem, State::Enforced, "root");
        report.push(Control::Network, State::Partial, "port-only");
        assert_eq!(report.first_unmet(&[Control::Filesystem]), None);
        assert_eq!(
            report.first_unmet(&[Control::Network]),
            Some((Control::Network, "port-only"))
        );
        assert_eq!(
            report.first_unmet(&[Control::Seccomp]),
            Some((Control::Seccomp, "not applied"))
        );
    }
}
