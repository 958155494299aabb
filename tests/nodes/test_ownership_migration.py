"""Migration nodes 0006 moves the operator's index to a table of its own: every node has its
ownership row after it, and the node's own index is back when it is reversed."""

import pytest
from django.db import connection

from nodes.models import Ownership
from nodes.selectors import node_list
from tests.migrations import migrated_back_to
from tests.nodes.conftest import register_node

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("nodes", "0005_agent_key_table")]


def _node_indexes() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.get_constraints(cursor, "nodes_node"))


def test_the_owners_move_to_their_table_and_the_index_comes_back(bob, mallory):
    nodes = [register_node(owner, name=f"rig-{i}")[0] for i, owner in enumerate([bob, mallory])]
    nodes.append(register_node(bob, name="rig-2")[0])
    assert "node_operator_id" not in _node_indexes()
    with migrated_back_to(BEFORE):
        assert "node_operator_id" in _node_indexes()
        assert "nodes_ownership" not in connection.introspection.table_names()
    # The rows the migration copied, from the nodes as they were before it.
    assert dict(Ownership.objects.values_list("node_id", "operator_id")) == {
        n.pk: n.operator_id for n in nodes
    }
    assert [n.pk for n in node_list(operator=bob).order_by("-id")] == [nodes[2].pk, nodes[0].pk]
