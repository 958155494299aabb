"""A plain heartbeat commits without waiting for the WAL's flush, and only its own transaction:
the setting neither outlives the beat on its connection nor reaches a caller's transaction."""

import pytest
from django.db import connection, transaction

from nodes.models import Node
from nodes.services import node_heartbeat

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _beat(node: Node) -> None:
    node_heartbeat(node=node, status="available", load={}, gpus=[], lease_tokens=[])


def _setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_a_plain_beat_commits_lazily_and_only_itself(bobs_node):
    node, _ = bobs_node
    _beat(node)  # offline → online: a transition, with its event
    before = Node.objects.get(pk=node.pk).last_heartbeat_at
    statements: list[str] = []

    def capture(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        _beat(node)
    assert len(statements) == 1
    assert "set_config('synchronous_commit', 'off', true)" in statements[0]
    assert Node.objects.get(pk=node.pk).last_heartbeat_at > before
    assert _setting() == "on"  # local to the beat's transaction: the session keeps its own


def test_a_beat_inside_a_transaction_leaves_its_commit_alone(bobs_node):
    node, _ = bobs_node
    _beat(node)
    with transaction.atomic():
        _beat(node)
        assert _setting() == "on"
