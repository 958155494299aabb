"""A plain heartbeat commits without waiting for the WAL's flush, and only its own transaction:
the setting neither outlives the beat on its connection nor reaches a caller's transaction."""

import pytest
from django.db import connection, transaction

from nodes.models import Node
from nodes.services import node_heartbeat
from tests.pgsession import setting
from tests.pgsession import sql as _sql

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _beat(node: Node) -> None:
    node_heartbeat(node=node, status="available", load={}, gpus=[], lease_tokens=[])


def _setting() -> str:
    return setting("synchronous_commit")


def test_a_plain_beat_commits_lazily_and_only_itself(bobs_node):
    node, _ = bobs_node
    _beat(node)  # offline → online: a transition, with its event
    before = Node.objects.get(pk=node.pk).last_heartbeat_at
    _sql("SET synchronous_commit = on")  # whatever the server's default: the beat's differs
    statements: list[tuple[str, dict]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    try:
        with connection.execute_wrapper(capture):
            _beat(node)
        setting = _setting()
    finally:
        _sql("RESET synchronous_commit")
    ((sql, params),) = statements
    assert "commit_lazily(%(lazy)s)" in sql and params["lazy"] is True
    assert Node.objects.get(pk=node.pk).last_heartbeat_at > before
    assert setting == "on"  # local to the beat's transaction: the session keeps its own


def test_a_beat_inside_a_transaction_leaves_its_commit_alone(bobs_node):
    node, _ = bobs_node
    _beat(node)
    with transaction.atomic():
        _sql("SET LOCAL synchronous_commit = on")
        _beat(node)
        assert _setting() == "on"


def test_a_beat_with_autocommit_off_leaves_its_commit_alone(bobs_node):
    node, _ = bobs_node
    _beat(node)
    connection.set_autocommit(False)  # the caller's transaction, outside any atomic block
    try:
        _sql("SET LOCAL synchronous_commit = on")
        _beat(node)
        assert _setting() == "on"
        connection.commit()
    finally:
        connection.set_autocommit(True)
