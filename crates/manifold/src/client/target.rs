//! Turning the client commands' positional words into a target and the names they operate on.
//!
//! The accepted shapes are few and fixed: `[URL] NAME...` for HTTP servers and `NAME... -- COMMAND`
//! for stdio servers, so a mistake gets an error that shows the right shape.

use std::time::Duration;

use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{EraChoice, HttpSpec, HttpTransportChoice, Target};

use crate::args::{EraArg, TargetArgs, TransportArg};
use crate::report::CliError;

/// A resolved target and the remaining positional words (tool name, URI, prompt name).
pub struct Resolved {
    pub target: Target,
    /// What to call the server in messages.
    pub label: String,
    pub names: Vec<String>,
    pub era: EraChoice,
    pub timeout: Duration,
}

fn looks_like_url(s: &str) -> bool {
    s.contains("://")
}

/// Resolves the target; `names_wanted` is how many names the command takes after the URL.
pub fn resolve(args: &TargetArgs, names_wanted: usize, usage: &str) -> Result<Resolved, CliError> {
    let usage_err = |what: String| CliError::usage(format!("{what}\n  usage: {usage}"));
    let (target, label, names) = if !args.command.is_empty() {
        let env = crate::pair_args::parse_all(&args.env, crate::pair_args::PairFlag::Env)
            .map_err(usage_err)?;
        let command = args.command.first().cloned().unwrap_or_default();
        let spec = StdioSpec {
            command: command.clone(),
            args: args.command.iter().skip(1).cloned().collect(),
            env,
            env_allow: None,
            cwd: args.cwd.clone(),
            max_line: None,
            sandbox: Default::default(),
        };
        (Target::Stdio(spec), command, args.positional.clone())
    } else {
        let Some(url) = args.positional.first().filter(|p| looks_like_url(p)) else {
            return Err(usage_err(
                "no server given: put a URL first, or the server's command after `--`".to_owned(),
            ));
        };
        let headers =
            crate::pair_args::parse_all(&args.headers, crate::pair_args::PairFlag::Header)
                .map_err(usage_err)?;
        let spec = HttpSpec {
            url: url.clone(),
            transport: match args.transport {
                TransportArg::Auto => HttpTransportChoice::Auto,
                TransportArg::Http => HttpTransportChoice::StreamableHttp,
                TransportArg::Sse => HttpTransportChoice::Sse,
            },
            headers,
            ca_bundle: args.ca_bundle.clone(),
            client_identity: args.client_cert.clone(),
            allow_insecure_http: args.allow_insecure_http,
            ..HttpSpec::default()
        };
        (
            Target::Http(spec),
            url.clone(),
            args.positional.iter().skip(1).cloned().collect(),
        )
    };
    if names.len() != names_wanted {
        return Err(usage_err(match names_wanted {
            0 => format!("unexpected extra words: {}", names.join(" ")),
            _ if names.is_empty() => "missing the name to operate on".to_owned(),
            _ => format!("expected {names_wanted} name(s), got: {}", names.join(" ")),
        }));
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(usage_err(format!(
            "--timeout {} must be a positive number of seconds",
            args.timeout
        )));
    }
    Ok(Resolved {
        target,
        label,
        names,
        era: match args.era {
            EraArg::Auto => EraChoice::Auto,
            EraArg::Legacy => EraChoice::Legacy,
            EraArg::Modern => EraChoice::Modern,
        },
        timeout: Duration::from_secs_f64(args.timeout),
    })
}
