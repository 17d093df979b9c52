//! A cgroup (v2) holding every process `manifold serve` starts, so that at shutdown nothing can
//! outlive it: not a child that moved itself to another process group or session, not a
//! daemonised grandchild. Process groups (each stdio child leads its own, killed as a group by
//! the upstream crate) remain the first line; the cgroup is the one that cannot be escaped.
//!
//! A child inherits its parent's cgroup when it is forked, and the upstream crate spawns the
//! children, so the gateway moves itself into a cgroup of its own before it starts any
//! (`<its cgroup>/manifold-<pid>`). At shutdown, once the children were stopped, it moves itself
//! back out, reports anything still inside, kills it all at once (`cgroup.kill`), and removes the
//! cgroup. Where cgroup v2 is not mounted or not writable (no root, or systemd without
//! `Delegate=yes`), serve says so once and relies on process groups alone.
//!
//! A gateway that was killed outright (SIGKILL, a crash) cannot release its cgroup, and its
//! children live on inside as orphans. So at start, serve also sweeps its siblings: a
//! `manifold-<pid>` cgroup whose process is gone (or whose pid now names a process outside it) has
//! what is left in it killed, and is removed with the servers' cgroups nested in it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long [`ChildCgroup::release`] waits for the killed processes to be gone.
const EMPTY_WAIT: Duration = Duration::from_secs(5);
const EMPTY_POLL: Duration = Duration::from_millis(10);
/// How long a new `manifold-<pid>` cgroup counts as its gateway's even before the gateway has
/// moved in (it does so right after creating it).
const MOVE_IN_GRACE: Duration = Duration::from_secs(60);

/// The cgroup the gateway and its children live in.
pub struct ChildCgroup {
    /// `<mount>/<own cgroup>/manifold-<pid>`.
    dir: PathBuf,
    /// Where the gateway was, and returns to before the kill.
    parent: PathBuf,
    released: bool,
}

/// What releasing the cgroup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    /// Processes still inside after the gateway's own shutdown: they outlived their process
    /// group's kill and were killed through the cgroup.
    pub leftovers: Vec<u32>,
}

/// The mount point of the cgroup v2 hierarchy, from /proc/self/mountinfo.
fn v2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        if fs.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let point = mount.split_whitespace().nth(4)?;
        Some(PathBuf::from(point.replace("\\040", " ")))
    })
}

/// This process's cgroup v2 path, from /proc/self/cgroup (the `0::` line).
fn own_v2_path(cgroup: &str) -> Option<String> {
    cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

fn move_self(to: &Path) -> std::io::Result<()> {
    std::fs::write(to.join("cgroup.procs"), std::process::id().to_string())
}

fn members(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|s| s.lines().any(|l| l.trim() == "populated 1"))
        .unwrap_or(false)
}

impl ChildCgroup {
    /// Moves this process into a new cgroup of its own; every process it starts from now on is
    /// born inside. The error says why containment is by process groups only.
    pub fn enter() -> Result<ChildCgroup, String> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let mount = v2_mount(&mountinfo).ok_or("no cgroup v2 hierarchy is mounted")?;
        let cgroup = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let own = own_v2_path(&cgroup).ok_or("this process is in no cgroup v2")?;
        let parent = mount.join(own.trim_start_matches('/'));
        let dir = parent.join(format!("manifold-{}", std::process::id()));
        // A directory left by an earlier process with the same pid is empty or it could not
        // have been left: remove it and start afresh.
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).map_err(|e| {
            format!(
                "cannot create the cgroup {}: {e} (run as root, or under systemd with Delegate=yes)",
                dir.display()
            )
        })?;
        // Only non-root cgroups have cgroup.kill, so look in the new one.
        if !dir.join("cgroup.kill").exists() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!(
                "{} has no cgroup.kill (Linux 5.14 or later is needed)",
                dir.display()
            ));
        }
        if let Err(e) = move_self(&dir) {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!(
                "cannot move Manifold into the cgroup {}: {e}",
                dir.display()
            ));
        }
        sweep_left_behind(&parent);
        Ok(ChildCgroup {
            dir,
            parent,
            released: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Moves the gateway back out, kills whatever is still inside, waits (bounded) for it to
    /// be gone and removes the cgroup.
    pub fn release(mut self) -> Result<Released, String> {
        self.released = true;
        self.release_now(EMPTY_WAIT)
    }

    fn release_now(&self, wait: Duration) -> Result<Released, String> {
        move_self(&self.parent).map_err(|e| {
            format!(
                "cannot move Manifold back to {}: {e}; the cgroup {} stays",
                self.parent.display(),
                self.dir.display()
            )
        })?;
        let leftovers = members(&self.dir);
        std::fs::write(self.dir.join("cgroup.kill"), "1")
            .map_err(|e| format!("cannot kill the cgroup {}: {e}", self.dir.display()))?;
        let until = Instant::now() + wait;
        while populated(&self.dir) && Instant::now() < until {
            std::thread::sleep(EMPTY_POLL);
        }
        remove_tree(&self.dir).map_err(|e| {
            format!(
                "the cgroup {} could not be removed: {e}",
                self.dir.display()
            )
        })?;
        Ok(Released { leftovers })
    }
}

impl Drop for ChildCgroup {
    /// An early return (a start-up failure, a second signal) still leaves nothing behind.
    fn drop(&mut self) {
        if !self.released
            && let Err(e) = self.release_now(Duration::from_secs(1))
        {
            tracing::warn!(error = %e, "could not release the children's cgroup");
        }
    }
}

/// Removes a cgroup and the cgroups nested in it, deepest first: the servers' own cgroups
/// (`manifold-sandbox-…`) live inside, and a gateway killed outright leaves them there. Their
/// processes died with the kill of this one (`cgroup.kill` reaches every descendant).
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let nested = entry.path();
                let until = Instant::now() + EMPTY_WAIT;
                while populated(&nested) && Instant::now() < until {
                    std::thread::sleep(EMPTY_POLL);
                }
                let _ = remove_tree(&nested);
            }
        }
    }
    std::fs::remove_dir(dir)
}

/// The pid a `manifold-<pid>` cgroup belongs to.
fn owner(name: &str) -> Option<u32> {
    name.strip_prefix("manifold-")?.parse().ok()
}

/// Whether the gateway a `manifold-<pid>` cgroup is named after still runs. A live gateway sits
/// inside its own cgroup; a process with that pid outside it is a later one that was given the
/// pid again, unless the cgroup is new enough that its gateway may not have moved in yet.
fn owner_is_live(pid: u32, dir: &Path) -> bool {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return false;
    }
    let young = std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age < MOVE_IN_GRACE);
    young || members(dir).contains(&pid)
}

/// Kills what is left in, and removes, the cgroups of Manifold processes that are gone.
fn sweep_left_behind(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner) else {
            continue;
        };
        let dir = entry.path();
        if pid == std::process::id() || owner_is_live(pid, &dir) {
            continue;
        }
        // Servers run in cgroups nested inside, so `populated` (which counts those) decides,
        // not the members of this one.
        if populated(&dir) {
            let orphans = members(&dir);
            tracing::warn!(cgroup = %dir.display(), pids = ?orphans, "killing processes left by a Manifold that is gone (it was killed before it could stop them)");
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            let until = Instant::now() + EMPTY_WAIT;
            while populated(&dir) && Instant::now() < until {
                std::thread::sleep(EMPTY_POLL);
            }
        }
        if let Err(e) = remove_tree(&dir) {
            tracing::debug!(cgroup = %dir.display(), error = %e, "could not remove a cgroup left by a Manifold that is gone");
        }
    }
}

/// Says which containment applies (after the "listens" line, so that stays the first thing a
/// log reader sees); the cgroup if there is one.
pub fn announce(containment: Result<ChildCgroup, String>) -> Option<ChildCgroup> {
    match containment {
        Ok(cgroup) => {
            tracing::info!(cgroup = %cgroup.path().display(), "child processes are contained in their own process groups and in a cgroup, killed as a whole at shutdown");
            Some(cgroup)
        }
        Err(why) => {
            tracing::warn!("child processes are contained by process groups only: {why}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_mount_is_found_among_v1_mounts() {
        let info = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                    41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            v2_mount(info),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            v2_mount("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"),
            None
        );
    }

    #[test]
    fn only_manifold_cgroups_have_an_owner() {
        assert_eq!(owner("manifold-4242"), Some(4242));
        assert_eq!(owner("manifold-x"), None);
        assert_eq!(owner("system.slice"), None);
    }

    #[test]
    fn the_own_path_is_the_unified_line() {
        assert_eq!(
            own_v2_path("4:memory:/x\n0::/system.slice/manifold.service\n"),
            Some("/system.slice/manifold.service".to_owned())
        );
        assert_eq!(own_v2_path("4:memory:/x\n"), None);
    }
}
