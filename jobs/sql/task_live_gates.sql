-- The gates a queued task can stop passing after its submission (included by the claims and
-- queued_in_classes.sql): it is requeued with a backoff (available_at), the node that lost it
-- excluded until the exclusion's grace ends (reprieve), and an untrusted node takes only
-- low-risk work with an attempt to spare, or a replica (verified work: its result counts only
-- if other nodes agree), but never a spot-check's replica (jobs.verification). A replica goes
-- to no operator whose node already ran another replica of its slice (jobs_slice_ran_by,
-- migration jobs 0011). Terms of an AND, inside the caller's COALESCE.
t.available_at <= %(now)s
AND (NOT t.excluded_nodes @> ARRAY[%(node)s::bigint] OR t.available_at <= %(reprieve)s)
AND (%(trusted)s OR (NOT t.trusted_only
                     AND (t.replica > 0 OR (t.priority <= 0 AND t.attempts + 1 < t.max_attempts))))
AND (t.replica = 0 OR NOT jobs_slice_ran_by(t, %(operator)s))
