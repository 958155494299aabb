"""Concurrent successes on one node, each thread with its own PostgreSQL connection: the
compare-and-set loses none of them."""

import threading

import pytest
from django.db import connection

from nodes.models import PRIOR_ALPHA, Node
from nodes.services import node_record_outcome
from tests.nodes.test_reliability import T0

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS, EACH = 8, 25


def test_concurrent_successes_on_one_node_all_count(bobs_node):
    node, _ = bobs_node
    Node.objects.filter(pk=node.pk).update(reliability_at=T0, consecutive_failures=2)
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def slot() -> None:
        try:
            barrier.wait(30)
            for _ in range(EACH):
                # One moment for all: no decay between them, so every success adds exactly 1.
                node_record_outcome(node_id=node.pk, success=True, now=T0)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=slot) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    node.refresh_from_db()
    assert node.rel_alpha == PRIOR_ALPHA + THREADS * EACH
    assert node.consecutive_failures == 0
    assert node.reliability == pytest.approx(node.rel_alpha / (node.rel_alpha + node.rel_beta))
