-- Why: behind a load balancer without affinity, a legacy client's answer to a server's question
-- (elicitation, sampling, roots), or its cancellation of a call, may reach a replica other than the
-- one holding the call. That replica puts the message here for the holder (`to_replica`, or '*'
-- for every replica when the holder is unknown, as for a cancellation); each replica reads the
-- rows after the last one it saw. Several replicas need PostgreSQL; on SQLite the table exists so
-- both backends keep one schema. Rows are pruned a minute after they were written.
CREATE TABLE session_relay (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    to_replica TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX session_relay_at ON session_relay (at_ms);
