-- The move both reaper passes make (reap_offline.sql, reap_degraded.sql), after their `due`
-- CTE (id, state, locked): each due node still in a live state moves to %(to)s, its
-- event_version bumped (the version its NodeStateChanged takes, reap_append.sql). The UPDATE
-- finds its rows by primary key (= ANY(ARRAY(...))): a join would scan the whole table once per
-- batch. Returns (id, event_version) of each node moved.
moved AS (
    UPDATE nodes_node SET state = %(to)s, state_changed_at = %(now)s,
           event_version = event_version + 1
     WHERE id = ANY(ARRAY(SELECT id FROM due)) AND state = ANY(%(live)s::varchar[])
    RETURNING id, event_version
),
