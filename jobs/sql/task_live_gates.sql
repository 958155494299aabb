-- The gates a queued task can stop passing after its submission (included by the claims and
-- queued_in_classes.sql): it is requeued with a backoff (available_at), the node that lost it
-- excluded until the exclusion's grace ends (reprieve), and an untrusted node takes only
-- low-risk work with an attempt to spare. Terms of an AND, inside the caller's COALESCE.
t.available_at <= %(now)s
AND (NOT t.excluded_nodes @> ARRAY[%(node)s::bigint] OR t.available_at <= %(reprieve)s)
AND (%(trusted)s OR (t.priority <= 0 AND t.attempts + 1 < t.max_attempts))
