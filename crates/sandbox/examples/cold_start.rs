//! Measures the cold start of a sandboxed `true` against a plain one (mean over `RUNS`), with where
//! the time goes, for the README's numbers:
//! `cargo run -p manifold-sandbox --example cold_start -- PATH_TO_LAUNCHER`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use manifold_sandbox::{SandboxSpec, SandboxedCommand};

/// Runs per side.
const RUNS: u32 = 50;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let launcher = std::env::args()
        .nth(1)
        .map_or_else(manifold_sandbox::default_launcher, |p| Ok(p.into()))?;
    let dir = std::env::temp_dir().join(format!("manifold-cold-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let spec = SandboxSpec::new(dir.join("workspace"), dir.join("output"), dir.join("home"));
    let start = Instant::now();
    for _ in 0..RUNS {
        Command::new("true").stdin(Stdio::null()).status()?;
    }
    let plain = start.elapsed() / RUNS;
    let mut phases = [Duration::ZERO; 4];
    let start = Instant::now();
    for _ in 0..RUNS {
        let t = Instant::now();
        let mut command = SandboxedCommand::new(&launcher, &spec, "true", [] as [&str; 0])?;
        command.command_mut().stdin(Stdio::null());
        phases[0] += t.elapsed();
        let t = Instant::now();
        let mut sandboxed = command.spawn()?;
        phases[1] += t.elapsed();
        let t = Instant::now();
        sandboxed.child.wait()?;
        phases[2] += t.elapsed();
        let t = Instant::now();
        drop(sandboxed.cgroup);
        phases[3] += t.elapsed();
    }
    let boxed = start.elapsed() / RUNS;
    println!("true: plain {plain:?}, sandboxed {boxed:?} (mean of {RUNS})");
    let [prepare, report, exit, cleanup] = phases.map(|d| d / RUNS);
    println!(
        "  dirs+cgroup {prepare:?}, spawn to report {report:?}, report to exit {exit:?}, cgroup removal {cleanup:?}"
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
