//! The last, in-process restrictions the launcher applies just before exec, in this order: rlimits,
//! no_new_privs, Landlock, seccomp (last, because setup itself needs mount/unshare/landlock calls).

use std::collections::BTreeMap;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, RestrictionStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::sys::resource::{Resource, setrlimit};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::spec::{Control, Network, PROXY_PORT, Report, SandboxSpec, State};

/// Highest Landlock ABI requested; older kernels get the best they offer (reported partial).
pub const LANDLOCK_ABI: ABI = ABI::V6;
/// Address-space cap used only when no memory cgroup exists: node aborts below about 512 MiB.
pub const MIN_ADDRESS_SPACE: u64 = 1024 * 1024 * 1024;

/// Sets CORE 0, FSIZE and NOFILE, and AS when `memory_cgroup` is false.
pub fn rlimits(spec: &SandboxSpec, memory_cgroup: bool, report: &mut Report) {
    let mut limits = vec![
        (Resource::RLIMIT_CORE, 0, "core 0"),
        (Resource::RLIMIT_FSIZE, spec.file_size, "fsize"),
        (Resource::RLIMIT_NOFILE, spec.open_files, "nofile"),
    ];
    if !memory_cgroup {
        limits.push((
            Resource::RLIMIT_AS,
            (spec.memory.saturating_mul(2)).max(MIN_ADDRESS_SPACE),
            "as",
        ));
    }
    let failed: Vec<String> = limits
        .iter()
        .filter_map(|(resource, value, name)| {
            setrlimit(*resource, *value, *value)
                .err()
                .map(|e| format!("{name}: setrlimit: {}", e.desc()))
        })
        .collect();
    if failed.is_empty() {
        let names: Vec<&str> = limits.iter().map(|l| l.2).collect();
        report.push(Control::Rlimits, State::Enforced, names.join(", "));
    } else {
        report.push(
            Control::Rlimits,
            State::Partial,
            format!(
                "{}; lower the spec's limits below the hard limits",
                failed.join("; ")
            ),
        );
    }
}

/// Paths Landlock lets the server read (and execute) and write.
pub struct LandlockPaths {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// Device files: read/write of existing files only.
    pub devices: Vec<PathBuf>,
}

/// no_new_privs, then Landlock paths, TCP (when the network is none) and scopes (signals, abstract
/// unix sockets) so the server cannot reach anything outside its own domain.
/// `forced_abi` (a test's pretended older kernel) caps the rules at that ABI, as the kernel would.
pub fn no_new_privs_and_landlock(
    paths: &LandlockPaths,
    network: Network,
    forced_abi: Option<i64>,
    report: &mut Report,
) -> Result<(), String> {
    nix::sys::prctl::set_no_new_privs()
        .map_err(|e| format!("prctl(PR_SET_NO_NEW_PRIVS): {}", e.desc()))?;
    let nonroot = !nix::unistd::geteuid().is_root();
    let detail = if nonroot {
        "no_new_privs, non-root uid"
    } else {
        "no_new_privs (uid is root)"
    };
    report.push(
        Control::NoNewPrivs,
        if nonroot {
            State::Enforced
        } else {
            State::Partial
        },
        detail,
    );
    let abi = forced_abi.map_or(LANDLOCK_ABI, |n| {
        ABI::from(i32::try_from(n).unwrap_or(i32::MAX)).min(LANDLOCK_ABI)
    });
    if abi == ABI::Unsupported {
        report.push(
            Control::Landlock,
            State::Missing,
            "landlock_create_ruleset: EOPNOTSUPP (forced by MANIFOLD_SANDBOX_FORCE_PROBE=landlock-abi=0); boot with lsm=landlock,...",
        );
        return Ok(());
    }
    match landlock(paths, network, abi) {
        Ok(status) if abi < LANDLOCK_ABI && status.ruleset != RulesetStatus::NotEnforced => {
            report.push(
                Control::Landlock,
                State::Partial,
                format!(
                    "kernel offers abi {abi:?} of {LANDLOCK_ABI:?} (forced by MANIFOLD_SANDBOX_FORCE_PROBE): {}; a newer kernel enforces every rule",
                    landlock_gaps(abi)
                ),
            );
        }
        Ok(status) => {
            let (state, detail) = match status.ruleset {
                RulesetStatus::FullyEnforced => (
                    State::Enforced,
                    format!("abi {:?}: fs, tcp, scopes", LANDLOCK_ABI),
                ),
                RulesetStatus::PartiallyEnforced => (
                    State::Partial,
                    format!(
                        "kernel offers less than abi {LANDLOCK_ABI:?}; a newer kernel enforces every rule"
                    ),
                ),
                RulesetStatus::NotEnforced => (
                    State::Missing,
                    "Landlock not enabled; boot with lsm=landlock,... (CONFIG_SECURITY_LANDLOCK)"
                        .into(),
                ),
            };
            report.push(Control::Landlock, state, detail);
        }
        Err(e) => report.push(
            Control::Landlock,
            State::Missing,
            format!("{e}; boot a kernel with Landlock"),
        ),
    }
    Ok(())
}

/// What an older ABI leaves out, for the report.
fn landlock_gaps(abi: ABI) -> String {
    let gaps = [
        (ABI::V2, "no REFER (file moves between dirs)"),
        (ABI::V3, "no TRUNCATE"),
        (ABI::V4, "no TCP rules"),
        (ABI::V5, "no device ioctl rules"),
        (ABI::V6, "no signal or abstract-socket scopes"),
    ];
    gaps.iter()
        .filter(|(since, _)| abi < *since)
        .map(|(_, gap)| *gap)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rules for `abi`; network and scope rules are left out where `abi` has none (an empty set is
/// an error to the landlock crate).
fn landlock(
    paths: &LandlockPaths,
    network: Network,
    abi: ABI,
) -> Result<RestrictionStatus, landlock::RulesetError> {
    let existing = |v: &[PathBuf]| v.iter().filter(|p| p.exists()).cloned().collect::<Vec<_>>();
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(abi))?;
    let tcp = !AccessNet::from_all(abi).is_empty();
    if network == Network::None && tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    // allow: the proxy port is the only TCP connect, so a direct connect to any other loopback
    // port fails with EACCES; binding stays free (the server may listen privately).
    let proxy_only = network == Network::Allow && tcp;
    if proxy_only {
        ruleset = ruleset.handle_access(AccessNet::ConnectTcp)?;
    }
    if !Scope::from_all(abi).is_empty() {
        ruleset = ruleset.scope(Scope::from_all(abi))?;
    }
    let mut created = ruleset.create()?;
    if proxy_only {
        created = created.add_rule(NetPort::new(PROXY_PORT, AccessNet::ConnectTcp))?;
    }
    created
        .add_rules(path_beneath_rules(
            existing(&paths.read),
            AccessFs::from_read(abi),
        ))?
        .add_rules(path_beneath_rules(
            existing(&paths.write),
            AccessFs::from_all(abi),
        ))?
        .add_rules(path_beneath_rules(
            existing(&paths.devices),
            AccessFs::from_file(abi) | AccessFs::ReadDir,
        ))?
        .restrict_self()
}

/// Syscalls no MCP server needs and that widen the attack surface or reach outside the sandbox.
const DENIED_SYSCALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_open_by_handle_at,
    libc::SYS_syslog,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_personality,
];

/// clone(2) flags that would make new namespaces.
const DENIED_CLONE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// Socket families no MCP server needs (raw packets, VM sockets, kernel crypto).
const DENIED_SOCKET_FAMILIES: &[u64] = &[
    libc::AF_PACKET as u64,
    libc::AF_VSOCK as u64,
    libc::AF_ALG as u64,
];

/// Installs the deny filter (EPERM) and a clone3 filter (ENOSYS, so libc falls back to clone, whose
/// flags the first filter can see). `deny_sockets` also denies socket(2) itself (fallback tier with
/// no network namespace: socketpair stays).
pub fn seccomp(deny_sockets: bool, report: &mut Report) -> Result<(), String> {
    let arch =
        TargetArch::try_from(std::env::consts::ARCH).map_err(|e| format!("seccomp arch: {e}"))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED_SYSCALLS.iter().map(|nr| (*nr, Vec::new())).collect();
    let masked = |arg: u8, mask: u64| {
        SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(mask),
            mask,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
    };
    let equal = |arg: u8, len: SeccompCmpArgLen, value: u64| {
        SeccompCondition::new(arg, len, SeccompCmpOp::Eq, value)
            .and_then(|c| SeccompRule::new(vec![c]))
    };
    let text = |e: seccompiler::BackendError| format!("seccomp rule: {e}");
    let clone_rules = DENIED_CLONE_FLAGS
        .iter()
        .map(|f| masked(0, *f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(text)?;
    rules.insert(libc::SYS_clone, clone_rules);
    let socket_rules = if deny_sockets {
        Vec::new()
    } else {
        DENIED_SOCKET_FAMILIES
            .iter()
            .map(|f| equal(0, SeccompCmpArgLen::Dword, *f))
            .collect::<Result<Vec<_>, _>>()
            .map_err(text)?
    };
    rules.insert(libc::SYS_socket, socket_rules);
    rules.insert(
        libc::SYS_ioctl,
        vec![equal(1, SeccompCmpArgLen::Dword, libc::TIOCSTI).map_err(text)?],
    );
    let deny = compile(rules, libc::EPERM, arch)?;
    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        libc::ENOSYS,
        arch,
    )?;
    seccompiler::apply_filter(&deny).map_err(|e| format!("seccomp deny filter: {e}"))?;
    seccompiler::apply_filter(&clone3).map_err(|e| format!("seccomp clone3 filter: {e}"))?;
    let what = if deny_sockets {
        "sockets denied"
    } else {
        "raw/vsock/alg sockets denied"
    };
    report.push(
        Control::Seccomp,
        State::Enforced,
        format!(
            "{} denied syscalls, new-namespace clone flags, {what}; {} + {} instructions",
            DENIED_SYSCALLS.len(),
            deny.len(),
            clone3.len()
        ),
    );
    Ok(())
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<BpfProgram, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    BpfProgram::try_from(filter).map_err(|e| format!("seccomp compile: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::assertions_on_constants)]
    fn bounds_and_lists_are_sane() {
        assert!(MIN_ADDRESS_SPACE >= 512 * 1024 * 1024);
        assert!(
            !DENIED_SYSCALLS.contains(&libc::SYS_clone),
            "clone is filtered by flags, never denied outright"
        );
        assert!(DENIED_SYSCALLS.contains(&libc::SYS_ptrace));
    }

    #[test]
    fn older_abis_name_what_they_leave_out() {
        assert_eq!(landlock_gaps(LANDLOCK_ABI), "");
        let v1 = landlock_gaps(ABI::V1);
        assert!(
            v1.contains("REFER") && v1.contains("TCP") && v1.contains("scopes"),
            "{v1}"
        );
        assert!(!landlock_gaps(ABI::V4).contains("TCP"));
    }
}
