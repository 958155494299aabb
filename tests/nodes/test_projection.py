from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from ledger.verify import verify_ledger
from nodes.models import Node, Ownership
from nodes.services import node_record_outcome, node_retire, node_update, nodes_reap
from tests.conftest import client_with_key
from tests.nodes.conftest import beat, capabilities, gpu, register_node

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def node_problems() -> list[str]:
    return [p for p in verify_ledger(check_chain=False).problems if p.startswith("nodes:")]


@pytest.fixture
def busy_history(bob, mallory):
    with time_machine.travel(T0, tick=False):
        a, key_a = register_node(bob, name="a")
        b, key_b = register_node(mallory, name="b")
        beat(client_with_key(key_a))
        beat(
            client_with_key(key_b),
            capabilities=capabilities(gpus=[gpu("NVIDIA GeForce RTX 3060", 12288)]),
        )
        node_update(node=a, name="a2", price_floor=7, actor="test")
        for _ in range(3):
            node_record_outcome(node_id=b.pk, success=False)
    nodes_reap(now=T0 + timedelta(minutes=10))
    with time_machine.travel(T0 + timedelta(minutes=11), tick=False):
        beat(client_with_key(key_a), status="draining")
        node_retire(node=Node.objects.get(pk=b.pk), actor="test")
    return a, b


def test_it_rebuilds_the_nodes_table_from_the_log(busy_history):
    assert node_problems() == []


def test_it_reports_a_row_changed_behind_the_logs_back(busy_history):
    a, _b = busy_history
    Node.objects.filter(pk=a.pk).update(state="online", tier="rtx-5090")
    assert sorted(node_problems()) == [
        f"nodes: node {a.pk} state: the table says 'online', the log says 'draining'",
        f"nodes: node {a.pk} tier: the table says 'rtx-5090', the log says 'rtx-4090'",
    ]


def test_it_reports_a_node_whose_ownership_names_another_operator(busy_history, mallory):
    a, _b = busy_history
    Ownership.objects.filter(node_id=a.pk).update(operator=mallory)
    assert node_problems() == [
        f"nodes: node {a.pk} belongs to operator {a.operator_id}, its ownership row says "
        f"{mallory.pk}"
    ]
    Ownership.objects.filter(node_id=a.pk).delete()
    assert node_problems() == [
        f"nodes: node {a.pk} belongs to operator {a.operator_id}, its ownership row says None"
    ]


def test_it_counts_nodes_by_state_in_the_metrics(busy_history, client):
    text = client.get(reverse("metrics")).content.decode()
    by_state = Counter()
    for family in text_string_to_metric_families(text):
        if family.name == "computepool_nodes":
            for sample in family.samples:
                by_state[sample.labels["state"]] += sample.value
    assert by_state["draining"] == 1 and by_state["retired"] == 1
    assert by_state["online"] == 0 and "online" in by_state
