-- A node's claim, the queue's pick (jobs.claim; a small node's is claim_bucketed.sql).
-- Guarantees: the first queued task, in the queue's order (priority, then the VRAM it needs,
-- most first, then age), whose hard gates the node passes, is locked as it is read (FOR UPDATE
-- OF t SKIP LOCKED: concurrent claims skip each other's rows instead of queueing behind them);
-- its attempt is inserted, the task moved to leased (its version bumped) and, for a job's first
-- claim, the job moved to running. Locks, in this order: the task, then the job. The job's
-- compare-and-set re-reads its row after any lock wait (READ COMMITTED), so of two first claims
-- on one job one moves it.
-- The live gates sit in one COALESCE: the planner then estimates they pass half the rows, and
-- its generic plan walks the queue's index in order and stops at the first task, as a custom
-- plan would.
-- Returns the task as picked (its version before the claim), the attempt's id and whether the
-- job moved: the claim's events follow through the ledger's door in the same transaction.
WITH pick AS MATERIALIZED (
    SELECT t.id, t.job_id, t."index", t.attempts, t.version, j.state, j.spec, j.kind,
           j.timeout_s, j.cpu_cores, j.ram_mb, j.disk_mb, j.min_vram_mb, j.gpu_count, j.slices
      FROM jobs_task t JOIN jobs_job j ON j.id = t.job_id
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
     ORDER BY t.priority DESC, t.min_vram_mb DESC, t.id
     LIMIT 1
       FOR UPDATE OF t SKIP LOCKED
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
