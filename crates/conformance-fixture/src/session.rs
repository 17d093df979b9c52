//! Legacy era: what one connection (a stdio process or one Streamable HTTP session) remembers
//! after `initialize`.
//!
//! The modern era keeps nothing between requests; the legacy era negotiates a revision and client
//! capabilities once, sets a log level with `logging/setLevel`, subscribes to resources, and can be
//! asked to cancel a request by id. All of that lives here, shared by the stdio and HTTP transports.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use manifold_wire::{Id, Revision};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::client_requests::ClientRequests;
use crate::error::RpcError;
use crate::log_level::{LogLevel, LogPolicy};

/// The most resources one connection may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 256;

/// The most client requests one connection may have in flight.
pub const MAX_IN_FLIGHT: usize = 256;

/// One legacy connection's negotiated state.
#[derive(Debug)]
pub struct LegacyState {
    pub revision: Revision,
    pub client_capabilities: Value,
    pub client_requests: Arc<ClientRequests>,
    log_level: Mutex<Option<LogLevel>>,
    subscriptions: Mutex<HashSet<String>>,
    in_flight: Mutex<HashMap<Id, CancellationToken>>,
    initialized: AtomicBool,
}

impl LegacyState {
    pub fn new(revision: Revision, client_capabilities: Value) -> LegacyState {
        LegacyState {
            revision,
            client_capabilities,
            client_requests: Arc::new(ClientRequests::default()),
            log_level: Mutex::new(None),
            subscriptions: Mutex::new(HashSet::new()),
            in_flight: Mutex::new(HashMap::new()),
            initialized: AtomicBool::new(false),
        }
    }

    /// Log messages the connection receives: everything until `logging/setLevel` says otherwise.
    pub fn log_policy(&self) -> LogPolicy {
        let level = *self.log_level.lock().unwrap_or_else(|p| p.into_inner());
        LogPolicy::AtLeast(level.unwrap_or(LogLevel::Debug))
    }

    pub fn set_log_level(&self, level: LogLevel) {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = Some(level);
    }

    pub fn subscribe(&self, uri: &str) -> Result<(), RpcError> {
        let mut subs = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        if subs.len() >= MAX_SUBSCRIPTIONS && !subs.contains(uri) {
            return Err(RpcError::invalid_params(format!(
                "this session already watches {MAX_SUBSCRIPTIONS} resources; unsubscribe from some first"
            )));
        }
        subs.insert(uri.to_owned());
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.subscriptions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uri);
    }

    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(uri)
    }

    /// Registers a request so `notifications/cancelled` can reach it.
    pub fn begin(&self, id: &Id) -> Result<CancellationToken, RpcError> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if in_flight.len() >= MAX_IN_FLIGHT {
            return Err(RpcError::new(
                manifold_wire::ErrorCode::Overloaded,
                format!("{MAX_IN_FLIGHT} requests are already in flight on this connection"),
            ));
        }
        let token = CancellationToken::new();
        in_flight.insert(id.clone(), token.clone());
        Ok(token)
    }

    pub fn end(&self, id: &Id) {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// Cancels the request `id` if it is still running.
    pub fn cancel(&self, id: &Id) {
        if let Some(token) = self
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            token.cancel();
        }
    }

    /// Cancels everything (the connection ends).
    pub fn cancel_all(&self) {
        for (_, token) in self
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
        {
            token.cancel();
        }
    }

    pub fn mark_initialized(&self) {
        self.initialized.store(true, Ordering::SeqCst);
    }

    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::SeqCst)
    }
}
