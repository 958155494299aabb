-- Whether a task a small node may run is queued in its size classes at all, locks aside
-- (jobs.claim: a small node's claim that found every candidate held looks again only then).
-- Locks nothing. The gates are claim_bucketed.sql's.
SELECT 1 FROM unnest(%(buckets)s::smallint[]) AS b(k)
 WHERE EXISTS (
       SELECT 1 FROM jobs_task t
        WHERE t.size_class = b.k
          AND t.state = 'queued'
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
          AND t.price_ceiling >= %(price)s, false))
 LIMIT 1
