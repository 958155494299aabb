-- How many of the given jobs' holds still hold credits, and how much in all (ledger.settlement.
-- holds_outstanding, for /metrics). Locks nothing. One probe of the accounts' unique code per
-- job, the codes passed as one array: a busy hub has more live jobs than a statement may have
-- parameters.
SELECT count(*), COALESCE(sum(balance), 0)
  FROM ledger_account
 WHERE code = ANY(%(codes)s::text[]) AND balance > 0
