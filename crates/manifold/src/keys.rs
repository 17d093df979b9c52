//! `manifold keys create|list|revoke`: the operator's side of API keys.
//!
//! Keys live in Manifold's store (the one `serve` uses, from the same configuration: SQLite in
//! the data directory, or PostgreSQL), as digests only: `create` prints the key once on stdout,
//! for a script or a password manager, and it cannot be shown again. A running gateway sees a
//! new key at once and a revoked one within `KEY_REFRESH_INTERVAL`; no restart is needed. These
//! commands open the store briefly, beside a running gateway (see `key_store`).

use clap::Subcommand;
use manifold_auth::{ApiKeys, KeyRecord, KeyStoreError};
use manifold_config::Config;

use crate::config_file::load_config;
use crate::key_store;
use crate::report::{CliError, Outcome};
use manifold_store::timestamps::utc_rfc3339;

#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// Make an API key for NAME and print it once (store it now: only its digest is kept).
    Create {
        /// Who the key is for (1 to 64 of A-Z a-z 0-9 _ - . @); policies and logs show it.
        name: String,
        /// Scopes granted to the key, comma-separated or repeated.
        #[arg(long, value_delimiter = ',', value_name = "SCOPE,...")]
        scopes: Vec<String>,
        /// Groups the key belongs to, comma-separated or repeated.
        #[arg(long, value_delimiter = ',', value_name = "GROUP,...")]
        groups: Vec<String>,
        /// The configuration file, for its data directory (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
    },
    /// List every key (never the secrets): name, id, scopes, groups, when made, whether revoked.
    List {
        /// The configuration file, for its data directory (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
        /// Print the records as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke every active key named NAME (running gateways refuse it from the next request on).
    Revoke {
        name: String,
        /// The configuration file, for its data directory (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
    },
}

/// `manifold keys ...`.
pub async fn run(action: &KeysAction) -> Result<Outcome, CliError> {
    let given = match action {
        KeysAction::Create { config, .. }
        | KeysAction::List { config, .. }
        | KeysAction::Revoke { config, .. } => config.as_deref(),
    };
    let config = load_config(given)?;
    let store = key_store::open_for_command(&config).await?;
    let keys = key_store::api_keys(&store);
    let outcome = match key_store::import_old_file(&config, &keys).await {
        Err(e) => Err(e),
        Ok(_) => match action {
            KeysAction::Create {
                name,
                scopes,
                groups,
                ..
            } => create(&config, &keys, name, scopes, groups).await,
            KeysAction::List { json, .. } => list(&keys, *json).await,
            KeysAction::Revoke { name, .. } => revoke(&keys, name).await,
        },
    };
    drop(keys);
    key_store::close(store).await;
    outcome
}

pub(crate) fn store_error(e: KeyStoreError) -> CliError {
    match e {
        KeyStoreError::Io { .. } | KeyStoreError::Corrupt { .. } | KeyStoreError::Store(_) => {
            CliError::with_hint(
                e.to_string(),
                "API keys live in the store ([store] url, or store.sqlite in gateway.data_dir); check that it is the one the gateway uses and that it is writable",
            )
        }
        other => CliError::usage(other.to_string()),
    }
}

async fn create(
    config: &Config,
    keys: &ApiKeys,
    name: &str,
    scopes: &[String],
    groups: &[String],
) -> Result<Outcome, CliError> {
    let new = keys
        .create(name, scopes, groups)
        .await
        .map_err(store_error)?;
    eprintln!(
        "Created API key {:?} (id {}) in {}.",
        new.record.name,
        new.record.id,
        keys.describe()
    );
    eprintln!(
        "It is shown once, below: store it now. Clients send it as `Authorization: Bearer <key>`."
    );
    if !config.auth.api_keys {
        eprintln!(
            "note: {} does not set [auth] api_keys = true, so the gateway does not accept API keys yet",
            config.origin
        );
    }
    // stdout gets the key alone, so scripts can capture it.
    println!("{}", new.key);
    Ok(Outcome::Success)
}

async fn revoke(keys: &ApiKeys, name: &str) -> Result<Outcome, CliError> {
    let revoked = keys.revoke(name).await.map_err(store_error)?;
    for r in &revoked {
        eprintln!("Revoked API key {:?} (id {}).", r.name, r.id);
    }
    Ok(Outcome::Success)
}

async fn list(store: &ApiKeys, json: bool) -> Result<Outcome, CliError> {
    let keys = store.list().await.map_err(store_error)?;
    if json {
        let records: Vec<serde_json::Value> = keys.iter().map(record_json).collect();
        println!("{}", serde_json::Value::Array(records));
        return Ok(Outcome::Success);
    }
    if keys.is_empty() {
        eprintln!(
            "No API keys in {}; make one with `manifold keys create NAME`.",
            store.describe()
        );
        return Ok(Outcome::Success);
    }
    let rows: Vec<[String; 6]> = keys
        .iter()
        .map(|k| {
            [
                k.name.clone(),
                k.id.clone(),
                list_or_dash(&k.scopes),
                list_or_dash(&k.groups),
                utc_rfc3339(k.created),
                k.revoked.map_or_else(
                    || "active".to_owned(),
                    |t| format!("revoked {}", utc_rfc3339(t)),
                ),
            ]
        })
        .collect();
    let header = ["NAME", "ID", "SCOPES", "GROUPS", "CREATED", "STATUS"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    println!("{}", line(&header.map(str::to_owned)));
    for row in &rows {
        println!("{}", line(row));
    }
    Ok(Outcome::Success)
}

fn list_or_dash(items: &[String]) -> String {
    if items.is_empty() {
        "-".to_owned()
    } else {
        items.join(",")
    }
}

fn record_json(k: &KeyRecord) -> serde_json::Value {
    serde_json::json!({
        "name": k.name,
        "id": k.id,
        "scopes": k.scopes,
        "groups": k.groups,
        "created": utc_rfc3339(k.created),
        "revoked": k.revoked.map(utc_rfc3339),
    })
}
