//! `manifold check` and `manifold import`: the configuration file from a person's side.

use std::path::{Path, PathBuf};

use crate::report::{CliError, Outcome};

/// The configuration used when none is named.
pub const DEFAULT_CONFIG: &str = "manifold.toml";

/// The configuration file to use: the one given, else `./manifold.toml` if it exists.
pub fn config_path(given: Option<&Path>) -> Option<PathBuf> {
    match given {
        Some(p) => Some(p.to_path_buf()),
        None => {
            let default = PathBuf::from(DEFAULT_CONFIG);
            default.exists().then_some(default)
        }
    }
}

/// `manifold check [CONFIG]`: the report, and what an import of an old `api-keys.json` did.
pub async fn check(given: Option<&Path>) -> Result<Outcome, CliError> {
    let Some(path) = config_path(given) else {
        return Err(CliError::with_hint(
            format!("no configuration given and no {DEFAULT_CONFIG} in this directory"),
            "write one (see docs/configuration.md) or convert a client's file: manifold import ~/.cursor/mcp.json > manifold.toml",
        ));
    };
    match manifold_config::check(&path) {
        Ok(report) => {
            print!("{report}");
            if !report.ends_with('\n') {
                println!();
            }
            import_old_keys(&path).await?;
            Ok(Outcome::Success)
        }
        Err(errors) => Err(CliError::usage(format!(
            "{} is not valid:\n{errors}",
            path.display()
        ))),
    }
}

/// Imports the data dir's old `api-keys.json` into the store, if there is one (the store is not
/// opened, or created, otherwise), and says on stdout what was imported.
async fn import_old_keys(path: &Path) -> Result<(), CliError> {
    let config = crate::keys::load_config(Some(path))?;
    let file = manifold_auth::ApiKeyFile::in_dir(&config.gateway.data_dir);
    if !file.exists() {
        return Ok(());
    }
    let store = crate::key_store::open_for_command(&config).await?;
    let keys = crate::key_store::api_keys(&store);
    let imported = keys.import(&file).await;
    drop(keys);
    crate::key_store::close(store).await;
    match imported {
        Ok(Some(report)) => println!("{}", crate::key_store::describe_import(&file, &report)),
        Ok(None) => {}
        Err(e) => {
            return Err(CliError::with_hint(
                format!(
                    "could not import the API keys of {}: {e}",
                    file.path().display()
                ),
                "fix or move the file away, then run manifold check again; nothing was renamed",
            ));
        }
    }
    Ok(())
}

/// `manifold import FILE`.
pub fn import(file: &Path) -> Result<Outcome, CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::usage(format!("could not read {}: {e}", file.display())))?;
    let toml = manifold_config::import(&text, &file.display().to_string())
        .map_err(|e| CliError::usage(format!("could not convert {}: {e}", file.display())))?;
    print!("{toml}");
    Ok(Outcome::Success)
}
