-- The queue's depth for /metrics (jobs.metrics): live tasks by state and size class.
-- Locks nothing. Reads only live work, never the history: queued tasks through the queue's
-- partial index by size class (task_claim_bucket), leased and running ones through their
-- active attempts' partial index (attempt_active_node), each joined to its task by key.
SELECT 'queued', t.size_class, count(*)
  FROM jobs_task t
 WHERE t.state = 'queued'
 GROUP BY t.size_class
UNION ALL
SELECT a.state, t.size_class, count(*)
  FROM jobs_attempt a JOIN jobs_task t ON t.id = a.task_id
 WHERE a.state IN ('leased', 'running')
 GROUP BY a.state, t.size_class
