-- Why: replicas behind a load balancer must share one rate limit per identity (and per identity
-- and tool), or N replicas admit N times the limit. Each replica keeps its own token buckets in
-- memory and, a few times a second, adds what it spent to the row of each bucket and adopts the
-- row's state; so the database is never on a call's path. A bucket is one number, as in memory:
-- the theoretical arrival time of its next request (the generic cell rate algorithm), here in
-- microseconds of the database's clock, so replicas' clocks need not agree. `spent_us` is the
-- last spend added, which the upsert needs beside the new arrival time; it means nothing later.
-- A row whose arrival time has passed is a full bucket, the same as no row, and is pruned.
CREATE TABLE rate_limit_buckets (
    key TEXT PRIMARY KEY,
    tat_us BIGINT NOT NULL,
    spent_us BIGINT NOT NULL
);
