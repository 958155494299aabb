"""The reliability decay's one rule, `node_evidence_decayed`: every statement that decays a
node's evidence (an outcome recorded, nodes/sql/record_outcome.sql; the periodic decay,
nodes.services.nodes_reliability_decay) calls it."""

from django.db import migrations

_CREATE = """
-- Evidence (a node's rel_alpha or rel_beta) decayed towards its prior from `p_since` to `p_now`:
-- prior + (evidence - prior) * 0.5 ^ (elapsed / half-life), elapsed in seconds.
-- Guarantees: the result lies between the prior and the evidence; time running backwards
-- (p_now before p_since) counts as none, so nothing ever moves away from the prior; it reads
-- only its arguments. One SQL expression, IMMUTABLE: PostgreSQL inlines it into the statement
-- that calls it, so an UPDATE that passes its row's own columns decays the row version it locks.
CREATE FUNCTION node_evidence_decayed(
    p_evidence float8, p_prior float8, p_since timestamptz, p_now timestamptz,
    p_half_life_s float8
) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_prior + (p_evidence - p_prior)
           * power(0.5, GREATEST(EXTRACT(EPOCH FROM (p_now - p_since)), 0)::float8
                        / p_half_life_s)
$$;
"""

_DROP = "DROP FUNCTION node_evidence_decayed(float8, float8, timestamptz, timestamptz, float8);"


class Migration(migrations.Migration):
    dependencies = [("nodes", "0007_gputier_multiplier_in_price_book")]

    operations = [migrations.RunSQL(_CREATE, _DROP)]
