//! The dashboard's sign-ins, kept in Manifold's store so that every replica behind a load
//! balancer honours them: a session opened on one replica works on the next, the line an action
//! leaves shows on the next page wherever it is served, and a sign-out or a revoked key ends the
//! session everywhere. The cookie holds a random id; the store keeps only its SHA-256.

use manifold_store::timestamps::now_ms;
use std::sync::Arc;
use std::time::Duration;

use manifold_store::{DashboardSessionRecord, Store};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A session unused this long ends.
pub const SESSION_IDLE: Duration = Duration::from_secs(8 * 3600);
/// Sessions kept at once; the longest unused goes first when a new one would pass it.
pub const MAX_SESSIONS: usize = 1024;
/// How stale a session's "last seen" may get before a request writes it again: a page's every
/// request need not be a write.
pub const TOUCH_EVERY: Duration = Duration::from_secs(60);
/// Random bytes in a session id and in a CSRF token.
const TOKEN_BYTES: usize = 32;

/// The person at the dashboard.
#[derive(Debug, Serialize, Deserialize)]
pub struct Operator {
    pub name: String,
    pub groups: Vec<String>,
    pub scopes: Vec<String>,
    /// The API key that signed in, checked at every request.
    pub key_id: Option<String>,
    pub csrf: String,
    /// The cookie's value (never stored).
    #[serde(skip)]
    pub session: String,
    /// Signed in by being on this machine (authentication off).
    pub local: bool,
    /// The line the last action left, for the page this request shows.
    #[serde(skip)]
    pub flash: Option<Flash>,
}

/// A line shown once on the next page: what an action did, or why it did nothing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum Flash {
    Done(String),
    Failed(String),
}

/// A fresh random token in hex; `None` only when the OS has no random source.
pub fn random_token() -> Option<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn digest(session: &str) -> String {
    manifold_telemetry::trace_context::hex(&Sha256::digest(session.as_bytes()))
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The open sessions, in the store.
pub struct SignIns {
    store: Arc<Store>,
}

impl SignIns {
    pub fn new(store: Arc<Store>) -> SignIns {
        SignIns { store }
    }

    /// Opens a session for the operator `make(session, csrf)` describes, ending after `lasts`
    /// whatever its use when given. `Err` says why none could be made.
    pub async fn open(
        &self,
        make: impl FnOnce(String, String) -> Operator,
        lasts: Option<Duration>,
    ) -> Result<Operator, String> {
        let (Some(session), Some(csrf)) = (random_token(), random_token()) else {
            return Err("the system's random source failed, so no session could be made; check the gateway's host".to_owned());
        };
        let operator = make(session.clone(), csrf);
        let operator_json = serde_json::to_string(&operator).map_err(|e| e.to_string())?;
        let now = now_ms();
        let record = DashboardSessionRecord {
            id_sha256: digest(&session),
            operator_json,
            key_id: operator.key_id.clone(),
            last_seen_ms: now,
            ends_ms: lasts.map(|l| now.saturating_add(ms(l))),
        };
        self.store
            .dashboard_sessions()
            .open(&record, now.saturating_sub(ms(SESSION_IDLE)), MAX_SESSIONS)
            .await
            .map_err(|e| format!("the session could not be kept in the store: {e}"))?;
        Ok(operator)
    }

    /// The operator of the session `session`, unless it ended (idle, past its end, signed out,
    /// or never made); the line its last action left is taken when `take_flash`.
    pub async fn find(&self, session: &str, take_flash: bool) -> Option<Operator> {
        let sessions = self.store.dashboard_sessions();
        let id = digest(session);
        let record = match sessions.get(&id).await {
            Ok(found) => found?,
            Err(e) => {
                tracing::error!(error = %e, "the dashboard cannot read its sessions; signing in waits for the store");
                return None;
            }
        };
        let now = now_ms();
        let idle = now.saturating_sub(record.last_seen_ms) >= ms(SESSION_IDLE);
        if idle || record.ends_ms.is_some_and(|e| now >= e) {
            let _ = sessions.close(&id).await;
            return None;
        }
        if now.saturating_sub(record.last_seen_ms) >= ms(TOUCH_EVERY) {
            let _ = sessions.touch(&id, now).await;
        }
        let mut operator: Operator = serde_json::from_str(&record.operator_json).ok()?;
        operator.session = session.to_owned();
        if take_flash && let Ok(Some(text)) = sessions.take_flash(&id).await {
            operator.flash = serde_json::from_str(&text).ok();
        }
        Some(operator)
    }

    /// Signs the session out, on every replica.
    pub async fn close(&self, session: &str) {
        if let Err(e) = self
            .store
            .dashboard_sessions()
            .close(&digest(session))
            .await
        {
            tracing::error!(error = %e, "a dashboard session could not be ended in the store");
        }
    }

    /// Ends every session the keys `key_ids` opened (they were just revoked).
    pub async fn close_for_keys(&self, key_ids: &[String]) {
        for key in key_ids {
            if let Err(e) = self.store.dashboard_sessions().close_for_key(key).await {
                tracing::error!(error = %e, "the dashboard sessions of a revoked key could not be ended in the store; they end at their next request");
            }
        }
    }

    /// Leaves `flash` for the session's next page.
    pub async fn set_flash(&self, session: &str, flash: &Flash) {
        let Ok(text) = serde_json::to_string(flash) else {
            return;
        };
        if let Err(e) = self
            .store
            .dashboard_sessions()
            .set_flash(&digest(session), Some(&text))
            .await
        {
            tracing::warn!(error = %e, "the result of a dashboard action could not be kept for the next page");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    async fn signins() -> (SignIns, manifold_testkit::ScratchDir) {
        let dir = manifold_testkit::ScratchDir::new("dashboard-sessions").unwrap();
        let location = manifold_store::StoreLocation::sqlite(dir.path());
        let store = Arc::new(Store::open(&location).await.unwrap());
        (SignIns::new(store), dir)
    }

    fn operator(key: Option<&str>) -> impl FnOnce(String, String) -> Operator {
        let key_id = key.map(str::to_owned);
        move |session, csrf| Operator {
            name: "ops".into(),
            groups: vec!["team".into()],
            scopes: vec!["admin".into()],
            key_id,
            csrf,
            session,
            local: false,
            flash: None,
        }
    }

    #[tokio::test]
    async fn a_session_is_found_by_its_cookie_and_ends_by_revocation_sign_out_or_its_end() {
        let (signins, _dir) = signins().await;
        let op = signins.open(operator(Some("k1")), None).await.unwrap();
        let found = signins.find(&op.session, false).await.unwrap();
        assert_eq!(
            (found.name.as_str(), &found.csrf, &found.groups),
            ("ops", &op.csrf, &op.groups)
        );
        assert!(signins.find("not-a-session", false).await.is_none());
        signins.close_for_keys(&["k1".to_owned()]).await;
        assert!(signins.find(&op.session, false).await.is_none());
        let other = signins.open(operator(None), None).await.unwrap();
        signins.close(&other.session).await;
        assert!(signins.find(&other.session, false).await.is_none());
        let ended = signins
            .open(operator(None), Some(Duration::ZERO))
            .await
            .unwrap();
        assert!(signins.find(&ended.session, false).await.is_none());
    }

    #[tokio::test]
    async fn a_flash_shows_on_one_page_only() {
        let (signins, _dir) = signins().await;
        let op = signins.open(operator(None), None).await.unwrap();
        signins
            .set_flash(&op.session, &Flash::Done("revoked".into()))
            .await;
        // A request that shows no page leaves it for the next that does.
        assert_eq!(signins.find(&op.session, false).await.unwrap().flash, None);
        let page = signins.find(&op.session, true).await.unwrap();
        assert_eq!(page.flash, Some(Flash::Done("revoked".into())));
        assert_eq!(signins.find(&op.session, true).await.unwrap().flash, None);
    }

    #[tokio::test]
    async fn the_session_table_is_bounded() {
        let (signins, _dir) = signins().await;
        let mut opened = Vec::new();
        for _ in 0..MAX_SESSIONS + 5 {
            opened.push(signins.open(operator(None), None).await.unwrap());
        }
        let mut live = 0;
        for op in &opened {
            if signins.find(&op.session, false).await.is_some() {
                live += 1;
            }
        }
        assert_eq!(live, MAX_SESSIONS);
        assert!(
            signins
                .find(&opened[MAX_SESSIONS + 4].session, false)
                .await
                .is_some()
        );
    }
}
