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
-- Returns the task as picked (its version before the claim), the attempt's id and whether the
-- job moved: the claim's events follow through the ledger's door in the same transaction.
WITH pick AS MATERIALIZED (
    WITH q AS NOT MATERIALIZED (
        SELECT t.* FROM jobs_task t
         WHERE t.state = 'queued'
           AND t.min_vram_mb <= %(vram)s
           AND COALESCE(t.available_at <= %(now)s
           AND (NOT t.excluded_nodes @> ARRAY[%(node)s::bigint] OR t.available_at <= %(reprieve)s)
           AND (%(trusted)s OR (t.priority <= 0 AND t.attempts + 1 < t.max_attempts))
           AND t.cpu_cores <= %(cores)s
           AND t.ram_mb <= %(ram)s
           AND t.disk_mb <= %(disk)s
           AND t.gpu_count <= %(gpus)s
           AND t.min_compute_capability <= %(cc)s
           AND (t.region = '' OR t.region = %(region)s)
           AND (t.tier_allow = '{}' OR t.tier_allow @> ARRAY[%(tier)s::varchar])
           AND t.price_ceiling >= %(price)s, false)
    )
    SELECT t.id, t.job_id, t."index", t.attempts, t.version, j.state, j.spec, j.kind,
           j.timeout_s, j.cpu_cores, j.ram_mb, j.disk_mb, j.min_vram_mb, j.gpu_count, j.slices
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
                    WHERE t.id = c.id AND t.state = 'queued'
                      AND COALESCE(t.available_at <= %(now)s
                      AND (NOT t.excluded_nodes @> ARRAY[%(node)s::bigint]
                           OR t.available_at <= %(reprieve)s)
                      AND (%(trusted)s
                           OR (t.priority <= 0 AND t.attempts + 1 < t.max_attempts)), false)
                      FOR UPDATE SKIP LOCKED) t
             LIMIT 1) t
      JOIN jobs_job j ON j.id = t.job_id
),
att AS (
    INSERT INTO jobs_attempt ("task_id", "node_id", "number", "lease_token", "state",
           "leased_at", "lease_expires_at", "finished_at", "runtime_ms", "reported_runtime_s",
           "price_per_s", "exit_code", "failure_class", "detail", "stdout_tail", "stderr_tail",
           "progress", "message", "cancel_requested", "log_bytes")
    SELECT pick.id, %(node)s, pick.attempts + 1, %(lease_token)s, 'leased', %(now)s,
           %(lease_expires_at)s, NULL, NULL, NULL, %(price)s, NULL, '', '', '', '', 0, '',
           false, 0
      FROM pick
    RETURNING id, task_id
),
moved AS (
    UPDATE jobs_task SET state = 'leased', attempts = pick.attempts + 1,
           version = pick.version + 1, current_attempt_id = att.id
      FROM pick JOIN att ON att.task_id = pick.id
     WHERE jobs_task.id = pick.id
),
started AS (
    UPDATE jobs_job SET state = 'running' FROM pick
     WHERE jobs_job.id = pick.job_id AND pick.state = 'queued' AND jobs_job.state = 'queued'
    RETURNING jobs_job.id
)
SELECT pick.*, att.id, EXISTS (SELECT 1 FROM started)
  FROM pick JOIN att ON att.task_id = pick.id
