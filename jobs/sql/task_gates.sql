-- Every hard gate of a queued task `t` for the claiming node (included by claim_queue.sql,
-- claim_bucketed.sql and queued_in_classes.sql). Outside COALESCE only what an index reads
-- (the queue's partial-index predicate and the VRAM bound); the rest is one opaque term to the
-- planner, which then estimates it passes half the rows, so that its generic plan walks the
-- queue's index in order and stops at the first task, as a plan for each call's values would.
t.state = 'queued'
AND t.min_vram_mb <= %(vram)s
AND COALESCE(
\i task_live_gates
AND t.cpu_cores <= %(cores)s
AND t.ram_mb <= %(ram)s
AND t.disk_mb <= %(disk)s
AND t.gpu_count <= %(gpus)s
AND t.min_compute_capability <= %(cc)s
AND (t.region = '' OR t.region = %(region)s)
AND (t.tier_allow = '{}' OR t.tier_allow @> ARRAY[%(tier)s::varchar])
AND t.price_ceiling >= %(price)s, false)
