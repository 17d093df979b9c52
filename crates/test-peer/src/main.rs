//! manifold-test-peer: an MCP server for Manifold's client tests, whose behaviour a test picks on
//! the command line (see the crate README for every behaviour and the exact bytes it produces).
//!
//! It shares no code with Manifold on purpose: a peer built from Manifold's own wire crate would
//! agree with Manifold's bugs.

mod base64_sentinel;
mod behaviour;
mod cancel_journal;
mod canonical_json;
mod catalog;
mod definition_attacks;
mod engine;
mod error;
mod http_replies;
mod http_session;
mod jsonrpc;
mod legacy_sse;
mod payloads;
mod poison_free;
mod process_behaviour;
mod sse_event;
mod stdio;
mod streamable_http;
mod tools;

use clap::{Args, Parser, Subcommand};

use crate::behaviour::{Behaviour, EraChoice, ReplyMode, Settings};
use crate::engine::Peer;
use crate::error::PeerError;

#[derive(Debug, Parser)]
#[command(
    name = "manifold-test-peer",
    version,
    about = "A minimal MCP server whose (mis)behaviour a test selects",
    long_about = "A minimal MCP server for Manifold's tests. `--behaviour normal` (the default) is a \
                  correct dual-era server; every other behaviour breaks one thing on purpose, as the \
                  crate README documents byte for byte."
)]
struct Cli {
    #[command(subcommand)]
    transport: Transport,
}

#[derive(Debug, Subcommand)]
enum Transport {
    /// Newline-delimited JSON-RPC on stdin and stdout.
    Stdio {
        #[command(flatten)]
        common: Common,
        /// Which protocol eras to speak.
        #[arg(long, value_enum, default_value = "both")]
        era: EraChoice,
    },
    /// Streamable HTTP at /mcp on 127.0.0.1 (prints `listening on 127.0.0.1:PORT` first).
    Http {
        /// TCP port; 0 picks a free one.
        #[arg(long)]
        port: u16,
        #[command(flatten)]
        common: Common,
        /// Which protocol eras to speak.
        #[arg(long, value_enum, default_value = "both")]
        era: EraChoice,
        /// Answer every POSTed request with an SSE stream (when the client accepts it).
        #[arg(long, conflicts_with = "json_replies")]
        sse_replies: bool,
        /// Answer every POSTed request with JSON (when the client accepts it).
        #[arg(long)]
        json_replies: bool,
    },
    /// The legacy HTTP+SSE transport (GET /sse, POST /message), legacy era only.
    Sse {
        /// TCP port; 0 picks a free one.
        #[arg(long)]
        port: u16,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Debug, Args)]
struct Common {
    /// What to do, right or wrong.
    #[arg(long, alias = "behavior", value_enum, default_value = "normal")]
    behaviour: Behaviour,
    /// A count the behaviour uses (banner lines, requests before a fault, tools, notifications).
    #[arg(long)]
    count: Option<u64>,
    /// A delay the behaviour uses, in milliseconds (slow-handshake, drip-feed).
    #[arg(long)]
    delay_ms: Option<u64>,
    /// Tools per tools/list page for many-tools.
    #[arg(long, default_value_t = 1000)]
    page_size: usize,
}

impl Common {
    fn settings(&self, era: EraChoice, reply_mode: ReplyMode) -> Settings {
        Settings {
            behaviour: self.behaviour,
            era,
            count: self.count,
            delay_ms: self.delay_ms,
            page_size: self.page_size,
            reply_mode,
        }
    }
}

enum Mode {
    Stdio,
    Http(u16),
    Sse(u16),
}

fn main() {
    let cli = Cli::parse();
    let (settings, mode) = match &cli.transport {
        Transport::Stdio { common, era } => (common.settings(*era, ReplyMode::Auto), Mode::Stdio),
        Transport::Http {
            port,
            common,
            era,
            sse_replies,
            json_replies,
        } => {
            let reply_mode = match (sse_replies, json_replies) {
                (true, _) => ReplyMode::Sse,
                (_, true) => ReplyMode::Json,
                _ => ReplyMode::Auto,
            };
            (common.settings(*era, reply_mode), Mode::Http(*port))
        }
        Transport::Sse { port, common } => (
            common.settings(EraChoice::Legacy, ReplyMode::Auto),
            Mode::Sse(*port),
        ),
    };
    process_behaviour::before_start(&settings);
    let result = run(settings, mode);
    // Exit explicitly: a tokio stdin read parked in a blocking thread would otherwise hold the
    // runtime's shutdown.
    match result {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("manifold-test-peer: {error}");
            std::process::exit(1)
        }
    }
}

fn run(settings: Settings, mode: Mode) -> Result<(), PeerError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(PeerError::Runtime)?;
    runtime.block_on(async move {
        process_behaviour::on_runtime_start(&settings);
        let peer = Peer::new(settings);
        match mode {
            Mode::Stdio => {
                stdio::serve(peer).await;
                Ok(())
            }
            Mode::Http(port) => streamable_http::serve(peer, port).await,
            Mode::Sse(port) => legacy_sse::serve(peer, port).await,
        }
    })
}
