-- Why: behind a load balancer without affinity, a legacy session's requests reach any replica,
-- and what the session asked for must follow it: the resources it subscribed to, the log level it
-- chose, and whether it ended (a DELETE on one replica must end it on all). Each change is one
-- row operation (a subscription is its own row), so two replicas changing one session at once
-- lose neither change. The session id is never stored, only its SHA-256. Rows of sessions unchanged
-- for longer than a session may live are pruned.
CREATE TABLE legacy_sessions (
    id_sha256 TEXT PRIMARY KEY,
    log_level TEXT,
    ended BOOLEAN NOT NULL DEFAULT FALSE,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX legacy_sessions_updated ON legacy_sessions (updated_ms);
CREATE TABLE legacy_session_subscriptions (
    id_sha256 TEXT NOT NULL,
    uri TEXT NOT NULL,
    PRIMARY KEY (id_sha256, uri)
);
