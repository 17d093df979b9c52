//! What a connection needs besides its target: the server's name, the era to speak, what the
//! client says of itself, and who answers the server's own requests. Read by `connect()` and by
//! each transport's connect step, below both.

use std::sync::Arc;

use crate::connection::{RefuseServerRequests, ServerRequestHandler};
use crate::negotiate::{ClientIdentity, EraChoice};

/// Everything a connection needs besides the target.
#[derive(Clone)]
pub struct ConnectOptions {
    /// The server's name in logs and errors.
    pub server: String,
    pub era: EraChoice,
    pub client: ClientIdentity,
    pub handler: Arc<dyn ServerRequestHandler>,
}

impl ConnectOptions {
    pub fn new(server: impl Into<String>) -> ConnectOptions {
        ConnectOptions {
            server: server.into(),
            era: EraChoice::Auto,
            client: ClientIdentity::default(),
            handler: Arc::new(RefuseServerRequests),
        }
    }
}
