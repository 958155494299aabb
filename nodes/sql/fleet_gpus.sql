-- The GPUs of the nodes in service as their last heartbeats described them, per tier, for
-- /metrics (nodes.metrics): how many reported, their temperature and utilisation (max and
-- mean). Locks nothing; reads the nodes in service only, through the partial index of their
-- offline deadline (node_offline_due), and each one's last `gpu_state` array.
SELECT n.tier, count(*),
       max((g ->> 'temperature_c')::float8), avg((g ->> 'temperature_c')::float8),
       max((g ->> 'utilization_pct')::float8), avg((g ->> 'utilization_pct')::float8)
  FROM nodes_node n
 CROSS JOIN LATERAL jsonb_array_elements(
       CASE WHEN jsonb_typeof(n.gpu_state) = 'array' THEN n.gpu_state ELSE '[]' END) AS g
 WHERE n.state = ANY(%(live)s::text[]) AND n.offline_after IS NOT NULL
 GROUP BY n.tier
