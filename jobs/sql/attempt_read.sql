-- An agent's report on an attempt, first read (jobs.attempts._read): the attempt under the
-- lease the report names (its id, token and node, all three), with what the report's fence and
-- settlement need of its task, job and node, and how many artifacts it has (counted here, so
-- the common case, none, reads no more), the task's replica and the node's trust figures
-- (jobs.verification: whether to spot-check the result). Takes no lock: the writes that follow fence on the
-- lease themselves (compare-and-set). No row when the token is not that attempt's on that node.
SELECT a.task_id, t.job_id, t."index", t.version, a.leased_at, j.timeout_s, a.state,
       a.lease_expires_at, j.submitter_id, n.operator_id, a.price_per_s, n.tier, n.region, j.kind,
       (SELECT count(*) FROM jobs_artifact x WHERE x.attempt_id = a.id), t.replica,
       n.reliability, n.verified_results
  FROM jobs_attempt a
  JOIN jobs_task t ON t.id = a.task_id
  JOIN jobs_job j ON j.id = t.job_id
  JOIN nodes_node n ON n.id = a.node_id
 WHERE a.id = %(attempt)s AND a.lease_token = %(token)s AND a.node_id = %(node)s
