-- Why: every audit row is written on the request path, and each secondary index is one more
-- B-tree insert per row. Searches by server, target or outcome are rare and run newest first
-- (ORDER BY seq DESC LIMIT n), which walks the primary key and stops at the limit; the caller
-- (who did what) and time bounds (retention, --since/--until) keep their indexes.
DROP INDEX audit_trail_server;
DROP INDEX audit_trail_target;
DROP INDEX audit_trail_outcome;
