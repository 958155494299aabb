-- A small node's claim, through the queue's size classes (jobs.claim, jobs.size_class; any other
-- node's is claim_queue.sql). It leases the same task the queue's pick would.
-- Guarantees: first the first 16 tasks of each size class the node fits, in the queue's order,
-- read without locks and merged into that order; then each candidate in turn locked by id if
-- no one else holds it (FOR UPDATE SKIP LOCKED, its live gates checked again on the row as it
-- is now), stopping at the first: nested loops under LIMIT 1 pull one candidate at a time, so
-- only the task taken is locked. Unless a class has 16 or more rows at its top held or taken
-- since the statement began, the node gets the first task in the queue's order that no one
-- holds; when it finds nothing, the caller looks again after a pause.
-- Then, as the queue's claim: the attempt inserted, the task moved to leased (its version
-- bumped) and, for a job's first claim, the job moved to running. Locks, in this order: the
-- task, then the job; the job's compare-and-set re-reads its row after any lock wait, so of
-- two first claims on one job one moves it.
-- The gates are written once, in a CTE inlined into the reader (a locking clause does not
-- reach into a WITH query, so the lock is taken on jobs_task itself).
-- The node is checked first (claim_node.sql): a node that moved since its parameters were
-- read picks nothing (a one-time filter: no class is read).
-- Returns the task as picked (its version before the claim; since when it was claimable, for the
-- dispatch latency), the attempt's id and whether the
-- job moved, or NULLs when nothing is picked; no row when the node moved: the claim's events
-- follow through the ledger's door in the same transaction.
WITH
\i claim_node
pick AS MATERIALIZED (
    WITH q AS NOT MATERIALIZED (
        SELECT t.* FROM jobs_task t
         WHERE
\i task_gates
    )
    SELECT t.id, t.job_id, t."index", t.attempts, t.version, j.state, j.spec, j.kind,
           j.timeout_s, j.cpu_cores, j.ram_mb, j.disk_mb, j.min_vram_mb, j.gpu_count, j.slices,
           t.available_at
      FROM (SELECT t.* FROM (
                   SELECT t.id, t.priority, t.min_vram_mb
                     FROM unnest(%(buckets)s::smallint[]) AS b(k)
                    CROSS JOIN LATERAL (
                          SELECT * FROM q t WHERE t.size_class = b.k
                           ORDER BY t.priority DESC, t.min_vram_mb DESC, t.id
                           LIMIT 16) t
                    ORDER BY t.priority DESC, t.min_vram_mb DESC, t.id) AS c
             CROSS JOIN LATERAL (
                   SELECT t.* FROM jobs_task t
                    WHERE t.id = c.id AND t.state = 'queued' AND COALESCE(
\i task_live_gates
                    , false)
                      FOR UPDATE SKIP LOCKED) t
             LIMIT 1) t
      JOIN jobs_job j ON j.id = t.job_id
     WHERE EXISTS (SELECT 1 FROM node)
),
\i claim_lease
