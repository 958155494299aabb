-- An idle heartbeat (nodes.services.liveness._beat), the hub's most frequent write: the node's
-- liveness deadlines and its monitoring figures, guarded by the state the hub read at
-- authentication (compare-and-set: a node the reaper or an admin moved meanwhile is left alone,
-- and the caller reads it again). Writes no event: a beat that moves the state takes the
-- transition's path instead.
-- With %(lazy)s (a beat that is its own transaction) it commits without waiting for the WAL's
-- flush (core's commit_lazily). A beat is liveness, not a record: a crash of the database can
-- lose the last fraction of a second of them, which the next beat restores, while waiting for
-- the flush made every beat's latency hostage to the disk (the p99 of a 10,000-node idle fleet:
-- 434 ms with the wait, 18 ms without; bench.fleet).
-- Locks: the node's row.
UPDATE nodes_node
   SET last_heartbeat_at = %(now)s, degraded_after = %(degraded_after)s,
       offline_after = %(offline_after)s, load = %(load)s, gpu_state = %(gpus)s,
       throttled = %(throttled)s
  FROM commit_lazily(%(lazy)s) AS lazy
 WHERE id = %(node)s AND state = %(state)s
