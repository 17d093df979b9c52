//! manifold-echo: the benchmark's upstream. A minimal MCP server whose tools return their
//! `message` argument, over stdio or Streamable HTTP, in the legacy (initialize + sessions) and
//! modern (2026-07-28, per-request `_meta`) eras. It exists so that benchmark figures measure the
//! gateway in front of it, never the server behind it.

mod catalog;
mod http;
mod protocol;
mod sessions;
mod stdio;

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use crate::catalog::Catalog;
use crate::http::HttpState;
use crate::sessions::Sessions;

#[derive(Parser)]
#[command(
    name = "manifold-echo",
    version,
    about = "A minimal, fast MCP echo server (stdio or Streamable HTTP, both protocol eras)"
)]
struct Cli {
    #[command(subcommand)]
    transport: Transport,
}

#[derive(Subcommand)]
enum Transport {
    /// Newline-delimited JSON-RPC on stdin/stdout.
    Stdio(Common),
    /// Streamable HTTP at /mcp; prints the URL as the first line on stdout.
    Http {
        /// Where to listen (loopback only); port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Runtime worker threads (default: one per CPU).
        #[arg(long)]
        threads: Option<usize>,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
struct Common {
    /// How many echo tools to offer: `echo`, then `echo_1` .. `echo_{N-1}`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    tools: u32,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.transport {
        Transport::Stdio(common) => stdio::serve(&Catalog::new(common.tools as usize))
            .map_err(|e| format!("stdio failed: {e}")),
        Transport::Http {
            listen,
            threads,
            common,
        } => serve_http(listen, threads, common.tools as usize),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("manifold-echo: {message}");
            ExitCode::FAILURE
        }
    }
}

fn serve_http(listen: SocketAddr, threads: Option<usize>, tools: usize) -> Result<(), String> {
    if !listen.ip().is_loopback() {
        return Err(format!(
            "refusing to listen on {listen}: this benchmark server has no authentication; use 127.0.0.1:PORT"
        ));
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = threads {
        builder.worker_threads(threads.max(1));
    }
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| format!("could not start the runtime: {e}"))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
            format!("could not listen on {listen}: {e}; is the port in use? try 127.0.0.1:0")
        })?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("could not read the bound address: {e}"))?;
        // The URL alone on the first line, so whoever started this process can read it.
        let mut stdout = std::io::stdout();
        writeln!(stdout, "http://{address}{}", http::PATH)
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("could not print the URL: {e}"))?;
        let state = Arc::new(HttpState {
            catalog: Catalog::new(tools),
            sessions: Sessions::default(),
        });
        http::serve(listener, state).await;
        Ok(())
    })
}
