-- Why: behind a load balancer without affinity, each of a browser's requests to the dashboard may
-- reach another replica; a sign-in kept in one replica's memory would send the operator back to
-- the sign-in page every other click, and a sign-out would end the session on one replica only.
-- Sessions live here instead. The cookie's value is never stored, only its SHA-256, so a copy
-- of the database opens no session. `key_id` is the API key that signed in (revoking the key ends
-- its sessions); `flash` is the one-line result an action shows on the next page.
CREATE TABLE dashboard_sessions (
    id_sha256 TEXT PRIMARY KEY,
    operator_json TEXT NOT NULL,
    key_id TEXT,
    last_seen_ms BIGINT NOT NULL,
    ends_ms BIGINT,
    flash_json TEXT
);
CREATE INDEX dashboard_sessions_last_seen ON dashboard_sessions (last_seen_ms);
