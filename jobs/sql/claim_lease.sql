-- What a claim does with the task it picked (included at the end of claim_queue.sql and
-- claim_bucketed.sql, after their `pick` CTE): insert its attempt, move the task to leased
-- (its version bumped) and, for a job's first claim, move the job to running, compare-and-set
-- on its state. Locks, in this order: the task (already, by the pick), then the job.
-- Returns, when the node is as the claim read it (the `node` CTE, claim_node.sql), one row:
-- the task as picked (its version before the claim), the attempt's id and whether the job
-- moved, all NULL when nothing was picked; no row when the node moved.
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
  FROM node LEFT JOIN (pick JOIN att ON att.task_id = pick.id) ON true
