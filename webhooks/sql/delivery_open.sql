-- A job's end opens its webhook's delivery (webhooks.services.delivery_open), inside the
-- transaction that ended the job: one statement, on the completion's path. It writes nothing
-- for a job without a webhook, and nothing a second time for a job whose delivery is already
-- open (the unique webhook_id), so a double fire of the end sends once.
-- Locks: the new delivery row only. Returns its id, or no row.
INSERT INTO webhooks_webhookdelivery
       (webhook_id, job_state, state, attempts, attempts_allowed, next_attempt_at, body,
        created_at)
SELECT job_id, %(job_state)s, 'pending', 0, %(allowed)s, %(now)s, '', %(now)s
  FROM webhooks_jobwebhook
 WHERE job_id = %(job)s
    ON CONFLICT (webhook_id) DO NOTHING
RETURNING id
