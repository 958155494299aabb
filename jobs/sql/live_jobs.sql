-- The jobs with work queued, leased or running, for /metrics' holds outstanding (jobs.metrics):
-- a job's hold is released when its last task ends, so these are the jobs that may still hold
-- credits. Locks nothing; reads the same partial indexes as queue_depth.sql, never the history.
SELECT t.job_id FROM jobs_task t WHERE t.state = 'queued'
UNION
SELECT t.job_id
  FROM jobs_attempt a JOIN jobs_task t ON t.id = a.task_id
 WHERE a.state IN ('leased', 'running')
