-- The reaper's offline pass (nodes.services.cas.transition_due_logged): live nodes past their
-- offline deadline go offline, at most %(limit)s of them per transaction.
-- Locks: only nodes rows, each one it moves (FOR UPDATE SKIP LOCKED: a row another
-- transaction holds, a heartbeat or a second reaper, is left to it; a row changed since the
-- statement began is read again and must still be due).
-- Fencing: compare-and-set on the state it was picked in; each move bumps event_version, the
-- version its NodeStateChanged event then takes through the ledger's door (reap_move.sql and
-- reap_append.sql, the same statement).
-- Returns the ids of the nodes that moved.
WITH due AS (
    SELECT id, state FROM nodes_node
     WHERE state = ANY(%(live)s::varchar[]) AND offline_after < %(now)s
     LIMIT %(limit)s FOR UPDATE SKIP LOCKED
),
\i reap_move
\i reap_append
