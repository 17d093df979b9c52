//! Who can reach `manifold serve`, decided before anything binds: without authentication it
//! listens on loopback only, unless the operator explicitly says something in front of it
//! authenticates (`--insecure-no-auth` / `[auth] insecure_no_auth`), which is then logged as a
//! warning at every start. With authentication configured it may listen anywhere.

use std::net::SocketAddr;
use std::sync::Arc;

use manifold_auth::Authenticator;
use manifold_config::Config;

use crate::report::CliError;

/// What `serve` may do at an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// Authentication is on: any address.
    Authenticated,
    /// No authentication, loopback only.
    ThisMachineOnly,
    /// No authentication, on purpose; the warning to log at start.
    Unauthenticated { warning: String },
}

fn is_loopback(listen: SocketAddr) -> bool {
    listen.ip().to_canonical().is_loopback()
}

/// The rule itself, on plain values.
pub fn decide(
    listen: SocketAddr,
    authenticated: bool,
    insecure_no_auth: bool,
) -> Result<Exposure, CliError> {
    if authenticated {
        if insecure_no_auth {
            return Err(CliError::with_hint(
                "--insecure-no-auth asks for no authentication, but the configuration's [auth] section turns it on",
                "remove --insecure-no-auth (or insecure_no_auth), or the [auth] settings",
            ));
        }
        return Ok(Exposure::Authenticated);
    }
    if insecure_no_auth {
        let reach = if is_loopback(listen) {
            "this machine only"
        } else {
            "other machines too"
        };
        return Ok(Exposure::Unauthenticated {
            warning: format!(
                "authentication is OFF (insecure_no_auth): anyone who can reach {listen} ({reach}) can use every configured server; only run this way behind a proxy that authenticates"
            ),
        });
    }
    if is_loopback(listen) {
        return Ok(Exposure::ThisMachineOnly);
    }
    Err(CliError::with_hint(
        format!(
            "refusing to listen on {listen} without authentication: that address is reachable from other machines"
        ),
        "turn authentication on ([auth] api_keys = true and `manifold keys create NAME`, or an [auth.oauth] issuer), listen on 127.0.0.1, or pass --insecure-no-auth if a proxy in front of Manifold authenticates",
    ))
}

/// The URL of `/mcp` at `listen`, when that is a concrete address clients can use.
fn listen_url(listen: SocketAddr) -> Option<String> {
    (listen.port() != 0 && !listen.ip().is_unspecified()).then(|| format!("http://{listen}/mcp"))
}

/// The authenticator the configuration asks for, after checking the listen rule; logs what is
/// accepted, or the warning when authentication is off on purpose. API keys are read from `store`.
pub fn authenticator_for(
    config: &Config,
    listen: SocketAddr,
    insecure_flag: bool,
    store: &Arc<manifold_store::Store>,
) -> Result<Option<Arc<Authenticator>>, CliError> {
    let insecure = insecure_flag || config.auth.insecure_no_auth;
    let authenticator = Authenticator::from_config(
        &config.auth,
        || crate::key_store::api_keys(store),
        listen_url(listen).as_deref(),
    )
    .map_err(|e| CliError::usage(format!("cannot set up authentication: {e}")))?;
    match decide(listen, authenticator.is_some(), insecure)? {
        Exposure::Authenticated => {
            if let Some(a) = &authenticator {
                tracing::info!("clients must authenticate: {}", a.describe());
            }
        }
        Exposure::ThisMachineOnly => {
            tracing::debug!("authentication is off; Manifold listens on this machine only");
        }
        Exposure::Unauthenticated { warning } => tracing::warn!("{warning}"),
    }
    Ok(authenticator.map(Arc::new))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn without_authentication_only_loopback_is_allowed() {
        assert_eq!(
            decide(addr("127.0.0.1:7391"), false, false).unwrap(),
            Exposure::ThisMachineOnly
        );
        assert_eq!(
            decide(addr("[::1]:7391"), false, false).unwrap(),
            Exposure::ThisMachineOnly
        );
        assert_eq!(
            decide(addr("[::ffff:127.0.0.1]:7391"), false, false).unwrap(),
            Exposure::ThisMachineOnly
        );
        let refused = decide(addr("0.0.0.0:7391"), false, false).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("refusing to listen on 0.0.0.0:7391 without authentication"),
            "{refused}"
        );
        assert!(decide(addr("192.0.2.1:7391"), false, false).is_err());
    }

    #[test]
    fn the_explicit_opt_out_allows_any_address_with_a_warning() {
        match decide(addr("0.0.0.0:7391"), false, true).unwrap() {
            Exposure::Unauthenticated { warning } => assert_eq!(
                warning,
                "authentication is OFF (insecure_no_auth): anyone who can reach 0.0.0.0:7391 (other machines too) can use every configured server; only run this way behind a proxy that authenticates"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn with_authentication_any_address_is_allowed_and_the_opt_out_contradicts() {
        assert_eq!(
            decide(addr("0.0.0.0:7391"), true, false).unwrap(),
            Exposure::Authenticated
        );
        assert!(decide(addr("0.0.0.0:7391"), true, true).is_err());
    }

    #[test]
    fn the_default_resource_url_needs_a_concrete_address() {
        assert_eq!(
            listen_url(addr("127.0.0.1:7391")).as_deref(),
            Some("http://127.0.0.1:7391/mcp")
        );
        assert_eq!(listen_url(addr("127.0.0.1:0")), None);
        assert_eq!(listen_url(addr("0.0.0.0:7391")), None);
    }
}
