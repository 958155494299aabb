-- commit_lazily(lazy): when `lazy`, the calling transaction commits without waiting for the
-- WAL's flush (`synchronous_commit` off for that transaction only: set_config's third argument);
-- otherwise nothing changes. A statement that may be its own transaction selects it once
-- (`CROSS JOIN commit_lazily(%(lazy)s) AS lazy`), with `lazy` from core.sql.commits_alone():
-- a caller's transaction, whose other writes did not agree to a lazy commit, keeps its own.
-- VOLATILE (the default): evaluated for every statement that selects it, never folded away.
CREATE OR REPLACE FUNCTION commit_lazily(lazy boolean) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN lazy THEN set_config('synchronous_commit', 'off', true) END
$$;
