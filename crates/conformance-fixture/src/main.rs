//! The fixture's command line: `stdio`, or `http --port N`. Everything else lives in the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use manifold_conformance_fixture::{Fixture, FixtureError, transport};

#[derive(Debug, Parser)]
#[command(
    name = "manifold-conformance-fixture",
    version,
    about = "The MCP server the official conformance suite's server scenarios expect, in both protocol eras"
)]
struct Cli {
    #[command(subcommand)]
    transport: Transport,
}

#[derive(Debug, Subcommand)]
enum Transport {
    /// Newline-delimited JSON-RPC on stdin and stdout.
    Stdio,
    /// Streamable HTTP at /mcp on 127.0.0.1; prints `listening on 127.0.0.1:PORT` first.
    Http {
        /// TCP port; 0 picks a free one.
        #[arg(long)]
        port: u16,
    },
}

async fn run(cli: Cli) -> Result<(), FixtureError> {
    let fixture = Fixture::new()?;
    match cli.transport {
        Transport::Stdio => transport::stdio::run(fixture).await,
        Transport::Http { port } => transport::http::run(fixture, port).await,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("manifold-conformance-fixture: {e}");
            ExitCode::FAILURE
        }
    }
}
