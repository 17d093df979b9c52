//! Behaviours that act on the process itself rather than on messages: exiting before anything
//! happens, flooding stderr, and refusing to die politely.

use std::io::Write;
use std::time::Duration;

use crate::behaviour::{Behaviour, Settings};
use crate::payloads::MIB;

/// Exit status of `exit-before-handshake`.
pub const EXIT_BEFORE_HANDSHAKE_STATUS: i32 = 3;
/// Bytes `stderr-flood` writes before serving.
pub const STDERR_FLOOD_BYTES: usize = 50 * MIB;
/// How long `ignore-sigterm` survives on its own, so a test that forgets it does not leave it
/// behind forever. Longer than the grandchild's `sleep 1000`.
pub const IGNORE_SIGTERM_FUSE: Duration = Duration::from_secs(20 * 60);

/// Runs before the async runtime exists: the behaviours that happen "at once".
pub fn before_start(settings: &Settings) {
    match settings.behaviour {
        Behaviour::ExitBeforeHandshake => {
            eprintln!(
                "manifold-test-peer: behaviour exit-before-handshake: exiting with status {EXIT_BEFORE_HANDSHAKE_STATUS}"
            );
            std::process::exit(EXIT_BEFORE_HANDSHAKE_STATUS);
        }
        Behaviour::StderrFlood => flood_stderr(),
        _ => {}
    }
}

/// 50 MiB of 64-byte lines, written as fast as the reader drains them.
fn flood_stderr() {
    let line = b"manifold-test-peer stderr-flood: this line is 64 bytes long....\n";
    let mut chunk = Vec::with_capacity(MIB);
    while chunk.len() + line.len() <= MIB {
        chunk.extend_from_slice(line);
    }
    let mut stderr = std::io::stderr().lock();
    let mut written = 0;
    while written < STDERR_FLOOD_BYTES {
        let take = chunk.len().min(STDERR_FLOOD_BYTES - written);
        let Some(piece) = chunk.get(..take) else {
            break;
        };
        if stderr.write_all(piece).is_err() {
            // Nobody reads stderr any more; carry on serving regardless.
            return;
        }
        written += take;
    }
    let _ = stderr.flush();
}

/// Runs inside the runtime before serving: installs the SIGTERM trap and the grandchild.
pub fn on_runtime_start(settings: &Settings) {
    if settings.behaviour != Behaviour::IgnoreSigterm {
        return;
    }
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::spawn(async move {
                while terminate.recv().await.is_some() {
                    eprintln!(
                        "manifold-test-peer: behaviour ignore-sigterm: SIGTERM received and ignored"
                    );
                }
            });
        }
        Err(error) => eprintln!("manifold-test-peer: cannot trap SIGTERM: {error}"),
    }
    // The grandchild inherits stdout and stderr on purpose: the pipes stay open until the whole
    // process group is gone, which is exactly what a tree kill must handle.
    match std::process::Command::new("sleep")
        .arg("1000")
        .stdin(std::process::Stdio::null())
        .spawn()
    {
        Ok(child) => {
            eprintln!(
                "manifold-test-peer: behaviour ignore-sigterm: grandchild sleep pid {}",
                child.id()
            );
            // Never waited for (dropping a Child neither waits nor kills): when this process is
            // killed, the grandchild is orphaned, which is the situation tree killing exists for.
            drop(child);
        }
        Err(error) => eprintln!("manifold-test-peer: cannot start the grandchild sleep: {error}"),
    }
    tokio::spawn(async {
        tokio::time::sleep(IGNORE_SIGTERM_FUSE).await;
        eprintln!("manifold-test-peer: behaviour ignore-sigterm: fuse expired, exiting");
        std::process::exit(0);
    });
}
