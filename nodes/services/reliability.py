"""Earned reliability: a Beta posterior over "an attempt on this node succeeds".

alpha = PRIOR_ALPHA + (decayed successes), beta = PRIOR_BETA + (decayed failures), and the score
is the posterior mean alpha / (alpha + beta). Evidence decays exponentially towards the prior
with a half-life (NODE_RELIABILITY_HALF_LIFE_H): what a node did last month counts half as much
as what it did this week, and a node that stops working drifts back to "unknown", not "trusted".
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, FloatField, Func, Q, Value
from django.db.models.functions import Power
from django.utils import timezone

from nodes.models import PRIOR_ALPHA, PRIOR_BETA, Node, NodeState
from nodes.services.cas import append_node_events
from nodes.services.quarantine import Rule, node_quarantine


def half_life_s() -> float:
    return settings.NODE_RELIABILITY_HALF_LIFE_H * 3600.0


def decay(alpha: float, beta: float, elapsed_s: float) -> tuple[float, float]:
    factor = 0.5 ** (max(elapsed_s, 0.0) / half_life_s())
    return (PRIOR_ALPHA + (alpha - PRIOR_ALPHA) * factor, PRIOR_BETA + (beta - PRIOR_BETA) * factor)


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
        fast = _record_success(node_id, now)
        if fast is not None:
            return fast
    with transaction.atomic():
        # The row lock serialises outcomes of one node (concurrent slots finishing together).
        node = Node.objects.select_for_update().get(pk=node_id)
        alpha, beta = decay(
            node.rel_alpha, node.rel_beta, (now - node.reliability_at).total_seconds()
        )
        if success:
            alpha += 1.0
            node.consecutive_failures = 0
        else:
            beta += 1.0
            node.consecutive_failures += 1
        node.rel_alpha, node.rel_beta, node.reliability_at = alpha, beta, now
        node.reliability = mean(alpha, beta)
        fields = ["rel_alpha", "rel_beta", "reliability", "reliability_at", "consecutive_failures"]
        cooled = False
        if node.consecutive_failures >= settings.NODE_COOLDOWN_AFTER_FAILURES:
            cooled = True
            failures = node.consecutive_failures
            node.cooldown_until = now + timedelta(seconds=settings.NODE_COOLDOWN_S)
            node.consecutive_failures = 0
            node.event_version += 1
            fields += ["cooldown_until", "event_version"]
        node.save(update_fields=fields)
        if cooled:
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
        quarantined = False
        if not success:
            quarantined = _error_rate_check(node, actor=actor, now=now)
    return Outcome(node.reliability, node.cooldown_until, quarantined)


# `decay` and a success in one statement: the row's own values, so concurrent successes each
# count (the UPDATE waits for the row and then reads the version it locked).
_FACTOR = (
    "power(0.5, GREATEST(EXTRACT(EPOCH FROM (%(now)s - reliability_at)), 0)::float8 / %(half)s)"
)
_ALPHA = f"(%(pa)s + (rel_alpha - %(pa)s) * {_FACTOR} + 1)"
_BETA = f"(%(pb)s + (rel_beta - %(pb)s) * {_FACTOR})"
_SUCCESS_SQL = (
    f"UPDATE nodes_node SET rel_alpha = {_ALPHA}, rel_beta = {_BETA}, "  # noqa: S608 - ours
    f"reliability = {_ALPHA} / ({_ALPHA} + {_BETA}), "
    "reliability_at = GREATEST(reliability_at, %(now)s), consecutive_failures = 0 "
    "WHERE id = %(id)s RETURNING reliability, cooldown_until"
)


def _record_success(node_id: int, now: datetime) -> Outcome | None:
    """A success moves only the posterior and ends the failure streak. Every completed task
    pays this: one UPDATE that decays and counts in SQL. None when the node has no row."""
    params = {"now": now, "half": half_life_s(), "pa": PRIOR_ALPHA, "pb": PRIOR_BETA, "id": node_id}
    with connection.cursor() as cursor:
        cursor.execute(_SUCCESS_SQL, params)
        row = cursor.fetchone()
    return Outcome(row[0], row[1], False) if row else None


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


class SecondsSince(Func):
    """now − a datetime column, in seconds, as a float."""

    output_field = FloatField()

    def __init__(self, column: str, now: datetime) -> None:
        super().__init__(Value(now), F(column))

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler,
            connection,
            template="EXTRACT(EPOCH FROM (%(expressions)s))",
            arg_joiner=" - ",
            **extra,
        )


def nodes_reliability_decay(*, now: datetime | None = None, min_age_s: int = 600) -> int:
    """Decay every node's evidence to `now`, in one UPDATE. Rows decayed less than `min_age_s`
    ago, or already at the prior, are left alone, so a double fire changes nothing."""
    now = now or timezone.now()
    factor = Power(Value(0.5), SecondsSince("reliability_at", now) / Value(half_life_s()))
    alpha = Value(PRIOR_ALPHA) + (F("rel_alpha") - Value(PRIOR_ALPHA)) * factor
    beta = Value(PRIOR_BETA) + (F("rel_beta") - Value(PRIOR_BETA)) * factor
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
