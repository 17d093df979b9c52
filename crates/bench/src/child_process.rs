//! Why: every contender (and every echo server) runs as a child of the benchmark, and none may
//! outlive it, whatever happens to a scenario. Each child leads its own process group; stopping it
//! sends SIGTERM to the group (so Manifold shuts its upstreams down), then SIGKILL after a grace.
//! Its stderr goes to a log file whose tail explains a failure.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a stopped child gets to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);

/// A running child process and its log.
pub struct ChildProcess {
    child: Child,
    pid: u32,
    label: String,
    log: PathBuf,
    stopped: bool,
}

impl ChildProcess {
    /// Spawns `program args` with stderr to `log`, stdout piped, stdin closed.
    pub fn spawn(
        label: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log: &Path,
    ) -> Result<ChildProcess, String> {
        let log_file = std::fs::File::create(log)
            .map_err(|e| format!("could not create the log {}: {e}", log.display()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .process_group(0)
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command
            .spawn()
            .map_err(|e| format!("{label}: could not start {}: {e}", program.display()))?;
        let pid = child.id().unwrap_or(0);
        Ok(ChildProcess {
            child,
            pid,
            label: label.to_owned(),
            log: log.to_path_buf(),
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Reads the first line the child prints (its URL), then drains stdout in the background so
    /// the child never blocks on a full pipe.
    pub async fn first_stdout_line(&mut self, hang_guard: Duration) -> Result<String, String> {
        let Some(stdout) = self.child.stdout.take() else {
            return Err(format!("{}: stdout was already taken", self.label));
        };
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let read = tokio::time::timeout(hang_guard, reader.read_line(&mut line)).await;
        match read {
            Ok(Ok(n)) if n > 0 => {
                tokio::spawn(async move {
                    let mut sink = tokio::io::sink();
                    let _ = tokio::io::copy_buf(&mut reader, &mut sink).await;
                });
                Ok(line.trim().to_owned())
            }
            Ok(Ok(_)) => Err(self.failure("exited before printing its URL")),
            Ok(Err(e)) => Err(self.failure(&format!("its stdout failed: {e}"))),
            Err(_) => Err(self.failure(&format!("printed nothing within {hang_guard:?}"))),
        }
    }

    /// Waits until `port` on 127.0.0.1 accepts connections, failing early if the child exits.
    pub async fn wait_for_port(&mut self, port: u16, hang_guard: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(self.failure(&format!("exited ({status}) before listening")));
            }
            if started.elapsed() > hang_guard {
                return Err(self.failure(&format!("did not listen within {hang_guard:?}")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the child has exited.
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// A failure message with the end of the child's log.
    pub fn failure(&self, what: &str) -> String {
        let tail = log_tail(&self.log, 3);
        if tail.is_empty() {
            format!("{} {what}", self.label)
        } else {
            format!("{} {what}; its log ends: {tail}", self.label)
        }
    }

    /// SIGTERM to the group, SIGKILL after the grace, then reaps.
    pub async fn stop(mut self) {
        self.terminate().await;
    }

    /// `stop` with a longer grace, for a child that has work to finish on SIGTERM (callgrind
    /// writing its profile, which is lost if the grace runs out).
    pub async fn stop_within(mut self, grace: Duration) {
        self.terminate_within(grace).await;
    }

    async fn terminate(&mut self) {
        self.terminate_within(TERM_GRACE).await;
    }

    async fn terminate_within(&mut self, grace: Duration) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let group = Pid::from_raw(i32::try_from(self.pid).unwrap_or(0));
        if group.as_raw() <= 0 {
            return;
        }
        let _ = killpg(group, Signal::SIGTERM);
        let exited = tokio::time::timeout(grace, self.child.wait()).await.is_ok();
        // Whatever is left in the group (bridges' own children) goes too.
        let _ = killpg(group, Signal::SIGKILL);
        if !exited {
            let _ = self.child.wait().await;
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        // No runtime to wait on here: kill the group outright; tokio reaps the child.
        if let Ok(pid) = i32::try_from(self.pid)
            && pid > 0
        {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// The last `lines` non-empty lines of a log, joined with " | ".
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = kept.len().saturating_sub(lines);
    kept.get(start..)
        .unwrap_or_default()
        .iter()
        .map(|l| crate::client::excerpt(l.as_bytes()))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// A port on 127.0.0.1 that was free a moment ago (for contenders that cannot take port 0).
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("could not find a free port: {e}"))
}
