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

/// `manifold check [CONFIG]`.
pub fn check(given: Option<&Path>) -> Result<Outcome, CliError> {
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
            Ok(Outcome::Success)
        }
        Err(errors) => Err(CliError::usage(format!(
            "{} is not valid:\n{errors}",
            path.display()
        ))),
    }
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
