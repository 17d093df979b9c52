//! Why: a peer started by a test must die with the test, even when the test fails or panics, and take
//! its own children with it (npm wrappers, shells, bridges spawn more processes). Each child gets its
//! own process group; the guard kills the group and reaps the child on drop.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::error::TestkitError;
use crate::ports::wait_for_port_while;

/// How long [`spawn_http_peer`] waits for a peer's port before calling it hung. Node and Python peers
/// start in well under a second here; this only bounds a test that would otherwise hang, on 2 busy cores.
pub const PEER_START_HANG_GUARD: Duration = Duration::from_secs(60);

/// How long a dropped guard waits for the rest of its group to die after SIGKILL (a hang guard only).
const GROUP_EXIT_HANG_GUARD: Duration = Duration::from_secs(10);
const GROUP_EXIT_POLL: Duration = Duration::from_millis(5);

/// Owns a spawned child that leads its own process group. Dropping it sends SIGKILL to the whole group,
/// reaps the child and returns once no member of the group is left alive, so no test leaves a peer behind.
///
/// A process that moves itself to another group or session (`setsid`) escapes the group kill; the
/// peers pinned in tests/peers do not.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    program: String,
    reaped: bool,
}

impl ChildGuard {
    /// Spawns `command` as the leader of a new process group.
    pub fn spawn(mut command: Command) -> Result<Self, TestkitError> {
        let program = command.get_program().to_string_lossy().into_owned();
        command.process_group(0);
        let child = command.spawn().map_err(|source| TestkitError::Spawn {
            program: program.clone(),
            source,
        })?;
        Ok(Self {
            child,
            program,
            reaped: false,
        })
    }

    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The program this guard started, for messages.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The child, for its stdio handles. Waiting on it yourself is fine; the guard still kills the group.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The child's exit status if it has exited, without blocking.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, TestkitError> {
        self.child.try_wait().map_err(|source| TestkitError::Reap {
            program: self.program.clone(),
            source,
        })
    }

    /// Kills the whole group now and reaps the child, returning its exit status.
    pub fn kill(mut self) -> Result<ExitStatus, TestkitError> {
        self.kill_group();
        let status = self.child.wait().map_err(|source| TestkitError::Reap {
            program: self.program.clone(),
            source,
        });
        self.reaped = true;
        self.wait_for_group_to_die();
        status
    }

    /// SIGKILL reaches the other members asynchronously and they are not our children to wait for, so
    /// this watches /proc until none is left; a test that counts processes right after the guard is gone
    /// then sees the truth.
    fn wait_for_group_to_die(&self) {
        let pgid = self.child.id();
        let deadline = Instant::now() + GROUP_EXIT_HANG_GUARD;
        while !process_group_members(pgid).is_empty() {
            if Instant::now() >= deadline {
                eprintln!(
                    "manifold-testkit: process group {pgid} ({}) still has members {:?} after SIGKILL",
                    self.program,
                    process_group_members(pgid)
                );
                return;
            }
            std::thread::sleep(GROUP_EXIT_POLL);
        }
    }

    fn kill_group(&self) {
        // The group outlives its leader while any member lives, so this reaches members even after the
        // child itself exited. ESRCH (nobody left) is the expected outcome then, not an error.
        let Ok(pgid) = i32::try_from(self.child.id()) else {
            return;
        };
        match killpg(Pid::from_raw(pgid), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(errno) => eprintln!(
                "manifold-testkit: could not kill process group {pgid} ({}): {errno}",
                self.program
            ),
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        self.kill_group();
        if let Err(err) = self.child.wait() {
            eprintln!(
                "manifold-testkit: could not reap {} (pid {}): {err}",
                self.program,
                self.child.id()
            );
        }
        self.wait_for_group_to_die();
    }
}

/// Starts an HTTP peer (`program args...` with `env` added) and returns its guard once 127.0.0.1:`port`
/// accepts connections. Fails fast if the peer exits first (its stderr, inherited, says why), and after
/// [`PEER_START_HANG_GUARD`] if it never opens the port. stdin is closed; stdout and stderr are inherited
/// so the test harness shows them on failure.
pub async fn spawn_http_peer<I, S, E, K, V>(
    program: impl AsRef<OsStr>,
    args: I,
    env: E,
    port: u16,
) -> Result<ChildGuard, TestkitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
    E: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let mut command = Command::new(program);
    command.args(args).envs(env).stdin(Stdio::null());
    let mut guard = ChildGuard::spawn(command)?;
    let program = guard.program.clone();
    wait_for_port_while(port, PEER_START_HANG_GUARD, || match guard.try_wait()? {
        Some(status) => Err(TestkitError::ExitedEarly {
            program: program.clone(),
            port,
            status,
        }),
        None => Ok(()),
    })
    .await?;
    Ok(guard)
}

/// Whether `pid` is a live process. A zombie counts as dead: it runs no code, and on this machine kind
/// PID 1 does not reap orphans, so killed grandchildren may linger as zombies.
pub fn process_is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => parse_stat(&stat).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X')),
        Err(_) => false,
    }
}

/// The live (non-zombie) members of process group `pgid`, for tests that prove nothing was left behind.
pub fn process_group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| parse_stat(&stat))
                .is_some_and(|(state, group)| group == pgid && !matches!(state, 'Z' | 'X'))
        })
        .collect()
}

/// (state, process group) from /proc/<pid>/stat. The command name in parentheses may hold spaces and
/// parentheses, so fields are read after the last `)`.
fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_last_parenthesis() {
        assert_eq!(parse_stat("42 (node) S 1 42 42 0 -1"), Some(('S', 42)));
        assert_eq!(parse_stat("7 (a) b) (c) Z 1 99 7"), Some(('Z', 99)));
        assert_eq!(parse_stat("broken"), None);
    }

    #[test]
    fn this_process_is_running_and_an_unused_pid_is_not() {
        assert!(process_is_running(std::process::id()));
        // Above the kernel's largest possible pid_max (2^22), so never a process.
        assert!(!process_is_running(4_194_305));
    }
}
