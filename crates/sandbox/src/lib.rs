//! manifold-sandbox: isolates one stdio server with the kernel's own mechanisms (namespaces,
//! pivot_root, cgroups, rlimits, no_new_privs, Landlock, seccomp) through the re-exec'd launcher
//! `manifold-sandbox-exec`, and reports per control what was really enforced.

pub mod cgroup;
pub mod command;
mod confine;
pub mod error;
pub mod exposure;
pub mod launch;
pub mod probe;
mod root;
pub mod spec;
mod sys;

pub use command::{LAUNCHER_NAME, MAX_REPORT_BYTES, Sandboxed, SandboxedCommand, default_launcher};
pub use error::SandboxError;
pub use exposure::{
    Exposure, Lookup, blocked_for, expose_command, exposed_paths, find_program,
    launcher_clones_trees, unwritable_for,
};
pub use probe::{FORCE_PROBE_ENV, ForcedProbe, HostProbe, probe};
pub use spec::{Control, Enforcement, Network, Report, SandboxSpec, State};
