//! Why: the end-to-end tests drive the gateway with real SDK clients (scripts that take a JSON plan
//! and print a JSON report as their last stdout line), and each test file used to wait for its
//! client, read its pipes and pick the report out its own way. One definition here: the client
//! runs in a [`ChildGuard`], its pipes are drained while it runs (so a chatty client cannot block
//! on a full pipe), and a client that outlives the hang guard is killed and reported.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::child::ChildGuard;
use crate::error::TestkitError;

const POLL: Duration = Duration::from_millis(50);

/// A client process under way, its stdout and stderr being collected.
#[derive(Debug)]
pub struct ClientProcess {
    guard: ChildGuard,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

impl ClientProcess {
    /// Spawns `command` with stdin closed and stdout and stderr collected.
    pub fn spawn(mut command: Command) -> Result<ClientProcess, TestkitError> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut guard = ChildGuard::spawn(command)?;
        let stdout = guard.child_mut().stdout.take();
        let stderr = guard.child_mut().stderr.take();
        Ok(ClientProcess {
            stdout: std::thread::spawn(move || read_all(stdout)),
            stderr: std::thread::spawn(move || read_all(stderr)),
            guard,
        })
    }

    /// Waits for the client to exit, at most `hang_guard` (then it is killed and this is an error
    /// quoting what it wrote), and returns how it ended and what it wrote. Anything the client
    /// left running in its process group is killed.
    pub fn finish(mut self, hang_guard: Duration) -> Result<ClientRun, TestkitError> {
        let deadline = Instant::now() + hang_guard;
        let status = loop {
            if let Some(status) = self.guard.try_wait()? {
                break Some(status);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(POLL);
        };
        let program = self.guard.program().to_owned();
        let timed_out = status.is_none();
        // Whatever the client left in its process group goes now, closing the pipes it held.
        let killed = self.guard.kill()?;
        let status = status.unwrap_or(killed);
        let run = ClientRun {
            status,
            stdout: self.stdout.join().unwrap_or_default(),
            stderr: self.stderr.join().unwrap_or_default(),
        };
        if timed_out {
            return Err(TestkitError::Hung {
                what: format!(
                    "the client {program} to finish; it wrote:\n{}\n{}",
                    run.stdout, run.stderr
                ),
                timeout: hang_guard,
            });
        }
        Ok(run)
    }

    /// The client's pid.
    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }
}

/// How a client run ended and what it wrote.
#[derive(Debug, Clone)]
pub struct ClientRun {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ClientRun {
    /// The client's report: its last stdout line, as JSON (`None` when that is not JSON).
    pub fn report(&self) -> Option<Value> {
        serde_json::from_str(self.stdout.lines().last().unwrap_or_default()).ok()
    }
}

/// Spawns `command` as a [`ClientProcess`] and [`finish`](ClientProcess::finish)es it.
pub fn run_client(command: Command, hang_guard: Duration) -> Result<ClientRun, TestkitError> {
    ClientProcess::spawn(command)?.finish(hang_guard)
}

fn read_all<R: Read>(pipe: Option<R>) -> String {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
