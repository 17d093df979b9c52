//! What every page reads: the running gateway, the store, the API keys, who may sign in, the
//! configuration file and the configuration in force (replaced by every reload).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use manifold_auth::{ApiKeys, Authenticator};
use manifold_config::Config;
use manifold_gateway::Gateway;
use manifold_store::Store;

use super::operator_sessions::SignIns;

/// The configuration in force, shared with `serve`'s reload, which replaces it.
#[derive(Clone)]
pub struct RunningConfig(Arc<RwLock<Arc<Config>>>);

impl RunningConfig {
    pub fn new(config: Config) -> RunningConfig {
        RunningConfig(Arc::new(RwLock::new(Arc::new(config))))
    }

    pub fn get(&self) -> Arc<Config> {
        self.0
            .read()
            .map(|c| Arc::clone(&c))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    pub fn replace(&self, config: Config) {
        let mut slot = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Arc::new(config);
    }
}

/// Everything the pages share.
pub struct DashboardState {
    pub gateway: Gateway,
    pub store: Arc<Store>,
    pub keys: ApiKeys,
    /// How sign-in is checked; `None`: authentication is off and the listener is loopback, so
    /// whoever reaches the pages is on this machine and is let in without a key.
    pub auth: Option<Arc<Authenticator>>,
    /// The file reloads read (`None`: serve runs on built-in defaults).
    pub config_path: Option<PathBuf>,
    pub running: RunningConfig,
    pub authored: Arc<manifold_authored::AuthoredTools>,
    pub signins: SignIns,
    /// Cookies carry `Secure` off loopback (where the pages are reached over TLS in front).
    pub secure_cookies: bool,
}
