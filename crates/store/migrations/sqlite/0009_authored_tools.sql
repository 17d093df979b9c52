-- Why: tools that users author in Manifold (manifold_create_tool) must outlive the gateway, reach
-- every replica, and keep their history for rollback. The table is an append-only log, one row
-- per version of a tool: creation, each update, disable, enable, deletion and rollback all append
-- a row carrying the whole definition, so the newest row of a name is its state and every older
-- one is a version to show or roll back to. (name, version) is the key: two writers racing to
-- append the same version settle with one unique violation.
CREATE TABLE authored_tools (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    action TEXT NOT NULL,
    definition_json TEXT NOT NULL,
    author TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    enabled INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);
