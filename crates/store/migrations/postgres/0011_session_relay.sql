-- Why: behind a load balancer without affinity, a legacy client's answer to a server's question
-- (elicitation, sampling, roots), or its cancellation of a call, may reach a replica other than the
-- one holding the call. That replica puts the message here for the holder (`to_replica`, or '*'
-- for every replica when the holder is unknown, as for a cancellation) and wakes it with
-- NOTIFY manifold_session_relay; each replica reads the rows after the last one it saw. Rows are
-- pruned a minute after they were written: a question waits far less than that.
CREATE TABLE session_relay (
    seq BIGSERIAL PRIMARY KEY,
    to_replica TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX session_relay_at ON session_relay (at_ms);
