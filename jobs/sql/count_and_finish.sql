-- A finished task counted on its job and, for the job's last task (of its slices × replicas
-- and the replicas added since: jobs.verification), the job finished
-- (jobs.attempts.job_count_finished): one statement, so of concurrent last reports exactly one
-- sees every task done while the job still runs.
-- Locks: the job's row (`cur`, FOR UPDATE); after any wait it reads the committed counts
-- (READ COMMITTED reads a locked row again).
-- The state a job ends in is decided only here: cancelled if any task was, else failed if any
-- task failed, else succeeded.
-- A job that ends has its outputs' deadline set: its retention from now (jobs.retention).
-- Returns the new counts, whether this report finished the job, and the state it ends in.
-- JobFinished is appended by the caller's next statement: one taken after this one's lock wait
-- sees every event committed before it (a cancel's JobCancelRequested), where this statement's
-- snapshot would not.
WITH cur AS MATERIALIZED (
    SELECT id, state, tasks_succeeded + %(s)s AS s, tasks_failed + %(f)s AS f,
           tasks_cancelled + %(c)s AS c, slices * replicas + extra_tasks AS tasks
      FROM jobs_job WHERE id = %(job)s FOR UPDATE
),
fin AS MATERIALIZED (
    SELECT cur.*, (s + f + c >= tasks AND state IN ('queued', 'running')) AS done,
           CASE WHEN c > 0 THEN 'cancelled' WHEN f > 0 THEN 'failed' ELSE 'succeeded' END
           AS final
      FROM cur
)
UPDATE jobs_job SET tasks_succeeded = fin.s, tasks_failed = fin.f, tasks_cancelled = fin.c,
       state = CASE WHEN fin.done THEN fin.final ELSE jobs_job.state END,
       finished_at = CASE WHEN fin.done THEN %(now)s ELSE jobs_job.finished_at END,
       artifacts_expire_at = CASE WHEN fin.done
                                  THEN %(now)s + make_interval(days => jobs_job.retention_days)
                                  ELSE jobs_job.artifacts_expire_at END
  FROM fin WHERE jobs_job.id = fin.id
RETURNING fin.s, fin.f, fin.c, fin.done, fin.final
