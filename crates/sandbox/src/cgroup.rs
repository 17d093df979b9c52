//! One cgroup per sandboxed server, made by the gateway under its own cgroup before spawn (v1
//! memory/pids/cpu dirs and/or a v2 dir, detected from /proc/self/cgroup and mountinfo), joined by
//! the launcher first thing, and used both for limits and to kill the server's whole tree on drop.
//!
//! A gateway killed outright (SIGKILL, a crash, a container stop) cannot remove its servers'
//! cgroups. Left alone they pile up, and one whose name a later process with the same pid would
//! choose makes that process's `mkdir` fail, and with it every limit of that server. So a name
//! already taken by a cgroup of our own pid is reclaimed (it can only be stale: ids are unique
//! within a process), and the first server started under a cgroup sweeps the cgroups there whose
//! owning process is gone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::spec::{Control, Enforcement, SandboxSpec, State};

/// CFS period the CPU quota is expressed in (µs), as Docker uses.
pub const CPU_PERIOD_US: u64 = 100_000;
/// Rounds of "read cgroup.procs, SIGKILL each" on v1 before giving up (new forks race the kill).
pub const KILL_ROUNDS: usize = 32;
/// Attempts to rmdir a cgroup whose killed processes are still exiting.
pub const RMDIR_ATTEMPTS: usize = 200;
/// Pause between rmdir attempts.
pub const RMDIR_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);
/// Attempts to rmdir a stale cgroup found by a sweep, kept short so a sweep stays quick.
pub const STALE_RMDIR_ATTEMPTS: usize = 20;
/// Names tried for one server's cgroup before its hierarchy is given up (each a fresh id).
pub const NAME_ATTEMPTS: usize = 4;
/// Prefix of every server cgroup; the owner's pid and a per-process id follow.
const NAME_PREFIX: &str = "manifold-sandbox-";

static NEXT_ID: AtomicU64 = AtomicU64::new(0);
/// Parent cgroups already swept of stale server cgroups by this process.
static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// A mounted cgroup hierarchy and the path this process sits at inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// v1 controllers of the mount (empty for v2).
    pub controllers: Vec<String>,
    pub v2: bool,
    /// The directory of our own cgroup in this hierarchy.
    pub own_dir: PathBuf,
}

/// Every cgroup hierarchy this process is in, from /proc/self/cgroup and /proc/self/mountinfo.
pub fn hierarchies() -> Vec<Hierarchy> {
    let (Ok(cgroup), Ok(mountinfo)) = (
        std::fs::read_to_string("/proc/self/cgroup"),
        std::fs::read_to_string("/proc/self/mountinfo"),
    ) else {
        return Vec::new();
    };
    parse_hierarchies(&cgroup, &mountinfo)
}

/// Pure parser behind `hierarchies`, tested on captured text.
pub fn parse_hierarchies(cgroup: &str, mountinfo: &str) -> Vec<Hierarchy> {
    let mut found = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount_point), Some(fstype), Some(options)) =
            (left.get(3), left.get(4), right.first(), right.get(2))
        else {
            continue;
        };
        let v2 = *fstype == "cgroup2";
        if !v2 && *fstype != "cgroup" {
            continue;
        }
        let controllers: Vec<String> = if v2 {
            Vec::new()
        } else {
            options
                .split(',')
                .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                .map(String::from)
                .collect()
        };
        let own = cgroup.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
            let matches = if v2 {
                names.is_empty()
            } else {
                names.split(',').any(|n| controllers.iter().any(|c| c == n))
            };
            matches.then(|| path.to_string())
        });
        let Some(own) = own else { continue };
        let relative = own
            .strip_prefix(root)
            .unwrap_or(&own)
            .trim_start_matches('/')
            .to_string();
        found.push(Hierarchy {
            controllers,
            v2,
            own_dir: Path::new(mount_point).join(relative),
        });
    }
    found
}

/// The cgroup dirs of one server; dropping it kills every process left in them and removes them.
#[derive(Debug)]
pub struct Cgroup {
    dirs: Vec<PathBuf>,
    kill_file: Option<PathBuf>,
}

impl Cgroup {
    /// Makes the server's cgroups and writes its limits; the enforcements say what worked.
    pub fn create(spec: &SandboxSpec) -> (Option<Cgroup>, Vec<Enforcement>) {
        let mut dirs = Vec::new();
        let mut kill_file = None;
        let mut states = vec![
            Enforcement::new(
                Control::Memory,
                State::Missing,
                "no cgroup memory controller; mount one (v1 memory or v2 with +memory)",
            ),
            Enforcement::new(
                Control::Pids,
                State::Missing,
                "no cgroup pids controller; mount one (v1 pids or v2 with +pids)",
            ),
            Enforcement::new(
                Control::Cpu,
                State::Missing,
                "no cgroup cpu controller; mount one (v1 cpu or v2 with +cpu)",
            ),
        ];
        for h in hierarchies() {
            let wanted = h.v2
                || h.controllers
                    .iter()
                    .any(|c| matches!(c.as_str(), "memory" | "pids" | "cpu"));
            if !wanted {
                continue;
            }
            sweep_once(&h.own_dir);
            let dir = match create_dir(&h.own_dir) {
                Ok(dir) => dir,
                Err(detail) => {
                    for s in states.iter_mut().filter(|s| s.state == State::Missing) {
                        s.detail = detail.clone();
                    }
                    continue;
                }
            };
            if h.v2 && dir.join("cgroup.kill").exists() {
                kill_file = Some(dir.join("cgroup.kill"));
            }
            write_limits(&dir, spec, &mut states);
            dirs.push(dir);
        }
        let cgroup = (!dirs.is_empty()).then_some(Cgroup { dirs, kill_file });
        (cgroup, states)
    }

    /// The `cgroup.procs` files the launcher joins.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Whether dropping this cgroup can kill the whole tree.
    pub fn kills_tree(&self) -> bool {
        self.kill_file.is_some() || self.dirs.iter().any(|d| d.join("cgroup.procs").exists())
    }

    /// Kills every process in the server's cgroups (v2 `cgroup.kill`, else SIGKILL each pid, bounded).
    pub fn kill_all(&self) {
        if let Some(kill) = &self.kill_file {
            let _ = std::fs::write(kill, "1");
        }
        for _ in 0..KILL_ROUNDS {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }

    /// Pids still in any of the server's cgroups.
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .dirs
            .iter()
            .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|text| {
                text.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }
}

/// Makes a fresh server cgroup under `parent`. A name found taken belongs to an earlier process
/// with our pid, so it is reclaimed; should that fail, the next id is tried.
fn create_dir(parent: &Path) -> Result<PathBuf, String> {
    let mut last = String::new();
    for _ in 0..NAME_ATTEMPTS {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("{NAME_PREFIX}{}-{id}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                remove_stale(&dir);
                if std::fs::create_dir(&dir).is_ok() {
                    return Ok(dir);
                }
                last = format!(
                    "mkdir {}: a cgroup left by an earlier process with this pid is there and could not be removed",
                    dir.display()
                );
            }
            Err(e) => {
                return Err(format!(
                    "mkdir {}: {e}; run the gateway where it may create child cgroups",
                    dir.display()
                ));
            }
        }
    }
    Err(format!("{last}; remove it by hand (rmdir)"))
}

/// The pid that made a server cgroup, from its name.
fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let (pid, id) = rest.split_once('-')?;
    id.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Removes, the first time this process starts a server under `parent`, the server cgroups
/// there whose owner is gone, killing what is left in them: those are servers of a gateway that
/// was killed before it could stop them.
fn sweep_once(parent: &Path) {
    {
        let Ok(mut swept) = SWEPT.lock() else { return };
        if swept.iter().any(|p| p == parent) {
            return;
        }
        swept.push(parent.to_path_buf());
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(owner) else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        remove_stale(&entry.path());
    }
}

/// Kills what is in a stale server cgroup and removes it, briefly: one that stays (its processes
/// will not die, or it holds cgroups of its own) is left for a later sweep.
fn remove_stale(dir: &Path) {
    let kill = dir.join("cgroup.kill");
    let mut stale = Cgroup {
        dirs: vec![dir.to_path_buf()],
        kill_file: kill.exists().then_some(kill),
    };
    stale.kill_all();
    remove_dirs(&std::mem::take(&mut stale.dirs), STALE_RMDIR_ATTEMPTS);
    stale.kill_file = None;
}

/// Removes each cgroup dir, retrying while its killed processes are still exiting.
fn remove_dirs(dirs: &[PathBuf], attempts: usize) {
    for dir in dirs {
        for _ in 0..attempts {
            if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                break;
            }
            std::thread::sleep(RMDIR_PAUSE);
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all();
        remove_dirs(&self.dirs, RMDIR_ATTEMPTS);
    }
}

fn write_limits(dir: &Path, spec: &SandboxSpec, states: &mut [Enforcement]) {
    let mut set = |control: Control, writes: &[(&str, String)], label: &str| {
        if !writes.iter().all(|(file, _)| dir.join(file).exists()) {
            return;
        }
        let result: Result<(), String> = writes.iter().try_for_each(|(file, value)| {
            std::fs::write(dir.join(file), value)
                .map_err(|e| format!("write {} to {}: {e}", value, dir.join(file).display()))
        });
        if let Some(state) = states.iter_mut().find(|s| s.control == control) {
            *state = match result {
                Ok(()) => Enforcement::new(
                    control,
                    State::Enforced,
                    format!("{label} in {}", dir.display()),
                ),
                Err(e) => Enforcement::new(
                    control,
                    State::Missing,
                    format!("{e}; check the cgroup is delegated to the gateway"),
                ),
            };
        }
    };
    let memory = spec.memory.to_string();
    let quota = (spec.cpu_millis * CPU_PERIOD_US / 1000).max(1000);
    set(
        Control::Memory,
        &[
            ("memory.max", memory.clone()),
            ("memory.swap.max", "0".into()),
        ],
        "cgroup v2 memory.max, swap 0",
    );
    set(
        Control::Memory,
        &[
            ("memory.limit_in_bytes", memory.clone()),
            ("memory.memsw.limit_in_bytes", memory),
        ],
        "cgroup v1 memory+swap limit",
    );
    set(
        Control::Pids,
        &[("pids.max", spec.pids.to_string())],
        "cgroup pids.max",
    );
    set(
        Control::Cpu,
        &[("cpu.max", format!("{quota} {CPU_PERIOD_US}"))],
        "cgroup v2 cpu.max",
    );
    set(
        Control::Cpu,
        &[
            ("cpu.cfs_period_us", CPU_PERIOD_US.to_string()),
            ("cpu.cfs_quota_us", quota.to_string()),
        ],
        "cgroup v1 cfs quota",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hybrid_hierarchies_with_own_paths() {
        let cgroup = "8:pids:/\n4:memory:/supervisor/abc\n1:cpu:/\n0::/\n";
        let mountinfo = "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n\
31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n\
32 25 0:28 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n\
40 25 8:1 / / rw - ext4 /dev/vda rw\n";
        let h = parse_hierarchies(cgroup, mountinfo);
        assert_eq!(h.len(), 3);
        assert!(h[0].v2);
        assert_eq!(h[0].own_dir, PathBuf::from("/sys/fs/cgroup/unified/"));
        assert_eq!(h[1].controllers, vec!["memory".to_string()]);
        assert_eq!(
            h[1].own_dir,
            PathBuf::from("/sys/fs/cgroup/memory/supervisor/abc")
        );
    }

    #[test]
    #[allow(clippy::assertions_on_constants)]
    fn bounds_are_positive() {
        assert!(KILL_ROUNDS > 0 && RMDIR_ATTEMPTS > 0 && CPU_PERIOD_US == 100_000);
        assert!(RMDIR_PAUSE > std::time::Duration::ZERO);
    }
}
