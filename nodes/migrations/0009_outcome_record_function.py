"""`node_outcome_record`: an attempt's outcome folded into its node's reliability, as a function
of the nodes app, so that a statement of another app (a success's, jobs/sql/succeed.sql) records
it in its own first step without writing this app's table itself, and nodes.services records a
failure through the same function."""

from django.db import migrations

_CREATE = """
-- One attempt's outcome folded into its node's reliability, a success's and a failure's alike:
-- the node's evidence decayed to p_now by node_evidence_decayed (the decay's one rule), the
-- outcome counted (a success adds 1 to rel_alpha, a failure 1 to rel_beta), the score their
-- mean, and the run of failures ended by a success or lengthened by a failure. What a failure
-- then does (cool-down, quarantine) is the caller's, in the same transaction.
-- Locks: the node's row, until the caller's transaction ends. Every value comes from the row's
-- own columns, in the UPDATE: a concurrent outcome waits for the row and then reads the version
-- it locked, so each one counts. reliability_at never moves back: an outcome recorded late
-- decays nothing further.
-- No row: no such node. Returns the new score and the node's cooldown_until.
-- PL/pgSQL, so its plan is prepared once per session.
CREATE FUNCTION node_outcome_record(
    p_node bigint, p_success boolean, p_now timestamptz, p_prior_alpha float8,
    p_prior_beta float8, p_half_life_s float8
) RETURNS TABLE(reliability float8, cooldown_until timestamptz) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE nodes_node AS n
       SET (rel_alpha, rel_beta, reliability) = (
               SELECT c.alpha, c.beta, c.alpha / (c.alpha + c.beta)
                 FROM (SELECT node_evidence_decayed(n.rel_alpha, p_prior_alpha,
                                                    n.reliability_at, p_now, p_half_life_s)
                              + p_success::int AS alpha,
                              node_evidence_decayed(n.rel_beta, p_prior_beta,
                                                    n.reliability_at, p_now, p_half_life_s)
                              + (NOT p_success)::int AS beta) c),
           reliability_at = GREATEST(n.reliability_at, p_now),
           consecutive_failures = CASE WHEN p_success THEN 0
                                       ELSE n.consecutive_failures + 1 END
     WHERE n.id = p_node
    RETURNING n.reliability, n.cooldown_until;
END
$$;
"""

_DROP = (
    "DROP FUNCTION node_outcome_record(bigint, boolean, timestamptz, float8, float8, float8);"
)


class Migration(migrations.Migration):
    dependencies = [("nodes", "0008_reliability_decay_function")]

    operations = [migrations.RunSQL(_CREATE, _DROP)]
