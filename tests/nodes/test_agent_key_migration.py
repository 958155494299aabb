"""Migration nodes 0005 moves every agent key's hash out of the node's table, and back when it
is reversed: no node loses the key its agent holds."""

import pytest
from django.db import connection

from nodes.auth import resolve_agent_key
from people.keys import hash_key
from tests.migrations import migrated_back_to
from tests.nodes.conftest import register_node

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("nodes", "0004_node_price_floor")]


def test_the_keys_move_to_their_table_and_back(bob):
    nodes = [register_node(bob, name=f"rig-{i}") for i in range(3)]
    with migrated_back_to(BEFORE), connection.cursor() as cursor:
        cursor.execute("SELECT id, agent_key_hash FROM nodes_node")
        assert dict(cursor.fetchall()) == {n.pk: hash_key(key) for n, key in nodes}
    for node, key in nodes:
        assert resolve_agent_key(key)[1].pk == node.pk
