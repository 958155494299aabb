"""Earned reliability: a Beta posterior over "an attempt on this node succeeds".

alpha = PRIOR_ALPHA + (decayed successes), beta = PRIOR_BETA + (decayed failures), and the score
is the posterior mean alpha / (alpha + beta). Evidence decays exponentially towards the prior
with a half-life (NODE_RELIABILITY_HALF_LIFE_H): what a node did last month counts half as much
as what it did this week, and a node that stops working drifts back to "unknown", not "trusted".
That rule is written once, as the SQL function node_evidence_decayed (migration nodes 0008),
which both the recording of an outcome and the periodic decay call.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, FloatField, Func, Q, Value
from django.utils import timezone

from core.sql import statement
from nodes.models import PRIOR_ALPHA, PRIOR_BETA, Node, NodeState
from nodes.services.cas import append_node_events
from nodes.services.quarantine import Rule, node_quarantine


def half_life_s() -> float:
    return settings.NODE_RELIABILITY_HALF_LIFE_H * 3600.0


def mean(alpha: float, beta: float) -> float:
    return alpha / (alpha + beta)


@dataclass(frozen=True)
class Outcome:
    reliability: float
    cooldown_until: datetime | None
    quarantined: bool


def node_record_outcome(
    *, node_id: int, success: bool, actor: str = "system", now: datetime | None = None
) -> Outcome:
    """Fold one attempt's outcome into the node's reliability. Call it with success=False only
    for failures the node is to blame for (infrastructure, timeouts, bad results), not for a
    job whose own code failed.

    Failures in a row (NODE_COOLDOWN_AFTER_FAILURES) put the node in a cool-down; an error rate
    above NODE_MAX_ERROR_RATE_PCT over at least NODE_ERROR_RATE_MIN_SAMPLE recent outcomes
    quarantines it. Both are evented.
    """
    now = now or timezone.now()
    if success:
        # Every completed task pays this: one UPDATE, in the caller's transaction if any.
        reliability, cooldown_until = _record(node_id, success=True, now=now)
        return Outcome(reliability, cooldown_until, False)
    with transaction.atomic():
        # The statement's row lock serialises outcomes of one node (concurrent slots finishing
        # together) until this transaction ends.
        _record(node_id, success=False, now=now)
        node = Node.objects.get(pk=node_id)
        if node.consecutive_failures >= settings.NODE_COOLDOWN_AFTER_FAILURES:
            failures = node.consecutive_failures
            node.cooldown_until = now + timedelta(seconds=settings.NODE_COOLDOWN_S)
            node.consecutive_failures = 0
            node.event_version += 1
            node.save(update_fields=["cooldown_until", "consecutive_failures", "event_version"])
            append_node_events(
                node_id=node.pk,
                version=node.event_version,
                actor=actor,
                events=[
                    (
                        "NodeCooledDown",
                        {
                            "until": node.cooldown_until.isoformat(),
                            "consecutive_failures": failures,
                        },
                    ),
                ],
            )
        quarantined = _error_rate_check(node, actor=actor, now=now)
    return Outcome(node.reliability, node.cooldown_until, quarantined)


def outcome_params(*, node_id: int, success: bool, now: datetime) -> dict[str, Any]:
    """The parameters of an outcome's call to node_outcome_record (nodes/sql/record_outcome.sql,
    and a success's statement of the jobs app, which calls the function itself)."""
    return {
        "node": node_id,
        "success": success,
        "now": now,
        "half": half_life_s(),
        "pa": PRIOR_ALPHA,
        "pb": PRIOR_BETA,
    }


def _record(node_id: int, *, success: bool, now: datetime) -> tuple[float, datetime | None]:
    """The outcome counted into the node's decayed evidence (node_outcome_record): its new
    reliability and its cooldown_until. Node.DoesNotExist when it has no row."""
    params = outcome_params(node_id=node_id, success=success, now=now)
    with connection.cursor() as cursor:
        cursor.execute(statement("nodes", "record_outcome"), params)
        row = cursor.fetchone()
    if row is None:
        raise Node.DoesNotExist(f"no node {node_id}")
    return row


def _error_rate_check(node: Node, *, actor: str, now: datetime) -> bool:
    successes = node.rel_alpha - PRIOR_ALPHA
    failures = node.rel_beta - PRIOR_BETA
    sample = successes + failures
    if sample < settings.NODE_ERROR_RATE_MIN_SAMPLE:
        return False
    rate = failures / sample
    if rate * 100 <= settings.NODE_MAX_ERROR_RATE_PCT:
        return False
    return node_quarantine(
        node=node,
        rule=Rule.ERROR_RATE,
        actor=actor,
        now=now,
        reason=f"{rate:.0%} of recent attempts failed on this node (the limit is "
        f"{settings.NODE_MAX_ERROR_RATE_PCT}%). Check its hardware and drivers, then ask an "
        "admin to lift the quarantine.",
    )


class EvidenceDecayed(Func):
    """A node's evidence in `column` decayed towards `prior` from its reliability_at to `now`:
    node_evidence_decayed, the decay's one rule (migration nodes 0008)."""

    function = "node_evidence_decayed"
    output_field = FloatField()

    def __init__(self, column: str, prior: float, now: datetime) -> None:
        super().__init__(
            F(column), Value(prior), F("reliability_at"), Value(now), Value(half_life_s())
        )


def nodes_reliability_decay(*, now: datetime | None = None, min_age_s: int = 600) -> int:
    """Decay every node's evidence to `now`, in one UPDATE. Rows decayed less than `min_age_s`
    ago, or already at the prior, are left alone, so a double fire changes nothing."""
    now = now or timezone.now()
    alpha = EvidenceDecayed("rel_alpha", PRIOR_ALPHA, now)
    beta = EvidenceDecayed("rel_beta", PRIOR_BETA, now)
    at_prior = Q(rel_alpha=PRIOR_ALPHA) & Q(rel_beta=PRIOR_BETA)
    due = (
        Node.objects.exclude(state=NodeState.RETIRED)
        .filter(reliability_at__lt=now - timedelta(seconds=min_age_s))
        .exclude(at_prior)
    )
    with transaction.atomic():
        decayed = due.update(
            rel_alpha=alpha, rel_beta=beta, reliability=alpha / (alpha + beta), reliability_at=now
        )
        # Evidence below a thousandth of an outcome is noise: snap it to the prior, so these
        # rows are left alone from then on.
        Node.objects.filter(
            rel_alpha__lt=PRIOR_ALPHA + 1e-3, rel_beta__lt=PRIOR_BETA + 1e-3
        ).exclude(at_prior).update(
            rel_alpha=PRIOR_ALPHA, rel_beta=PRIOR_BETA, reliability=mean(PRIOR_ALPHA, PRIOR_BETA)
        )
    return decayed
