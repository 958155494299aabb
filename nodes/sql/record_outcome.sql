-- One attempt's outcome folded into its node's reliability (nodes.services.node_record_outcome),
-- a success's and a failure's alike: the node's evidence decayed to %(now)s by
-- node_evidence_decayed (the decay's one rule, migration nodes 0008), the outcome counted (a
-- success adds 1 to rel_alpha, a failure 1 to rel_beta), the score their mean, and the run of
-- failures ended by a success or lengthened by a failure. What a failure then does (cool-down,
-- quarantine) is the caller's, in the same transaction.
-- Locks: the node's row, until the transaction ends. Every value comes from the row's own
-- columns, in the UPDATE: a concurrent outcome waits for the row and then reads the version it
-- locked, so each one counts.
-- reliability_at never moves back: an outcome recorded late decays nothing further.
-- No row: no such node. Returns the new score and the node's cooldown_until.
UPDATE nodes_node
   SET (rel_alpha, rel_beta, reliability) = (
           SELECT counted.alpha, counted.beta, counted.alpha / (counted.alpha + counted.beta)
             FROM (SELECT node_evidence_decayed(rel_alpha, %(pa)s, reliability_at, %(now)s,
                                                %(half)s) + (%(success)s)::int AS alpha,
                          node_evidence_decayed(rel_beta, %(pb)s, reliability_at, %(now)s,
                                                %(half)s) + (NOT %(success)s)::int AS beta
                  ) counted
       ),
       reliability_at = GREATEST(reliability_at, %(now)s),
       consecutive_failures = CASE WHEN %(success)s THEN 0 ELSE consecutive_failures + 1 END
 WHERE id = %(id)s
RETURNING reliability, cooldown_until
