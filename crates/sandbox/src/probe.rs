//! What this kernel offers for sandboxing, read without changing anything, so `doctor` and health
//! can say why a control would be missing before any server starts. Debug builds also let a test
//! force a weaker answer (`FORCE_PROBE_ENV`), so the fallbacks run on a machine that has everything.

use serde::{Deserialize, Serialize};

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

/// Env var that forces the probe's answer in debug builds (release builds ignore it), read by the
/// gateway when it prepares a sandbox and handed to the launcher in its plan, e.g.
/// `no-userns,landlock-abi=1`.
pub const FORCE_PROBE_ENV: &str = "MANIFOLD_SANDBOX_FORCE_PROBE";
/// Longest `FORCE_PROBE_ENV` value read; it holds a few short items.
pub const MAX_FORCE_PROBE_LEN: usize = 256;

/// A weaker host than the real one, for tests of the fallbacks: what the kernel is pretended to
/// refuse. Honoured only when `cfg!(debug_assertions)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForcedProbe {
    /// `no-userns`: unshare(CLONE_NEWUSER) is answered EPERM, as under AppArmor's restriction.
    pub no_userns: bool,
    /// `landlock-abi=N`: the kernel offers Landlock ABI N at most (0: no Landlock at all).
    pub landlock_abi: Option<i64>,
}

/// Text the launcher reports for a user namespace refused by force.
pub(crate) const FORCED_USERNS_TEXT: &str =
    "user namespaces refused (EPERM, forced by MANIFOLD_SANDBOX_FORCE_PROBE=no-userns)";

impl ForcedProbe {
    /// Parses `no-userns,landlock-abi=N` (items in any order, comma separated, blanks ignored).
    pub fn parse(text: &str) -> Result<ForcedProbe, String> {
        if text.len() > MAX_FORCE_PROBE_LEN {
            return Err(format!(
                "{FORCE_PROBE_ENV} is longer than {MAX_FORCE_PROBE_LEN} bytes; write e.g. no-userns,landlock-abi=1"
            ));
        }
        let mut forced = ForcedProbe::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if item == "no-userns" {
                forced.no_userns = true;
            } else if let Some(abi) = item.strip_prefix("landlock-abi=") {
                let abi = abi.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                    format!("{FORCE_PROBE_ENV}: {item:?} needs a Landlock ABI number 0 or more, e.g. landlock-abi=1")
                })?;
                forced.landlock_abi = Some(abi);
            } else {
                return Err(format!(
                    "{FORCE_PROBE_ENV}: unknown item {item:?}; the items are no-userns and landlock-abi=N"
                ));
            }
        }
        Ok(forced)
    }

    /// The forced answer from the environment: `None` in release builds, when unset, or empty.
    pub fn from_env() -> Result<Option<ForcedProbe>, String> {
        if !cfg!(debug_assertions) {
            return Ok(None);
        }
        match std::env::var(FORCE_PROBE_ENV) {
            Ok(text) if !text.trim().is_empty() => ForcedProbe::parse(&text).map(Some),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
            Err(e) => Err(format!("{FORCE_PROBE_ENV}: {e}")),
        }
    }

    /// Lowers a real probe to the forced answer.
    fn apply(self, host: &mut HostProbe) {
        if self.no_userns {
            host.user_namespaces = Err(FORCED_USERNS_TEXT.into());
        }
        if let Some(abi) = self.landlock_abi {
            host.landlock_abi = match (abi, &host.landlock_abi) {
                (0, _) => Err("landlock_create_ruleset: EOPNOTSUPP (forced by MANIFOLD_SANDBOX_FORCE_PROBE=landlock-abi=0)".into()),
                (abi, Ok(real)) => Ok(abi.min(*real)),
                (_, Err(e)) => Err(e.clone()),
            };
        }
    }
}

/// Reads the host's mechanisms (lowered by `FORCE_PROBE_ENV` in a debug build; an unreadable
/// value is ignored here and refused where a sandbox is prepared).
pub fn probe() -> HostProbe {
    let mut host = real_probe();
    if let Ok(Some(forced)) = ForcedProbe::from_env() {
        forced.apply(&mut host);
    }
    host
}

fn real_probe() -> HostProbe {
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

/// Why user namespaces are unavailable, with the fix, or Ok when nothing visible forbids them.
pub(crate) fn user_namespaces() -> Result<(), String> {
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

    #[test]
    fn forced_probe_parses_its_items_and_refuses_others() {
        assert_eq!(
            ForcedProbe::parse("no-userns, landlock-abi=1"),
            Ok(ForcedProbe {
                no_userns: true,
                landlock_abi: Some(1)
            })
        );
        assert_eq!(ForcedProbe::parse(""), Ok(ForcedProbe::default()));
        let unknown = ForcedProbe::parse("no-seccomp").unwrap_err();
        assert!(
            unknown.contains("no-seccomp") && unknown.contains("no-userns"),
            "{unknown}"
        );
        assert!(ForcedProbe::parse("landlock-abi=-1").is_err());
        let long = "no-userns,".repeat(MAX_FORCE_PROBE_LEN / 10 + 1);
        assert!(
            ForcedProbe::parse(&long)
                .unwrap_err()
                .contains("longer than")
        );
        let fits = "no-userns,".repeat(MAX_FORCE_PROBE_LEN / 10);
        assert!(fits.len() <= MAX_FORCE_PROBE_LEN && ForcedProbe::parse(&fits).is_ok());
    }

    #[test]
    fn forced_probe_lowers_the_real_answer_only() {
        let mut host = real_probe();
        let real_abi = host.landlock_abi.clone();
        ForcedProbe {
            no_userns: true,
            landlock_abi: Some(1),
        }
        .apply(&mut host);
        assert_eq!(host.user_namespaces, Err(FORCED_USERNS_TEXT.to_string()));
        assert_eq!(host.landlock_abi, real_abi.map(|r| r.min(1)));
        let mut host = real_probe();
        let before = host.landlock_abi.clone();
        ForcedProbe {
            no_userns: false,
            landlock_abi: Some(99),
        }
        .apply(&mut host);
        assert_eq!(host.landlock_abi, before, "forcing never raises the ABI");
        ForcedProbe {
            no_userns: false,
            landlock_abi: Some(0),
        }
        .apply(&mut host);
        assert!(host.landlock_abi.is_err());
    }

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
