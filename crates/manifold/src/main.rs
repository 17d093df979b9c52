//! The `manifold` binary: the only place that parses a command line.
//!
//! Logs go to stderr so that stdout carries only results (and, in `manifold stdio`, only protocol
//! bytes).

mod approval_store;
mod approval_webhook;
mod approvals_commands;
mod args;
mod audit_commands;
mod audit_trail;
mod cli_reference;
mod client;
mod config_commands;
mod config_edit;
mod config_file;
mod dashboard;
mod doctor;
mod exposure;
mod gateway_config;
mod key_store;
mod keys;
mod login;
mod pair_args;
mod pin_store;
mod pins_commands;
mod process_memory;
mod rate_limit_store;
mod registry_import;
mod relay_store;
mod report;
mod serve;
mod telemetry_setup;
mod token_store;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// mimalloc instead of glibc malloc: a forwarded call allocates a few dozen small blocks across
/// worker threads, which glibc serves slowly and under arena locks (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `--json '{...}'` on `call` gives arguments; a bare `--json` asks for raw output. Telling them
/// apart needs a look at the next word, which clap cannot take.
fn split_json_flag(argv: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut iter = argv.into_iter().peekable();
    let mut after_dashes = false;
    while let Some(a) = iter.next() {
        if a == "--" {
            after_dashes = true;
        }
        if !after_dashes
            && a == "--json"
            && iter.peek().is_some_and(|n| n.trim_start().starts_with('{'))
        {
            out.push("--json-args".to_owned());
            continue;
        }
        out.push(a);
    }
    out
}

fn main() -> ExitCode {
    process_memory::tune_at_start();
    let cli = Cli::parse_from(split_json_flag(std::env::args().collect()));
    let telemetry = telemetry_setup::start(&cli);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match &cli.command {
            Command::Inspect { target } => client::inspect(target).await,
            Command::List { what, target } => client::list(*what, target).await,
            Command::Call {
                target,
                args,
                json_args,
            } => client::call(target, args, json_args.as_deref()).await,
            Command::Read { target } => client::read(target).await,
            Command::Serve {
                config,
                listen,
                insecure_no_auth,
            } => serve::serve(config.as_deref(), *listen, *insecure_no_auth).await,
            Command::Keys { action } => keys::run(action).await,
            Command::Audit { action } => audit_commands::run(action).await,
            Command::Stdio { config, toolset } => {
                serve::stdio(config.as_deref(), toolset.as_deref()).await
            }
            Command::Check { config } => config_commands::check(config.as_deref()).await,
            Command::Doctor { config } => doctor::doctor(config.as_deref()),
            Command::Import {
                file,
                registry: None,
            } => config_commands::import(file),
            Command::Import {
                file,
                registry: Some(registry),
            } => registry_import::import(registry, &file.to_string_lossy()).await,
            Command::Login { server, config } => login::login(config.as_deref(), server).await,
            Command::Pins { action } => pins_commands::run(action).await,
            Command::Approvals { action } => approvals_commands::run(action).await,
            Command::Prompt { target, args } => client::prompt(target, args).await,
            Command::Export {
                format,
                toolset,
                target,
            } => client::export::export(*format, toolset.as_deref(), target).await,
            Command::Add {
                name,
                url,
                command,
                env,
                headers,
                prefix,
                config,
            } => config_edit::add(
                config.as_deref(),
                &config_edit::NewServer {
                    name: name.clone(),
                    url: url.clone(),
                    command: command.clone(),
                    env: env.clone(),
                    headers: headers.clone(),
                    prefix: prefix.clone(),
                },
            ),
            Command::Remove { name, config } => config_edit::remove(config.as_deref(), name),
            Command::Completions { shell } => cli_reference::completions(*shell),
            Command::Man { out_dir } => cli_reference::man(out_dir.as_deref()),
            Command::ConformanceClient { url } => client::conformance::run(url).await,
        }
    });
    // Children are reaped by their connections; the runtime goes down after them.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    // Buffered spans are flushed now, with no runtime left to compete with.
    drop(telemetry);
    match outcome {
        Ok(o) => o.exit_code(),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn json_with_an_object_means_arguments() {
        assert_eq!(
            split_json_flag(v(&["m", "call", "t", "--json", "{\"a\":1}"])),
            v(&["m", "call", "t", "--json-args", "{\"a\":1}"])
        );
        assert_eq!(
            split_json_flag(v(&["m", "list", "tools", "--json", "http://x"])),
            v(&["m", "list", "tools", "--json", "http://x"])
        );
        assert_eq!(
            split_json_flag(v(&["m", "call", "t", "--", "srv", "--json", "{}"])),
            v(&["m", "call", "t", "--", "srv", "--json", "{}"])
        );
    }
}
