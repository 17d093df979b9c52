//! `manifold check` and `manifold import`: the configuration file from a person's side.

use std::path::Path;

use crate::config_file::{config_path, load_config};
use crate::report::{CliError, Outcome};

/// `manifold check [CONFIG]`: the report, and what importing old files into the store did.
pub async fn check(given: Option<&Path>) -> Result<Outcome, CliError> {
    let Some(path) = config_path(given) else {
        return Err(CliError::with_hint(
            crate::config_file::none_found(),
            "write one (see docs/configuration.md) or convert a client's file: manifold import ~/.cursor/mcp.json > manifold.toml",
        ));
    };
    match manifold_config::check(&path) {
        Ok(report) => {
            // What [tools.NAME] fields mean is the authored tools' to judge, as at start.
            let config = load_config(Some(&path))?;
            if let Err(e) = crate::gateway_config::configured_tools(&config) {
                return Err(CliError::usage(format!(
                    "{} is not valid:\n{e}",
                    path.display()
                )));
            }
            print!("{report}");
            if !report.ends_with('\n') {
                println!();
            }
            // What `serve` would refuse at start is worth saying here, where it is cheap.
            let exposure = crate::exposure::decide(
                config.gateway.listen,
                config.auth.enabled(),
                config.auth.insecure_no_auth,
            );
            if let Err(refused) = exposure {
                let fix = refused.hint.as_deref().unwrap_or_default();
                println!(
                    "note: manifold serve refuses to start with this: {}; {fix}",
                    refused.message
                );
            }
            import_old_files(&path).await?;
            Ok(Outcome::Success)
        }
        Err(errors) => Err(CliError::usage(format!(
            "{} is not valid:\n{errors}",
            path.display()
        ))),
    }
}

/// Imports what earlier versions kept in files in the data dir (`api-keys.json`, the `oauth`
/// token directory, `pins.json`) into the store, if any is there (the store is not opened, or
/// created, otherwise), and says on stdout what was imported.
async fn import_old_files(path: &Path) -> Result<(), CliError> {
    let config = load_config(Some(path))?;
    let data_dir = &config.gateway.data_dir;
    let file = manifold_auth::ApiKeyFile::in_dir(data_dir);
    let token_dir = crate::token_store::old_token_dir(data_dir);
    let pin_file = manifold_gateway::pins::OldPinFile::in_dir(data_dir);
    if !file.exists() && !token_dir.is_dir() && !pin_file.exists() {
        return Ok(());
    }
    let store = crate::key_store::open_for_command(&config).await?;
    let imported = import_into(&config, &store, &file).await;
    crate::key_store::close(store).await;
    imported
}

async fn import_into(
    config: &manifold_config::Config,
    store: &std::sync::Arc<manifold_store::Store>,
    file: &manifold_auth::ApiKeyFile,
) -> Result<(), CliError> {
    if file.exists() {
        let keys = crate::key_store::api_keys(store);
        match keys.import(file).await {
            Ok(Some(report)) => println!("{}", crate::key_store::describe_import(file, &report)),
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
    }
    let tokens = crate::token_store::StoreTokens::new(std::sync::Arc::clone(store), config)?;
    if let Some(report) =
        crate::token_store::import_token_files(&config.gateway.data_dir, &tokens).await?
    {
        println!("{}", crate::token_store::describe_import(&report));
    }
    if let Some(report) = crate::pin_store::import_pin_file(&config.gateway.data_dir, store).await?
    {
        println!("{}", crate::pin_store::describe_import(&report));
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
