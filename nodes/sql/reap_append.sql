-- The tail of the reaper's two passes (reap_offline.sql, reap_degraded.sql), after their
-- `moved` (id, event_version) and `due` (id, state) CTEs: each moved node's NodeStateChanged
-- goes into the log through the ledger's one door, ledger_append, called by this statement
-- (the ledger's own function: nodes writes no ledger table itself). The event takes the version
-- the move bumped event_version to (expected = that version - 1), its payload the one given for
-- the state the node left (%(payloads)s, aligned with %(live)s, validated by the ledger's
-- event_prepared). A version already taken fails the whole statement: nothing moves.
-- Returns the ids of the nodes that moved.
moved_from AS MATERIALIZED (
    SELECT moved.id, moved.event_version, due.state
      FROM moved JOIN due ON due.id = moved.id
), batch AS (
    -- The aggregates of one aggregation read the same rows in the same order, so the arrays
    -- line up element by element (an ORDER BY in each would sort the batch once per array;
    -- the events of different streams need no order among them).
    SELECT array_agg('node:' || f.id) AS streams,
           array_agg((%(payloads)s::jsonb[])[array_position(%(live)s::varchar[], f.state)])
             AS payloads,
           array_agg(f.event_version - 1) AS expected,
           count(*)::int AS n
      FROM moved_from f
), appended AS (
    SELECT count(*) AS n
      FROM batch,
           LATERAL ledger_append(batch.streams, array_fill(%(type)s::text, ARRAY[batch.n]),
                                 array_fill(%(schema_version)s::int, ARRAY[batch.n]),
                                 batch.payloads, array_fill(%(actor)s::text, ARRAY[batch.n]),
                                 batch.expected, array_fill(NULL::text, ARRAY[batch.n]),
                                 %(now)s)
)
SELECT f.id FROM moved_from f, appended
