-- Whether a task a small node may run is queued in its size classes at all, locks aside
-- (jobs.claim: a small node's claim that found every candidate held looks again only then).
-- Locks nothing. The gates are the claims' (task_gates.sql).
SELECT 1 FROM unnest(%(buckets)s::smallint[]) AS b(k)
 WHERE EXISTS (
       SELECT 1 FROM jobs_task t
        WHERE t.size_class = b.k
          AND
\i task_gates
       )
 LIMIT 1
