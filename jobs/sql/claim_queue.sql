-- A node's claim, the queue's pick (jobs.claim; a small node's is claim_bucketed.sql).
-- Guarantees: the first queued task, in the queue's order (priority, then the VRAM it needs,
-- most first, then age), whose hard gates the node passes, is locked as it is read (FOR UPDATE
-- OF t SKIP LOCKED: concurrent claims skip each other's rows instead of queueing behind them);
-- its attempt is inserted, the task moved to leased (its version bumped) and, for a job's first
-- claim, the job moved to running. Locks, in this order: the task, then the job. The job's
-- compare-and-set re-reads its row after any lock wait (READ COMMITTED), so of two first claims
-- on one job one moves it.
-- The live gates sit in one COALESCE: the planner then estimates they pass half the rows, and
-- its generic plan walks the queue's index in order and stops at the first task, as a custom
-- plan would.
-- The node is checked first (claim_node.sql): a node that moved since its parameters were
-- read picks nothing (a one-time filter: the queue is not read).
-- Returns the task as picked (its version before the claim; since when it was claimable, for the
-- dispatch latency), the attempt's id and whether the
-- job moved, or NULLs when nothing is picked; no row when the node moved: the claim's events
-- follow through the ledger's door in the same transaction.
WITH
\i claim_node
pick AS MATERIALIZED (
    SELECT t.id, t.job_id, t."index", t.attempts, t.version, j.state, j.spec, j.kind,
           j.timeout_s, j.cpu_cores, j.ram_mb, j.disk_mb, j.min_vram_mb, j.gpu_count, j.slices,
           t.available_at
      FROM jobs_task t JOIN jobs_job j ON j.id = t.job_id
     WHERE EXISTS (SELECT 1 FROM node) AND
\i task_gates
     ORDER BY t.priority DESC, t.min_vram_mb DESC, t.id
     LIMIT 1
       FOR UPDATE OF t SKIP LOCKED
),
\i claim_lease
