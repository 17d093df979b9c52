//! A harness for tests and measurements: a gateway over one stdio upstream named on the command
//! line, served on stdio (`serve_stdio`) or over HTTP (`Server`), without the full `manifold`
//! binary and its configuration.
//!
//! Tests run real stdio clients (the Python SDK) against the stdio mode; the HTTP mode with
//! `--unprefixed` lets the official conformance suite, which expects its fixture's exact tool
//! names, measure Manifold's HTTP server in front of that fixture.
//!
//! Usage: `manifold-server-harness [--http 127.0.0.1:PORT] [--unprefixed] NAME COMMAND [ARGS...]`.
//! HTTP mode prints `listening on http://ADDR/mcp` as its only stdout line and serves until stdin
//! closes. Logs go to stderr only.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use manifold_gateway::catalog::naming::{NamingMode, NamingRules};
use manifold_gateway::{Gateway, GatewaySettings, UpstreamDefinition};
use manifold_server::{Server, ServerSettings, SessionKey};
use manifold_upstream::Target;
use manifold_upstream::transport::stdio::StdioSpec;
use tokio::io::AsyncReadExt as _;

const USAGE: &str =
    "usage: manifold-server-harness [--http 127.0.0.1:PORT] [--unprefixed] NAME COMMAND [ARGS...]";

struct Options {
    http: Option<SocketAddr>,
    unprefixed: bool,
    name: String,
    command: String,
    args: Vec<String>,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1).peekable();
    let mut http = None;
    let mut unprefixed = false;
    while let Some(flag) = args.peek().filter(|a| a.starts_with("--")).cloned() {
        args.next();
        match flag.as_str() {
            "--http" => {
                let addr = args
                    .next()
                    .ok_or("--http needs an address such as 127.0.0.1:0")?;
                http = Some(addr.parse().map_err(|e| format!("--http {addr}: {e}"))?);
            }
            "--unprefixed" => unprefixed = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    let name = args.next().ok_or("the upstream NAME is missing")?;
    let command = args.next().ok_or("the upstream COMMAND is missing")?;
    Ok(Options {
        http,
        unprefixed,
        name,
        command,
        args: args.collect(),
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let options = match options() {
        Ok(o) => o,
        Err(why) => {
            eprintln!("manifold-server-harness: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut definition = UpstreamDefinition::new(
        options.name,
        Target::Stdio(StdioSpec {
            command: options.command,
            args: options.args,
            ..StdioSpec::default()
        }),
    );
    // The upstream may ask what any client might answer; each request still reaches only a
    // client that declared the capability itself.
    definition.client_capabilities =
        r#"{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{"listChanged":true}}"#
            .to_owned();
    let mut settings = GatewaySettings::default();
    if options.unprefixed {
        settings.naming = NamingRules {
            mode: NamingMode::Never,
            ..NamingRules::default()
        };
    }
    let gateway = Gateway::start(settings, vec![definition]);
    gateway.wait_started(Duration::from_secs(30)).await;
    let served = match options.http {
        None => {
            manifold_server::serve_stdio(gateway.clone(), tokio::io::stdin(), tokio::io::stdout())
                .await
                .map_err(|e| e.to_string())
        }
        Some(addr) => serve_http(gateway.clone(), addr).await,
    };
    gateway.shutdown().await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("manifold-server-harness: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve_http(gateway: Gateway, addr: SocketAddr) -> Result<(), String> {
    let key = SessionKey::generate().map_err(|e| e.to_string())?;
    let mut settings = ServerSettings::new(key);
    settings.listen = addr;
    let server = Server::bind(settings, gateway)
        .await
        .map_err(|e| e.to_string())?;
    println!("listening on http://{}/mcp", server.local_addr());
    // Serve until whoever started us closes our stdin.
    let mut sink = [0u8; 256];
    let mut stdin = tokio::io::stdin();
    while let Ok(n) = stdin.read(&mut sink).await {
        if n == 0 {
            break;
        }
    }
    server.shutdown().await;
    Ok(())
}
