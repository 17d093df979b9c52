//! Manifold's durable store: one API over SQLite (`store.sqlite` in `data_dir`, the default) and
//! PostgreSQL (`[store] url`, for several replicas), with embedded, checksummed migrations per
//! backend and a typed repository per concern (API keys, audit trail, OAuth tokens, tool pins,
//! approvals, authored tools, shared rate-limit buckets, messages relayed between replicas, legacy sessions' shared state, dashboard sign-ins).

mod api_keys;
mod approvals;
mod audit;
mod authored_tools;
mod change_watch;
mod dashboard_sessions;
mod error;
mod legacy_sessions;
mod location;
mod oauth_tokens;
mod pins;
mod process_lock;
mod rate_limit_buckets;
mod schema;
mod session_relay;
mod store;
pub mod timestamps;

pub use api_keys::{ApiKeyRecord, ApiKeys, MAX_API_KEY_FIELD_LEN, MAX_API_KEY_GRANTS};
pub use approvals::{
    APPROVAL_ABANDONED, APPROVAL_PENDING, ApprovalRecord, Approvals, MAX_APPROVAL_ID_LEN,
    MAX_APPROVAL_NAME_LEN, MAX_APPROVAL_NOTE_LEN, MAX_APPROVAL_PAGE, MAX_APPROVERS,
    MAX_LEDGER_ARGUMENTS_BYTES,
};
pub use audit::{
    AUDIT_CHAIN_LOCK, AUDIT_GENESIS, AUDIT_RECORD_COLUMNS, AuditEntry, AuditFilter, AuditRow,
    AuditTrail, ChainBreak, MAX_AUDIT_BATCH, MAX_AUDIT_PAGE, MAX_AUDIT_RECORD_BYTES, PruneAnchor,
    VerifyReport, audit_row_sha256,
};
pub use authored_tools::{
    AuthoredToolVersion, AuthoredTools, MAX_AUTHORED_DEFINITION_BYTES, MAX_AUTHORED_HISTORY,
    MAX_AUTHORED_NAME_LEN,
};
pub use change_watch::{ChangeStamp, ChangeWatch};
pub use dashboard_sessions::{
    DashboardSessionRecord, DashboardSessions, MAX_DASHBOARD_SESSION_BYTES,
};
pub use error::StoreError;
pub use legacy_sessions::{
    LegacySessionRecord, LegacySessions, MAX_LEGACY_LOG_LEVEL_LEN, MAX_LEGACY_SUBSCRIPTIONS,
    MAX_LEGACY_URI_BYTES,
};
pub use location::{
    REDACTED_PASSWORD, SQLITE_FILE_NAME, SQLITE_LOCK_FILE_NAME, StoreLocation, redact_url,
};
pub use oauth_tokens::{
    MAX_SEALED_TOKENS_BYTES, MAX_TOKEN_KEY_FILE_BYTES, MAX_TOKEN_SERVER_LEN, OAuthTokens,
    SealedTokens, TOKEN_KEY_FILE, TOKEN_KEY_LEN, TokenKey, token_key_file,
};
pub use pins::{
    MAX_PIN_BATCH, MAX_PIN_DEFINITION_BYTES, MAX_PIN_NAME_LEN, PinChangeRecord, PinRecord,
    PinSnapshot, PinWriteRecord, ToolPins,
};
pub use process_lock::MAX_PID_TEXT;
pub use rate_limit_buckets::{
    BucketSpend, MAX_BUCKET_KEY_LEN, MAX_BUCKETS_PER_ROUND, RateLimitBuckets,
};
pub use schema::{MIGRATIONS_TABLE, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, latest_version};
pub use session_relay::{
    EVERY_REPLICA, MAX_RELAY_ID_LEN, MAX_RELAY_PAGE, MAX_RELAYED_MESSAGE_BYTES, RELAY_CHANNEL,
    RelayListener, RelayedMessage, SessionRelay,
};
pub use store::{
    ACQUIRE_TIMEOUT, POSTGRES_CONNECTIONS, SQLITE_BUSY_TIMEOUT, SQLITE_READERS, Store, migrator_for,
};
