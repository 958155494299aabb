-- The fleet for /metrics (nodes.metrics): nodes by state, tier and region, and for the nodes
-- in service the time since their last heartbeat (max, mean, and how many beat at all). Locks nothing. One row per
-- node read, grouped: the nodes table holds one row per machine, and the caller keeps the
-- rows for METRICS_CACHE_S seconds.
SELECT n.state, n.tier, n.region, count(*),
       max(extract(epoch FROM %(now)s - n.last_heartbeat_at))
           FILTER (WHERE n.state = ANY(%(live)s::text[])),
       avg(extract(epoch FROM %(now)s - n.last_heartbeat_at))
           FILTER (WHERE n.state = ANY(%(live)s::text[])),
       count(n.last_heartbeat_at) FILTER (WHERE n.state = ANY(%(live)s::text[]))
  FROM nodes_node n
 GROUP BY n.state, n.tier, n.region
