-- Why: the audit trail, one row per tool call; prev_sha256/row_sha256 carry the hash chain that
-- `manifold audit verify` checks.
CREATE TABLE audit_events (
    seq BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    call_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL,
    args_sha256 TEXT NOT NULL,
    detail_json TEXT NOT NULL,
    prev_sha256 TEXT NOT NULL,
    row_sha256 TEXT NOT NULL
);
CREATE INDEX audit_events_call_id ON audit_events (call_id);
