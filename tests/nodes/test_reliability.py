from datetime import UTC, datetime, timedelta

import pytest

from nodes.models import Node, NodeState
from nodes.services import node_record_outcome, nodes_reliability_decay
from nodes.tasks import decay_reliability
from tests.nodes.conftest import node_events

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# What the claim's "trusted" bar might be; a new node must start below any sensible one.
TRUSTED = 0.8


@pytest.fixture
def node(bobs_node):
    node, _ = bobs_node
    Node.objects.filter(pk=node.pk).update(reliability_at=T0)
    return node


def record(node, *outcomes: bool, start=T0, step=timedelta(minutes=1)):
    result = None
    for i, success in enumerate(outcomes):
        result = node_record_outcome(node_id=node.pk, success=success, now=start + i * step)
    return result


def test_it_starts_a_new_node_below_trust(node):
    assert node.reliability == 0.5 < TRUSTED


def test_it_rises_with_successes_and_falls_with_failures(node):
    scores = [record(node, True, start=T0 + timedelta(minutes=i)).reliability for i in range(5)]
    assert scores == sorted(scores) and scores[0] > 0.5
    assert scores[-1] == pytest.approx(6 / 7, abs=1e-3)  # Beta(6, 1)
    failed = record(node, False, start=T0 + timedelta(minutes=10)).reliability
    assert failed < scores[-1]


def test_it_takes_a_run_of_successes_to_earn_trust(node):
    after_three = record(node, True, True, True).reliability
    assert after_three < TRUSTED  # Beta(4, 1): 0.8 is not above the bar
    assert record(node, True, start=T0 + timedelta(minutes=5)).reliability > TRUSTED


def test_it_halves_the_evidence_every_half_life(node, settings):
    settings.NODE_RELIABILITY_HALF_LIFE_H = 24
    record(node, True, True, True, True, step=timedelta(0))  # alpha = 5
    # The rule: prior + (evidence - prior) * 0.5 ** (elapsed / half-life); beta is at the prior.
    alpha = 1.0 + (5.0 - 1.0) * 0.5 ** (24 / 24)
    assert alpha == 3.0
    later = record(node, False, start=T0 + timedelta(hours=24))
    node.refresh_from_db()
    assert node.rel_alpha == pytest.approx(alpha, abs=1e-3) and node.rel_beta == 2.0
    assert later.reliability == pytest.approx(0.6, abs=1e-3)


def test_an_outcome_recorded_late_decays_nothing_and_keeps_the_clock(node, settings):
    settings.NODE_RELIABILITY_HALF_LIFE_H = 24
    record(node, True, True, start=T0 + timedelta(hours=24), step=timedelta(0))  # alpha = 3
    for success in (True, False):
        record(node, success, start=T0)  # a day before the node's last decay
    node.refresh_from_db()
    assert (node.rel_alpha, node.rel_beta) == (4.0, 2.0)
    assert node.reliability_at == T0 + timedelta(hours=24)


def test_it_cools_a_node_down_after_three_failures_in_a_row(node, settings):
    settings.NODE_COOLDOWN_S = 900
    assert record(node, False, False, True, False, False).cooldown_until is None
    outcome = record(node, False, start=T0 + timedelta(minutes=10))
    assert outcome.cooldown_until == T0 + timedelta(minutes=10, seconds=900)
    node.refresh_from_db()
    assert node.consecutive_failures == 0 and node.cooling_down(T0 + timedelta(minutes=11))
    assert not node.cooling_down(T0 + timedelta(minutes=26))
    cooled = [p for t, p in node_events(node) if t == "NodeCooledDown"]
    assert cooled == [{"until": outcome.cooldown_until.isoformat(), "consecutive_failures": 3}]
    assert node.event_version == len(node_events(node))


def test_it_quarantines_on_an_error_rate_above_the_limit(node, settings):
    settings.NODE_ERROR_RATE_MIN_SAMPLE = 20
    settings.NODE_MAX_ERROR_RATE_PCT = 5
    # 1 failure in 19: not enough outcomes to judge yet.
    assert not record(node, *([True] * 18), False, step=timedelta(0)).quarantined
    # The 20th outcome, a second failure: 10% of 20.
    outcome = record(node, False)
    assert outcome.quarantined
    node.refresh_from_db()
    assert node.state == NodeState.QUARANTINED and node.quarantine_rule == "error_rate"
    assert "10% of recent attempts failed" in node.quarantine_reason


def test_it_tolerates_a_low_error_rate(node, settings):
    settings.NODE_ERROR_RATE_MIN_SAMPLE = 20
    outcome = record(node, *([True] * 40), False)
    assert not outcome.quarantined and node.state == NodeState.OFFLINE


def test_it_decays_scores_towards_the_prior(node, settings):
    settings.NODE_RELIABILITY_HALF_LIFE_H = 24
    record(node, *([True] * 8), step=timedelta(0))  # Beta(9, 1)
    assert nodes_reliability_decay(now=T0 + timedelta(hours=24)) == 1
    node.refresh_from_db()
    assert node.rel_alpha == pytest.approx(5.0, abs=1e-3)
    assert node.reliability == pytest.approx(5 / 6, abs=1e-3)


def test_it_changes_nothing_when_the_decay_fires_twice(node):
    record(node, True, True)
    later = T0 + timedelta(hours=5)
    assert nodes_reliability_decay(now=later) == 1
    before = Node.objects.values("rel_alpha", "rel_beta", "reliability", "reliability_at").get()
    assert nodes_reliability_decay(now=later) == 0
    assert nodes_reliability_decay(now=later + timedelta(minutes=1)) == 0
    assert (
        Node.objects.values("rel_alpha", "rel_beta", "reliability", "reliability_at").get()
        == before
    )


def test_it_snaps_forgotten_evidence_to_the_prior(node, settings):
    settings.NODE_RELIABILITY_HALF_LIFE_H = 1
    record(node, True)
    assert nodes_reliability_decay(now=T0 + timedelta(hours=30)) == 1
    node.refresh_from_db()
    assert (node.rel_alpha, node.rel_beta, node.reliability) == (1.0, 1.0, 0.5)
    assert nodes_reliability_decay(now=T0 + timedelta(hours=60)) == 0


def test_it_decays_from_the_celery_task(node):
    record(node, True, start=datetime.now(UTC) - timedelta(hours=2))
    assert decay_reliability() == 1
    assert decay_reliability() == 0
