//! Why: CPU and memory figures come from the kernel's own accounting of each gateway process
//! (`/proc/PID/stat` user+system time, `/proc/PID/status` VmRSS), read the same way for every
//! contender, plus the machine-wide numbers the memory scenario's safety guards watch.

use std::collections::HashMap;

/// Clock ticks per second of `/proc/PID/stat` times.
pub fn clock_ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

/// The fields of `/proc/PID/stat` after the command name (field 3, the state, is index 0).
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let after_name = text.get(text.rfind(')')? + 1..)?;
    Some(after_name.split_whitespace().collect())
}

/// User + system CPU time of `pid` (all its threads), in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat_fields(&text)?;
    // utime is field 14 and stime field 15 of proc(5); index 0 here is field 3.
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}

/// User + system CPU time of `pid`'s children that ended and were waited for (cutime + cstime):
/// where short-lived processes, such as an authored tool's, leave their CPU time.
pub fn reaped_children_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat_fields(&text)?;
    // cutime is field 16 and cstime field 17 of proc(5).
    let user: u64 = fields.get(13)?.parse().ok()?;
    let system: u64 = fields.get(14)?.parse().ok()?;
    Some(user + system)
}

/// User + system CPU time of `pid` and every process below it, in clock ticks (a server whose
/// work happens in child processes, like PostgreSQL's backends); `None` when `pid` itself is gone.
pub fn tree_cpu_ticks(pid: u32) -> Option<u64> {
    let own = cpu_ticks(pid)?;
    Some(
        descendants(pid)
            .into_iter()
            .filter_map(cpu_ticks)
            .fold(own, u64::saturating_add),
    )
}

/// CPU time every process on the machine used (all CPUs, idle and iowait excluded), in clock
/// ticks: what a whole stack of processes (client, proxy, gateways, store) costs together.
pub fn machine_busy_ticks() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    busy_ticks(text.lines().next()?)
}

/// The busy ticks of `/proc/stat`'s `cpu` line: user, nice, system, irq, softirq, steal (guest
/// time is already inside user and nice).
fn busy_ticks(line: &str) -> Option<u64> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let values: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal ...
    [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|i| values.get(*i).copied())
        .sum()
}

/// Resident memory of `pid` in bytes (VmRSS).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    kib_field(&text, "VmRSS:").map(|k| k * 1024)
}

fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line.get(name.len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Every live process id with its parent.
fn parents() -> HashMap<u32, u32> {
    let mut map = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return map;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some(ppid) =
            stat_fields(&text).and_then(|f| f.get(1).and_then(|p| p.parse::<u32>().ok()))
        {
            map.insert(pid, ppid);
        }
    }
    map
}

/// The processes below `pid` (children, grandchildren, ...).
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents = parents();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (child, parent) in &parents {
        children.entry(*parent).or_default().push(*child);
    }
    let mut found = Vec::new();
    let mut queue = vec![pid];
    while let Some(next) = queue.pop() {
        if let Some(kids) = children.get(&next) {
            for kid in kids {
                found.push(*kid);
                queue.push(*kid);
            }
        }
    }
    found
}

/// Resident memory of `pid`'s descendants, and how many there are.
pub fn descendants_rss(pid: u32) -> (u64, usize) {
    let below = descendants(pid);
    let total = below.iter().filter_map(|p| rss_bytes(*p)).sum();
    (total, below.len())
}

/// Memory the machine can still hand out, and its total, in bytes.
pub fn machine_memory() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = kib_field(&text, "MemAvailable:")? * 1024;
    let total = kib_field(&text, "MemTotal:")? * 1024;
    Some((available, total))
}

/// How many processes exist on the machine, and how many may.
pub fn machine_processes() -> (usize, usize) {
    let count = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0);
    let max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(32768);
    (count, max)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn stat_fields_survive_spaces_and_parentheses_in_the_name() {
        let text = "42 (a b) c) S 1 42 42 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0";
        let fields = stat_fields(text).unwrap();
        assert_eq!(fields[0], "S");
        assert_eq!(fields[1], "1");
        assert_eq!(fields[11], "7");
        assert_eq!(fields[12], "3");
    }

    #[test]
    fn machine_busy_time_leaves_idle_and_iowait_out() {
        let line = "cpu  10 1 5 1000 50 2 3 4 0 0";
        assert_eq!(busy_ticks(line), Some(10 + 1 + 5 + 2 + 3 + 4));
        assert_eq!(busy_ticks("cpu0 1 2 3 4 5 6 7 8"), None);
        assert!(machine_busy_ticks().is_some());
    }

    #[test]
    fn this_process_has_cpu_time_and_resident_memory() {
        let pid = std::process::id();
        assert!(rss_bytes(pid).unwrap() > 0);
        assert!(cpu_ticks(pid).is_some());
    }

    #[test]
    fn a_process_tree_counts_its_children_cpu_time() {
        // A child that burns CPU until killed: its ticks show in the tree, not in ours alone.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = std::process::id();
        let child_pid = child.id();
        let mut child_ticks = 0;
        for _ in 0..200 {
            child_ticks = cpu_ticks(child_pid).unwrap_or(0);
            if child_ticks > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let own = cpu_ticks(pid).unwrap();
        let tree = tree_cpu_ticks(pid).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(child_ticks > 0, "the child never used a tick");
        assert!(
            tree >= own + child_ticks,
            "tree {tree}, own {own}, child {child_ticks}"
        );
        assert_eq!(tree_cpu_ticks(u32::MAX), None);
    }
}
