//! Why: the workspace's own HTTP peers (manifold-test-peer's `http` and `sse` modes, the conformance
//! fixture) bind port 0 and announce `listening on 127.0.0.1:PORT` as their first line, and the tests
//! that drive them also read what they log to stderr. Each test harness used to spawn, parse and
//! forward stderr its own way; one definition here, the child in a [`ChildGuard`] so it dies with
//! the test.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::child::ChildGuard;
use crate::error::TestkitError;

/// The line a listening peer prints first, before its port.
pub const LISTENING_PREFIX: &str = "listening on 127.0.0.1:";

/// A running peer that announced its port; its stderr lines are echoed to the test's stderr
/// (`peer: LINE`) and kept for [`stderr_line`](Self::stderr_line).
#[derive(Debug)]
pub struct ListeningPeer {
    guard: ChildGuard,
    port: u16,
    stderr: mpsc::UnboundedReceiver<String>,
}

impl ListeningPeer {
    /// Spawns `command` (stdin closed, stdout and stderr piped) and waits, at most `hang_guard`,
    /// for its `listening on 127.0.0.1:PORT` line.
    pub async fn start(
        mut command: Command,
        hang_guard: Duration,
    ) -> Result<ListeningPeer, TestkitError> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut guard = ChildGuard::spawn(command)?;
        let program = guard.program().to_owned();
        let not_announced = |printed: String| TestkitError::NotAnnounced {
            program: program.clone(),
            printed,
        };
        let (Some(stdout), Some(stderr)) = (
            guard.child_mut().stdout.take(),
            guard.child_mut().stderr.take(),
        ) else {
            return Err(not_announced("(its output was not captured)".to_owned()));
        };
        let (tx, mut first) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut stdout = BufReader::new(stdout);
            let _ = tx.send(stdout.read_line(&mut line).map(|_| line));
            // Drained so that the peer never blocks on a full pipe.
            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        });
        let (lines, stderr_lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("peer: {line}");
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let line = match tokio::time::timeout(hang_guard, first.recv()).await {
            Ok(Some(Ok(line))) => line,
            Ok(Some(Err(e))) => return Err(not_announced(format!("(stdout failed: {e})"))),
            Ok(None) => return Err(not_announced("(nothing)".to_owned())),
            Err(_) => return Err(not_announced(format!("nothing within {hang_guard:?}"))),
        };
        let port = line
            .trim_end()
            .strip_prefix(LISTENING_PREFIX)
            .and_then(|port| port.parse().ok())
            .ok_or_else(|| not_announced(line.trim_end().to_owned()))?;
        Ok(ListeningPeer {
            guard,
            port,
            stderr: stderr_lines,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// Waits, at most `hang_guard`, for a stderr line starting with `prefix` and returns it
    /// (lines before it are passed over).
    pub async fn stderr_line(
        &mut self,
        prefix: &str,
        hang_guard: Duration,
    ) -> Result<String, TestkitError> {
        let stderr = &mut self.stderr;
        let found = tokio::time::timeout(hang_guard, async {
            while let Some(line) = stderr.recv().await {
                if line.starts_with(prefix) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => Ok(line),
            Ok(None) => Err(TestkitError::Hung {
                what: format!("a stderr line starting with {prefix:?} (stderr closed first)"),
                timeout: hang_guard,
            }),
            Err(_) => Err(TestkitError::Hung {
                what: format!("a stderr line starting with {prefix:?}"),
                timeout: hang_guard,
            }),
        }
    }
}
