-- Why: approvals (a person asked before a risky call) must outlive the gateway that asked and be
-- answerable from another process (`manifold approvals approve`) or another replica: one row per
-- question with what it was bound to (the arguments' and definition's digests), who may answer,
-- how and when it ended. Every change of state is an UPDATE conditional on the state the writer
-- saw. The index serves the pending listing, newest first.
CREATE TABLE approvals (
    id TEXT PRIMARY KEY NOT NULL,
    state TEXT NOT NULL,
    caller TEXT,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments_sha256 TEXT NOT NULL,
    definition_sha256 TEXT NOT NULL,
    arguments_json TEXT,
    approvers_json TEXT NOT NULL,
    channel TEXT NOT NULL,
    rule TEXT NOT NULL,
    holder TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    answered_by TEXT,
    answered_at_ms INTEGER,
    note TEXT
);

CREATE INDEX approvals_state_created ON approvals (state, created_at_ms);
