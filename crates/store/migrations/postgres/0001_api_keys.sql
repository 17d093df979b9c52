-- Why: the first tables of Manifold's store: what the store itself is, and API keys (hashed; the
-- raw key never reaches the store).
CREATE TABLE schema_meta (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
INSERT INTO schema_meta (key, value) VALUES ('written_by', 'manifold');

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    principal TEXT NOT NULL,
    key_sha256 TEXT NOT NULL UNIQUE,
    created_at_ms BIGINT NOT NULL,
    revoked_at_ms BIGINT
);
