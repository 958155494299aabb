-- A busy node's heartbeat extends its leases (jobs.leases.leases_extend): each attempt of the
-- node among %(tokens)s still under its lease (an active state, not expired at %(now)s) runs
-- until %(expires)s. The UPDATE checks each row again under its lock, so an attempt that ended
-- meanwhile is not extended, and is reported gone by its absence.
-- Locks: those attempts' rows.
-- Returns, for each lease extended, its token and whether it must stop: its own cancel flag,
-- or its job's (an attempt no cancel could flag, jobs.cancellation).
UPDATE jobs_attempt SET lease_expires_at = %(expires)s
 WHERE node_id = %(node)s AND lease_token = ANY(%(tokens)s::varchar[])
   AND state = ANY(%(states)s::varchar[]) AND lease_expires_at > %(now)s
RETURNING lease_token, cancel_requested OR EXISTS (
       SELECT 1 FROM jobs_task t JOIN jobs_job j ON j.id = t.job_id
        WHERE t.id = jobs_attempt.task_id AND j.cancel_requested_at IS NOT NULL)
