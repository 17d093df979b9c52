//! Shell completions and man pages, generated from the one command-line definition (`args.rs`),
//! so they never drift from what `manifold` accepts.

use std::path::Path;

use clap::CommandFactory;

use crate::args::Cli;
use crate::report::{CliError, Outcome};

/// `manifold completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<Outcome, CliError> {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "manifold", &mut std::io::stdout());
    Ok(Outcome::Success)
}

/// `manifold man`: the page of `manifold` on stdout; with `--out-dir DIR`, one page per command
/// (`manifold.1`, `manifold-serve.1`, ...) written there.
pub fn man(out_dir: Option<&Path>) -> Result<Outcome, CliError> {
    let command = Cli::command();
    match out_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::usage(format!("could not create {}: {e}", dir.display())))?;
            clap_mangen::generate_to(command, dir).map_err(|e| {
                CliError::usage(format!(
                    "could not write the man pages to {}: {e}",
                    dir.display()
                ))
            })?;
            println!("man pages written to {}", dir.display());
        }
        None => {
            clap_mangen::Man::new(command)
                .render(&mut std::io::stdout())
                .map_err(|e| CliError::usage(format!("could not write the man page: {e}")))?;
        }
    }
    Ok(Outcome::Success)
}
