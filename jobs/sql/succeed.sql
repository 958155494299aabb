-- A success: the node's reliability, the attempt, its task and the AttemptSucceeded event
-- (jobs.attempts._succeed), in the completion's transaction. The node's reliability first
-- (its row first: docs/architecture.md, "Lock order"), through the nodes app's function
-- node_outcome_record (jobs writes no nodes table); every later step reads `rel`, so runs
-- after it. The event goes into the log through the ledger's one
-- door, ledger_append (the ledger's own function, called here: jobs writes no ledger table),
-- at the task version read before the compare-and-set, with the payload the caller validated
-- (ledger.services.event_prepared); only when the task moved.
-- Fencing: the attempt moves only under its lease (its token, an active state, not expired), by
-- compare-and-set; the task moves only when the attempt did and the task still runs it.
-- Locks: the node's row, then the attempt's, then the task's.
-- Returns whether the attempt was won, whether the task moved and whether the event was
-- written (each 0 or 1). A version already taken on the task's stream fails the statement.
WITH rel AS MATERIALIZED (
    SELECT r.reliability
      FROM node_outcome_record(%(rel_node)s, true, %(now)s, %(rel_pa)s, %(rel_pb)s,
                               %(rel_half)s) AS r
),
won AS (
    UPDATE jobs_attempt
       SET state = %(state)s, finished_at = %(now)s, runtime_ms = %(runtime_ms)s,
           exit_code = %(exit_code)s, stdout_tail = %(stdout_tail)s,
           stderr_tail = %(stderr_tail)s, reported_runtime_s = %(reported_runtime_s)s,
           progress = 100, message = 'succeeded'
     WHERE id = %(attempt)s AND lease_token = %(token)s AND state IN (%(leased)s, %(running)s)
       AND lease_expires_at > %(now)s AND EXISTS (SELECT 1 FROM rel)
    RETURNING id
),
task AS (
    UPDATE jobs_task SET state = %(task_state)s, finished_at = %(now)s, version = version + 1
     WHERE id = %(task)s AND current_attempt_id = %(attempt)s AND EXISTS (SELECT 1 FROM won)
    RETURNING id
),
ev AS (
    SELECT e.id
      FROM task,
           LATERAL ledger_append(ARRAY[%(stream)s::text], ARRAY[%(type)s::text],
                                 ARRAY[%(schema_version)s::int], ARRAY[%(payload)s::jsonb],
                                 ARRAY[%(actor)s::text], ARRAY[%(expected)s::int],
                                 ARRAY[NULL::text], %(now)s) AS e
)
SELECT (SELECT count(*) FROM won), (SELECT count(*) FROM task), (SELECT count(*) FROM ev)
