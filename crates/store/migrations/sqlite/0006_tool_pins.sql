-- Why: pinned tool definitions and their recorded changes move from pins.json (a file under a lock,
-- read-modify-written by every gateway and by `manifold pins approve`) into the store: one row per
-- server and tool with the pinned digest, its per-member digests, the definition as the server sent
-- it, when it was pinned and approved, and the change waiting for approval, if any. pin_revision
-- counts every write, so gateways notice another process's approval by polling one row.
CREATE TABLE tool_pins (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    parts_json TEXT NOT NULL,
    definition_json TEXT,
    pinned_at_ms INTEGER NOT NULL,
    approved_at_ms INTEGER,
    changed_pinned_sha256 TEXT,
    changed_seen_sha256 TEXT,
    changed_parts_json TEXT,
    changed_fields_json TEXT,
    changed_definition_json TEXT,
    changed_seen_at_ms INTEGER,
    PRIMARY KEY (server, tool)
);

CREATE TABLE pin_revision (
    id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    revision INTEGER NOT NULL
);
INSERT INTO pin_revision (id, revision) VALUES (1, 0);
