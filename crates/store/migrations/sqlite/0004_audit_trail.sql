-- Why: the audit trail in its real shape. record_json is the canonical JSON object the gateway
-- hands in for a row (every field of it; what the hash covers); the columns beside it repeat the
-- fields searched on, and verify checks that they agree with it. The store chains the rows:
-- row_sha256 = SHA-256(prev_sha256 || '\n' || record_json), prev_sha256 being the row before's
-- row_sha256, 64 zeros for the first row ever, or the anchor of the last prune.
-- audit_events (steps 2 and 3) was never written by a released gateway; it stays, and Store::open
-- moves any rows it holds onto the end of this chain (computing SHA-256 needs Rust: SQLite's SQL
-- has none), keeping every old column in record_json.
CREATE TABLE audit_trail (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    server TEXT NOT NULL,
    target TEXT NOT NULL,
    outcome TEXT NOT NULL,
    record_json TEXT NOT NULL,
    prev_sha256 TEXT NOT NULL,
    row_sha256 TEXT NOT NULL
);
-- Searches are newest first, so each filter column is indexed with seq.
CREATE INDEX audit_trail_principal ON audit_trail (principal, seq);
CREATE INDEX audit_trail_server ON audit_trail (server, seq);
CREATE INDEX audit_trail_target ON audit_trail (target, seq);
CREATE INDEX audit_trail_outcome ON audit_trail (outcome, seq);
CREATE INDEX audit_trail_at_ms ON audit_trail (at_ms);

-- One row per prune: the trail's rows up to through_seq were removed, and anchor_sha256 (the
-- row_sha256 of the last of them) is what the first remaining row chains on.
CREATE TABLE audit_prunes (
    through_seq INTEGER PRIMARY KEY NOT NULL,
    pruned_at_ms INTEGER NOT NULL,
    pruned_rows INTEGER NOT NULL,
    anchor_sha256 TEXT NOT NULL
);
