//! `manifold pins list [SERVER]` and `manifold pins approve SERVER`: the person's side of tool
//! definition pinning.
//!
//! The gateway pins each tool's definition on first sight and records later changes in the store;
//! a changed tool under `on_change = "block"` stays withheld until someone who has looked at the
//! change approves it here. The store is opened like `manifold keys` does (beside a running
//! gateway); approving moves the seen definitions into the pins in one transaction and bumps the
//! pin revision, which running gateways notice within a second, no restart needed. An old
//! `pins.json` is imported first.

use std::sync::Arc;

use clap::Subcommand;
use manifold_config::Config;
use manifold_gateway::pins::{PIN_FILE_POLL, PinFile, PinRepository};
use manifold_store::Store;

use crate::pin_store::StorePins;

use crate::config_file::load_config;
use crate::report::{CliError, Outcome};
use manifold_store::timestamps::utc_rfc3339;

/// Hex digits of a digest shown in the human listing (the JSON has them whole).
const SHOWN_DIGEST_HEX: usize = 16;

#[derive(Debug, Subcommand)]
pub enum PinsAction {
    /// List pinned tool definitions and changes waiting for approval.
    List {
        /// Only this server.
        server: Option<String>,
        /// The configuration file, for its data directory (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
        /// Print the pins as JSON (the format pins.json had, with each definition).
        #[arg(long)]
        json: bool,
    },
    /// Accept the changed tool definitions of SERVER as its new pins (running gateways pick the approval up within a second).
    Approve {
        /// The server whose changes to accept.
        server: String,
        /// The configuration file, for its data directory (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
    },
}

/// `manifold pins ...`: the store opened beside any running gateway, `pins.json` imported once.
pub async fn run(action: &PinsAction) -> Result<Outcome, CliError> {
    let given = match action {
        PinsAction::List { config, .. } | PinsAction::Approve { config, .. } => config.as_deref(),
    };
    let config = load_config(given)?;
    let store = crate::key_store::open_for_command(&config).await?;
    let outcome = match crate::pin_store::import_pin_file(&config.gateway.data_dir, &store).await {
        Err(e) => Err(e),
        Ok(report) => {
            if let Some(r) = &report {
                eprintln!("{}", crate::pin_store::describe_import(r));
            }
            match action {
                PinsAction::List { server, json, .. } => {
                    list(&config, &store, server.as_deref(), *json).await
                }
                PinsAction::Approve { server, .. } => approve(&config, &store, server).await,
            }
        }
    };
    crate::key_store::close(store).await;
    outcome
}

fn store_error(e: manifold_gateway::pins::PinError) -> CliError {
    CliError::with_hint(
        e.to_string(),
        "pins live in the store ([store], or store.sqlite in gateway.data_dir); give this command the gateway's configuration",
    )
}

fn policy_of(config: &Config, server: &str) -> Option<&'static str> {
    config.server(server).map(|s| s.on_change.as_str())
}

fn short(digest: &str) -> &str {
    digest.get(..SHOWN_DIGEST_HEX).unwrap_or(digest)
}

/// `manifold pins list [SERVER]`.
async fn list(
    config: &Config,
    store: &Arc<Store>,
    server: Option<&str>,
    json: bool,
) -> Result<Outcome, CliError> {
    let pins = StorePins::new(Arc::clone(store));
    let (mut file, _) = pins.snapshot().await.map_err(store_error)?;
    if let Some(only) = server {
        file.pins.retain(|s, _| s == only);
        file.changed.retain(|s, _| s == only);
        if file.pins.is_empty() && config.server(only).is_none() {
            return Err(CliError::with_hint(
                format!(
                    "no pins for server {only:?} in {}, and no such server in the configuration",
                    pins.describe()
                ),
                "`manifold pins list` shows every server with pins",
            ));
        }
    }
    if json {
        let text = serde_json::to_string_pretty(&file)
            .map_err(|e| CliError::usage(format!("could not print the pins: {e}")))?;
        println!("{text}");
        return Ok(Outcome::Success);
    }
    print!("{}", render(config, &pins.describe(), &file));
    Ok(Outcome::Success)
}

fn render(config: &Config, place: &str, file: &PinFile) -> String {
    let mut out = format!("pins in {place}\n");
    if file.pins.is_empty() {
        out.push_str("no tool definitions pinned yet (a gateway pins them when it first lists a server's tools)\n");
        return out;
    }
    for (server, tools) in &file.pins {
        let policy = policy_of(config, server)
            .map(|p| format!("on_change = {p:?}"))
            .unwrap_or_else(|| "not in the configuration".to_owned());
        out.push_str(&format!("{server} ({policy})\n"));
        let changed = file.changed.get(server);
        let width = tools.keys().map(|t| t.chars().count()).max().unwrap_or(0);
        for (tool, pin) in tools {
            match changed.and_then(|c| c.get(tool)) {
                None => out.push_str(&format!(
                    "  {tool:<width$}  pinned   {}  since {}\n",
                    short(&pin.sha256),
                    utc_rfc3339(pin.pinned_at)
                )),
                Some(change) => {
                    let members = if change.fields.is_empty() {
                        "definition".to_owned()
                    } else {
                        change.fields.join(", ")
                    };
                    out.push_str(&format!(
                        "  {tool:<width$}  CHANGED  {} -> {}  seen {}: {members} changed; approve with `manifold pins approve {server}`\n",
                        short(&pin.sha256),
                        short(&change.seen),
                        utc_rfc3339(change.seen_at)
                    ));
                }
            }
        }
    }
    out
}

/// `manifold pins approve SERVER`.
async fn approve(config: &Config, store: &Arc<Store>, server: &str) -> Result<Outcome, CliError> {
    let pins = StorePins::new(Arc::clone(store));
    let (file, _) = pins.snapshot().await.map_err(store_error)?;
    if !file.pins.contains_key(server) && config.server(server).is_none() {
        return Err(CliError::with_hint(
            format!(
                "no pins for server {server:?} in {}, and no such server in the configuration",
                pins.describe()
            ),
            "`manifold pins list` shows every server with pins",
        ));
    }
    println!("{}", approve_changed(&pins, server).await?);
    Ok(Outcome::Success)
}

/// Accepts every changed definition of `server` as its new pin (the CLI and the dashboard):
/// what was approved, in one line.
pub(crate) async fn approve_changed(pins: &StorePins, server: &str) -> Result<String, CliError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let approved = pins.approve(server, now).await.map_err(store_error)?;
    Ok(if approved.is_empty() {
        format!("server {server:?} has no changed tool definitions to approve")
    } else {
        format!(
            "approved {} changed tool definition(s) of server {server:?}: {}; running gateways serve them again within {} s",
            approved.len(),
            approved.join(", "),
            PIN_FILE_POLL.as_secs()
        )
    })
}
