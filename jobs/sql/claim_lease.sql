-- What a claim does with the task it picked (included at the end of claim_queue.sql and
-- claim_bucketed.sql, after their `pick` CTE): insert its attempt, move the task to leased
-- (its version bumped) and, for a job's first claim, move the job to running, compare-and-set
-- on its state; and append the claim's events through the ledger's one door (ledger_append,
-- the ledger's own function: jobs writes no ledger table): TaskClaimed at the task's version
-- before the claim, then, when the job moved, JobStarted at its stream's end. Their payloads
-- are the caller's, validated by it (ledger.services.event_prepared) with the ids only this
-- statement knows, which it writes over them (the right side of || wins).
-- Locks, in this order: the task (already, by the pick), then the job, then the events' rows.
-- A version already taken on the task's stream fails the statement: nothing is written.
-- Returns, when the node is as the claim read it (the `node` CTE, claim_node.sql), one row:
-- the task as picked (its version before the claim), the attempt's id and whether the job
-- moved, all NULL when nothing was picked; no row when the node moved. With %(lazy)s the
-- claim, its own transaction, commits without waiting for the WAL's flush (core's
-- commit_lazily).
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
),
ev AS (
    SELECT e.id
      FROM pick JOIN att ON att.task_id = pick.id
     CROSS JOIN LATERAL (SELECT CASE WHEN EXISTS (SELECT 1 FROM started) THEN 2 ELSE 1 END)
           AS n(k)
     CROSS JOIN LATERAL ledger_append(
           (ARRAY['task:' || pick.id, 'job:' || pick.job_id])[1:n.k],
           (ARRAY['TaskClaimed', 'JobStarted'])[1:n.k],
           (ARRAY[%(claimed_schema)s::int, %(started_schema)s::int])[1:n.k],
           (ARRAY[%(claimed)s::jsonb || jsonb_build_object('task_id', pick.id,
                  'job_id', pick.job_id, 'index', pick."index", 'attempt_id', att.id,
                  'attempt', pick.attempts + 1),
                  %(started)s::jsonb || jsonb_build_object('job_id', pick.job_id)])[1:n.k],
           (ARRAY[%(actor)s::text, 'system'])[1:n.k],
           (ARRAY[pick.version, NULL])[1:n.k],
           (ARRAY[NULL::text, NULL])[1:n.k],
           %(now)s) AS e
)
SELECT pick.*, att.id, EXISTS (SELECT 1 FROM started), (SELECT count(*) FROM ev)
  FROM node LEFT JOIN (pick JOIN att ON att.task_id = pick.id) ON true
 CROSS JOIN commit_lazily(%(lazy)s) AS lazy
