//! Why: a benchmark figure means nothing without the machine and the conditions it was taken on,
//! so every report records the CPU, memory, kernel and load (before and after), and the exact
//! versions of what was measured.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// The machine a run happened on, and how busy it was.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_bytes: u64,
    pub kernel: String,
    pub load_before: String,
    pub load_after: String,
}

impl Machine {
    pub fn observe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_else(|| "unknown".to_owned());
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            memory_bytes: crate::process_metrics::machine_memory().map_or(0, |(_, total)| total),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            load_before: load_average(),
            load_after: String::new(),
        }
    }
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    read_trimmed("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|t| t.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The first line a program prints for `args`, or why not.
pub fn version_of(program: &Path, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_owned(),
        Ok(out) => format!("unknown (exit {})", out.status),
        Err(e) => format!("unknown ({e})"),
    }
}

/// The workspace commit the binaries were built from, when this runs inside a git checkout.
pub fn workspace_commit(dir: &Path) -> Option<String> {
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(dir)
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    Some(if dirty {
        format!("{head} (with uncommitted changes)")
    } else {
        head
    })
}
