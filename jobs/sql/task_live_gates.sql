-- The gates a queued task can stop passing after its submission (included by the claims and
-- queued_in_classes.sql): it is requeued with a backoff (available_at), the node that lost it
-- excluded until the exclusion's grace ends (reprieve), and an untrusted node takes only
-- low-risk work with an attempt to spare, or a replica (verified work: its result counts only
-- if other nodes agree), but never a spot-check's replica (jobs.verification). A replica goes
-- to no operator whose node already ran another replica of its slice: its attempts are read
-- only for replicas (t.replica > 0), through the slice's tasks (task_job_index) and their
-- attempts (attempt_task_number). Terms of an AND, inside the caller's COALESCE.
t.available_at <= %(now)s
AND (NOT t.excluded_nodes @> ARRAY[%(node)s::bigint] OR t.available_at <= %(reprieve)s)
AND (%(trusted)s OR (NOT t.trusted_only
                     AND (t.replica > 0 OR (t.priority <= 0 AND t.attempts + 1 < t.max_attempts))))
AND (t.replica = 0 OR NOT EXISTS (
        SELECT 1 FROM jobs_task s
          JOIN jobs_attempt a ON a.task_id = s.id
          JOIN nodes_node o ON o.id = a.node_id
         WHERE s.job_id = t.job_id AND s."index" = t."index" AND s.id <> t.id
           AND o.operator_id = %(operator)s))
