//! What this kernel offers for sandboxing, read without changing anything, so `doctor` and health
//! can say why a control would be missing before any server starts.

use serde::Serialize;

use crate::cgroup::hierarchies;

/// The host's sandboxing mechanisms.
#[derive(Clone, Debug, Serialize)]
pub struct HostProbe {
    /// `/proc/sys/user/max_user_namespaces` > 0 and no sysctl restricting unprivileged ones.
    pub user_namespaces: Result<(), String>,
    /// Landlock ABI version, or the errno text.
    pub landlock_abi: Result<i64, String>,
    /// seccomp filters can be installed (`Seccomp:` in /proc/self/status).
    pub seccomp: bool,
    /// v1 controllers mounted, e.g. `memory`, `pids`, `cpu`.
    pub cgroup_v1: Vec<String>,
    /// v2 controllers available to a child of our own cgroup, when v2 is mounted.
    pub cgroup_v2: Option<Vec<String>>,
    /// v2 offers `cgroup.kill` (kernel 5.14+).
    pub cgroup_kill: bool,
}

/// Reads the host's mechanisms.
pub fn probe() -> HostProbe {
    let hs = hierarchies();
    let v2 = hs.iter().find(|h| h.v2);
    HostProbe {
        user_namespaces: user_namespaces(),
        landlock_abi: crate::sys::landlock_abi()
            .map_err(|e| format!("landlock_create_ruleset: {}", e.desc())),
        seccomp: std::fs::read_to_string("/proc/self/status")
            .is_ok_and(|s| s.lines().any(|l| l.starts_with("Seccomp:"))),
        cgroup_v1: hs
            .iter()
            .filter(|h| !h.v2)
            .flat_map(|h| h.controllers.clone())
            .collect(),
        cgroup_v2: v2.map(|h| {
            std::fs::read_to_string(h.own_dir.join("cgroup.subtree_control"))
                .unwrap_or_default()
                .split_whitespace()
                .map(String::from)
                .collect()
        }),
        cgroup_kill: v2.is_some_and(|h| h.own_dir.join("cgroup.kill").exists()),
    }
}

fn user_namespaces() -> Result<(), String> {
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").map_err(|e| {
        format!("/proc/sys/user/max_user_namespaces: {e}; the kernel lacks CONFIG_USER_NS")
    })?;
    if max.trim() == "0" {
        return Err("user.max_user_namespaces = 0; set it above 0 with sysctl".into());
    }
    let sysctl_says_no = |path: &str| std::fs::read_to_string(path).is_ok_and(|v| v.trim() != "0");
    if sysctl_says_no("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") {
        return Err("AppArmor restricts user namespaces: add a profile for manifold or set kernel.apparmor_restrict_unprivileged_userns=0".into());
    }
    if std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
        .is_ok_and(|v| v.trim() == "0")
    {
        return Err("kernel.unprivileged_userns_clone = 0; set it to 1".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CI runs on a machine kind with user namespaces, Landlock, seccomp and v1 memory/pids/cpu.
    #[test]
    fn probe_sees_this_machine_kind() {
        let host = probe();
        assert_eq!(host.user_namespaces, Ok(()));
        assert!(
            host.landlock_abi.as_ref().is_ok_and(|abi| *abi >= 1),
            "{:?}",
            host.landlock_abi
        );
        assert!(host.seccomp);
        let has = |c: &str| {
            host.cgroup_v1.iter().any(|x| x == c)
                || host
                    .cgroup_v2
                    .as_ref()
                    .is_some_and(|v| v.iter().any(|x| x == c))
        };
        assert!(has("memory") && has("pids"), "{host:?}");
    }
}
