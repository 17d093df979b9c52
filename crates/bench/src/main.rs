//! manifold-bench: measures Manifold against a direct connection to the same echo server and
//! against other MCP gateways (supergateway, mcp-proxy from npm and from PyPI), in one invocation
//! on one machine: latency, throughput, CPU per call, memory per session, fan-out, cold start,
//! both protocol eras, and what Manifold's audit trail costs. `manifold-bench setup` installs the pinned contenders; `run` (the default)
//! measures and prints a table, and JSON with `--json FILE`.

mod child_process;
mod client;
mod contenders;
mod haproxy;
mod load;
mod machine;
mod process_metrics;
mod report;
mod run;
mod scenarios;
mod setup;
mod stats;
mod throwaway_postgres;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::run::RunArgs;

#[derive(Parser)]
#[command(
    name = "manifold-bench",
    version,
    about = "Benchmarks Manifold against a direct connection and other MCP gateways",
    long_about = "Benchmarks Manifold against a direct connection to the same echo server and against \
supergateway, mcp-proxy (npm) and mcp-proxy (PyPI). With no subcommand it runs every scenario \
(like `run`). Build first: cargo build --release -p manifold -p manifold-bench -p manifold-echo",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the scenarios (installs missing contenders first unless --no-setup).
    Run(RunArgs),
    /// Install the pinned contenders under ~/.cache/manifold/bench.
    Setup(SetupArgs),
}

#[derive(Args)]
struct SetupArgs {
    /// Reinstall even when the installed contenders are current.
    #[arg(long)]
    force: bool,
    /// Where to install (default: $MANIFOLD_BENCH_CACHE, else ~/.cache/manifold/bench).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Setup(args)) => setup(&args),
        Some(Command::Run(args)) => run_and_report(args),
        None => run_and_report(cli.run),
    }
}

fn setup(args: &SetupArgs) -> ExitCode {
    let cache = match setup::cache_dir(args.cache_dir.as_deref()) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("manifold-bench setup: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    match setup::ensure_node(&cache, args.force, true) {
        Ok(node) => println!(
            "supergateway {} and mcp-proxy {} (npm) are installed in {}",
            node.supergateway_version,
            node.mcp_proxy_version,
            cache.join("npm").display()
        ),
        Err(e) => {
            eprintln!("manifold-bench setup: the Node contenders: {e}");
            failed = true;
        }
    }
    match setup::ensure_python(&cache, args.force, true) {
        Ok(python) => println!(
            "mcp-proxy {} (PyPI) is installed in {}",
            python.version,
            cache.join("venv").display()
        ),
        Err(e) => {
            eprintln!("manifold-bench setup: the Python contender: {e}");
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn run_and_report(args: RunArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("manifold-bench: could not start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let json = args.json.clone();
    let outcome = runtime.block_on(async move {
        // The run is a task on the runtime's workers, not the future `block_on` polls on this
        // thread: there every call would wait for a cross-thread wake-up of the connection task,
        // adding tens of microseconds to every contender's latency.
        let mut task = tokio::spawn(run::run(args, command));
        tokio::select! {
            outcome = &mut task => Some(outcome.unwrap_or_else(|e| Err(format!("the run failed: {e}")))),
            _ = tokio::signal::ctrl_c() => {
                // Dropping the run stops every contender it started.
                task.abort();
                let _ = task.await;
                None
            }
        }
    });
    let report = match outcome {
        None => {
            eprintln!("manifold-bench: interrupted; every contender was stopped");
            return ExitCode::from(130);
        }
        Some(Err(e)) => {
            eprintln!("manifold-bench: {e}");
            return ExitCode::FAILURE;
        }
        Some(Ok(report)) => report,
    };
    print!("{}", report.render());
    if let Some(path) = json {
        let text = match serde_json::to_string_pretty(&report) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("manifold-bench: could not encode the report as JSON: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Err(e) = std::fs::write(&path, text + "\n") {
            eprintln!("manifold-bench: could not write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("manifold-bench: JSON report written to {}", path.display());
    }
    ExitCode::SUCCESS
}
