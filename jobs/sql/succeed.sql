-- A success's attempt and task (jobs.attempts._succeed). It runs in the completion's
-- transaction after the node's reliability (the node row first: docs/architecture.md, "Lock
-- order") and before AttemptSucceeded goes through the ledger's door.
-- Fencing: the attempt moves only under its lease (its token, an active state, not expired), by
-- compare-and-set; the task moves only when the attempt did and the task still runs it.
-- Locks: the attempt's row, then the task's.
-- Returns whether the attempt was won and whether the task moved (each 0 or 1).
WITH won AS (
    UPDATE jobs_attempt
       SET state = %(state)s, finished_at = %(now)s, runtime_ms = %(runtime_ms)s,
           exit_code = %(exit_code)s, stdout_tail = %(stdout_tail)s,
           stderr_tail = %(stderr_tail)s, reported_runtime_s = %(reported_runtime_s)s,
           progress = 100
     WHERE id = %(attempt)s AND lease_token = %(token)s AND state IN (%(leased)s, %(running)s)
       AND lease_expires_at > %(now)s
    RETURNING id
),
task AS (
    UPDATE jobs_task SET state = %(task_state)s, finished_at = %(now)s, version = version + 1
     WHERE id = %(task)s AND current_attempt_id = %(attempt)s AND EXISTS (SELECT 1 FROM won)
    RETURNING id
)
SELECT (SELECT count(*) FROM won), (SELECT count(*) FROM task)
