//! What `manifold serve` does between "listening" and exit: reloads, and the graceful shutdown.
//!
//! Reload: on SIGHUP, and when the configuration file changes (see `config_watch.rs`). The file
//! goes through the same loader as `manifold check`; an invalid file is refused with the same
//! messages, logged, and the running configuration stays in force. A valid one is applied to the
//! servers (`Gateway::reconfigure_with`: added ones start, removed ones drain and stop, changed
//! ones restart, unchanged ones and every client session are untouched), and with them, before
//! the new catalog is served, to `[[rules]]` and `[rate_limits]` (when they changed) and to each
//! server's `on_change` pin policy. Everything else (`[gateway]` but `drain_timeout`, `[auth]`,
//! `[telemetry]`) is fixed at start; changing it logs that a restart applies it.
//!
//! Shutdown: on SIGTERM or SIGINT. New requests are refused (503) while calls in flight get up
//! to `drain_timeout` to finish; the rest are cancelled with an error naming the shutdown;
//! streams end; children are stopped (and the cgroup, where there is one, is emptied and
//! removed); exit 0. A second SIGTERM or SIGINT during all that exits at once, status 1.

use std::path::PathBuf;
use std::time::Duration;

use manifold_config::Config;
use manifold_gateway::Gateway;
use manifold_gateway::reconfigure::AccessChange;
use manifold_server::BoundServer;

use super::child_cgroup::ChildCgroup;
use super::config_watch::{ConfigWatch, POLL};
use crate::gateway_config::access::access_settings;
use crate::gateway_config::{Stored, upstream_definitions};
use crate::pin_store::pin_policies;
use crate::report::{CliError, Outcome};

/// How long closing the HTTP server may take after the drain (open connections finish their
/// last response) before serve stops waiting for it.
pub const SERVER_CLOSE_GUARD: Duration = Duration::from_secs(5);

/// A running `serve`.
pub struct Running {
    pub gateway: Gateway,
    pub server: BoundServer,
    /// The configuration in force (its servers, rules, rate limits, pin policies and
    /// `drain_timeout`).
    pub config: Config,
    /// The configuration at start: `[gateway]` settings apply from it until a restart.
    pub started: Config,
    /// The file reloads read; `None` when serve runs on built-in defaults.
    pub source: Option<PathBuf>,
    pub cgroup: Option<ChildCgroup>,
    /// The gateway's state in the store, for the servers a reload starts.
    pub stored: Stored,
    /// The configuration in force as the dashboard shows it, replaced with `config`.
    pub running_config: crate::dashboard::RunningConfig,
}

/// A signal `serve` acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Stop(&'static str),
    Reload,
}

/// SIGTERM, SIGINT and SIGHUP, installed before the URL is printed so that none of them takes
/// its default action (SIGHUP's would end the process) once a client can know the address.
pub struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn install() -> Result<Signals, CliError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let install = |kind: SignalKind, name: &str| {
                signal(kind).map_err(|e| {
                    CliError::usage(format!("could not install the {name} handler: {e}"))
                })
            };
            Ok(Signals {
                term: install(SignalKind::terminate(), "SIGTERM")?,
                int: install(SignalKind::interrupt(), "SIGINT")?,
                hup: install(SignalKind::hangup(), "SIGHUP")?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    /// The next signal.
    pub async fn next(&mut self) -> Received {
        #[cfg(unix)]
        {
            tokio::select! {
                Some(()) = self.term.recv() => Received::Stop("SIGTERM"),
                Some(()) = self.int.recv() => Received::Stop("SIGINT"),
                Some(()) = self.hup.recv() => Received::Reload,
                // Signal delivery ended (the runtime is going down): nothing more will come.
                else => futures::future::pending().await,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Received::Stop("Ctrl-C")
        }
    }

    /// The next SIGTERM or SIGINT (SIGHUP is ignored meanwhile).
    pub async fn next_stop(&mut self) -> &'static str {
        loop {
            if let Received::Stop(name) = self.next().await {
                return name;
            }
        }
    }
}

/// What woke the main loop.
enum Event {
    Stop(&'static str),
    Reload(&'static str),
}

/// Serves until a stop signal, reloading on the way, then shuts down gracefully.
pub async fn run(mut running: Running, mut signals: Signals) -> Result<Outcome, CliError> {
    let mut watch = match &running.source {
        Some(path) => Some(ConfigWatch::new(path.clone(), POLL).await),
        None => None,
    };
    let stop = loop {
        let file_changed = async {
            match watch.as_mut() {
                Some(w) => w.changed().await,
                None => futures::future::pending().await,
            }
        };
        let event = tokio::select! {
            received = signals.next() => match received {
                Received::Stop(name) => Event::Stop(name),
                Received::Reload => Event::Reload("SIGHUP"),
            },
            () = file_changed => Event::Reload("the configuration file changed"),
        };
        match event {
            Event::Stop(name) => break name,
            Event::Reload(why) => {
                // A stop signal during a reload (which may wait for new servers to start) is
                // not kept waiting.
                tokio::select! {
                    () = reload(&mut running, why) => {}
                    name = signals.next_stop() => break name,
                }
                if let Some(w) = watch.as_mut() {
                    w.mark_loaded().await;
                }
            }
        }
    };
    shut_down(running, signals, stop).await
}

/// Loads the file again and applies it, or refuses it with `manifold check`'s messages.
async fn reload(running: &mut Running, why: &str) {
    let Some(path) = running.source.clone() else {
        tracing::warn!(
            "{why}, but Manifold runs on built-in defaults: there is no configuration file to reload"
        );
        return;
    };
    let next = match Config::load(&path) {
        Ok(c) => c,
        Err(errors) => {
            tracing::error!(
                "{why}: {} is not valid:\n{errors}\nThe running configuration stays in force.",
                path.display()
            );
            return;
        }
    };
    let fixed = needs_restart(&running.started, &next);
    if !fixed.is_empty() {
        tracing::warn!(
            "{} changed; these settings apply only when Manifold restarts (a reload applies [servers.*], [tools.*], [[rules]], [rate_limits] and gateway.drain_timeout), the running values stay",
            fixed.join(", ")
        );
    }
    let drain = next.lifecycle.drain_timeout;
    let rules_changed = access_changed(&running.config, &next);
    let access = AccessChange {
        // Unchanged rules are left alone: replacing them would refill every rate-limit bucket.
        rules: rules_changed.then(|| access_settings(&next)),
        pin_policies: Some(pin_policies(&next)),
    };
    match running
        .gateway
        .reconfigure_with(upstream_definitions(&next, &running.stored), access, drain)
        .await
    {
        Ok(summary) => {
            let rules = if rules_changed {
                "; [[rules]], [toolsets] and [rate_limits]: replaced"
            } else {
                ""
            };
            match crate::gateway_config::configured_tools(&next) {
                Ok(tools) => running.stored.authored.configure(tools),
                Err(e) => tracing::error!(
                    "{why}: {e}; the [tools.*] in force stay until the file is fixed"
                ),
            }
            tracing::info!("reloaded {} ({why}): {summary}{rules}", path.display());
            running.running_config.replace(next.clone());
            running.config = next;
        }
        Err(e) => tracing::error!("{why}: {}: {e}", path.display()),
    }
}

/// Whether a reload brings other rules or rate limits than those in force.
fn access_changed(running: &Config, next: &Config) -> bool {
    running.rules != next.rules
        || running.rate_limits != next.rate_limits
        || running.toolsets != next.toolsets
}

/// The settings that differ and are not applied by a reload: everything but `[servers.*]`,
/// `[[rules]]`, `[rate_limits]` and `gateway.drain_timeout`.
fn needs_restart(started: &Config, next: &Config) -> Vec<&'static str> {
    let (a, b) = (&started.gateway, &next.gateway);
    let mut keys = Vec::new();
    let mut differs = |key: &'static str, changed: bool| {
        if changed {
            keys.push(key);
        }
    };
    differs("gateway.listen", a.listen != b.listen);
    differs("gateway.naming", a.naming != b.naming);
    differs("gateway.name_max_len", a.name_max_len != b.name_max_len);
    differs("gateway.strict_names", a.strict_names != b.strict_names);
    differs(
        "gateway.allowed_origins",
        a.allowed_origins != b.allowed_origins,
    );
    differs("gateway.allowed_hosts", a.allowed_hosts != b.allowed_hosts);
    differs("gateway.discovery", a.discovery != b.discovery);
    differs("gateway.session_key", a.session_key != b.session_key);
    differs("gateway.data_dir", a.data_dir != b.data_dir);
    differs(
        "gateway.session_idle_ttl",
        started.lifecycle.session_idle_ttl != next.lifecycle.session_idle_ttl,
    );
    differs("[auth]", started.auth != next.auth);
    differs("[telemetry]", started.telemetry != next.telemetry);
    differs("[audit]", started.audit != next.audit);
    differs("[store]", started.store != next.store);
    // The endpoints these switch on or off are routed when the listener starts.
    differs("[rest]", started.rest != next.rest);
    differs("[metaforge]", started.metaforge != next.metaforge);
    differs("[dashboard]", started.dashboard != next.dashboard);
    keys
}

/// The graceful shutdown, cut short by a second stop signal.
async fn shut_down(
    running: Running,
    mut signals: Signals,
    signal: &'static str,
) -> Result<Outcome, CliError> {
    let Running {
        gateway,
        server,
        config,
        cgroup,
        ..
    } = running;
    let deadline = config.lifecycle.drain_timeout;
    eprintln!(
        "Manifold is shutting down ({signal}): {} call(s) in flight get up to {}s to finish, new requests are refused; send {signal} again to exit at once",
        gateway.calls_in_flight(),
        deadline.as_secs_f64()
    );
    let graceful = async {
        let report = server.drain(deadline).await;
        if tokio::time::timeout(SERVER_CLOSE_GUARD, server.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                "HTTP connections were still open {}s after the drain; closing anyway",
                SERVER_CLOSE_GUARD.as_secs()
            );
        }
        gateway.shutdown().await;
        report
    };
    tokio::select! {
        report = graceful => {
            if let Some(cgroup) = cgroup {
                match cgroup.release() {
                    Ok(released) if !released.leftovers.is_empty() => tracing::warn!(
                        pids = ?released.leftovers,
                        "processes outlived their process group's kill (they left their group or session); killed them through the cgroup"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "could not release the children's cgroup"),
                }
            }
            eprintln!(
                "Manifold stopped: {} call(s) were in flight, {} cancelled at the drain deadline; every child process was stopped",
                report.in_flight_at_start, report.cut_off
            );
            Ok(Outcome::Success)
        }
        again = signals.next_stop() => {
            // Dropping the cgroup kills everything in it; the runtime's end kills the rest
            // (each stdio child's process group).
            drop(cgroup);
            Err(CliError::usage(format!(
                "{again} during the graceful shutdown: exiting at once; calls still running were cut off and child processes killed"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(gateway: &str) -> Config {
        Config::from_str(
            &format!("[gateway]\ndata_dir = \"/tmp/m\"\n{gateway}"),
            "m.toml",
        )
        .unwrap()
    }

    #[test]
    fn gateway_settings_other_than_the_drain_time_wait_for_a_restart() {
        let started = config("");
        assert!(needs_restart(&started, &config("drain_timeout = \"3s\"\n")).is_empty());
        assert_eq!(
            needs_restart(
                &started,
                &config("listen = \"127.0.0.1:1\"\nsession_idle_ttl = \"1m\"\n")
            ),
            ["gateway.listen", "gateway.session_idle_ttl"]
        );
        assert_eq!(
            needs_restart(
                &started,
                &config("\n[rest]\nenabled = true\n\n[metaforge]\nenabled = true\n")
            ),
            ["[rest]", "[metaforge]"]
        );
    }

    #[test]
    fn rules_and_rate_limits_are_applied_by_a_reload_not_left_for_a_restart() {
        let started = config("");
        let guarded = config(
            "\n[[rules]]\neffect = \"deny\"\nanonymous = true\ntools = [\"a__*\"]\n\n[rate_limits]\nper_identity = \"5/minute\"\n",
        );
        assert!(needs_restart(&started, &guarded).is_empty());
        assert!(access_changed(&started, &guarded));
        assert!(!access_changed(&guarded, &guarded));
        assert!(!access_changed(
            &started,
            &config("drain_timeout = \"3s\"\n")
        ));
    }
}
