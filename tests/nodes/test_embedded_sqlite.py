"""The nodes' hand-written SQL (UPDATE … RETURNING, the decay's elapsed seconds) also runs on
the embedded SQLite default, where the demo's reaper and decay run."""

from tests.embedded import embedded_migrated, script_lines

SCRIPT = """
import os, sys
sys.path.insert(0, os.getcwd())
import django
django.setup()
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from ledger.verify import verify_ledger
from nodes.models import Node
from nodes.services import (node_heartbeat, node_record_outcome, node_register, nodes_reap,
                            nodes_reliability_decay)

operator = get_user_model().objects.create_user("op")
nodes = [node_register(operator=operator, name=f"n{i}", region="IN", actor="test",
                       capabilities={"gpus": [], "ram_mb": 1024})[0] for i in range(3)]
now = timezone.now()
for node in nodes:
    node_heartbeat(node=node, status="available", load={}, gpus=[], lease_tokens=[], now=now)
node_record_outcome(node_id=nodes[0].pk, success=True, now=now)
print("degraded", tuple(nodes_reap(now=now + timedelta(seconds=40))))
print("offline", tuple(nodes_reap(now=now + timedelta(seconds=200))))
print("again", tuple(nodes_reap(now=now + timedelta(seconds=200))))
print("decayed", nodes_reliability_decay(now=now + timedelta(days=7)))
print("alpha", round(Node.objects.get(pk=nodes[0].pk).rel_alpha, 3))
print("problems", [p for p in verify_ledger(check_chain=False).problems if p.startswith("nodes")])
"""


def test_it_reaps_and_decays_on_the_embedded_sqlite(tmp_path):
    env = embedded_migrated(
        tmp_path,
        NODE_HEARTBEAT_INTERVAL_S="30",
        NODE_HEARTBEAT_GRACE_S="5",
        NODE_RELIABILITY_HALF_LIFE_H="168",
    )
    assert script_lines(SCRIPT, env) == [
        "degraded (3, 0)",
        "offline (0, 3)",
        "again (0, 0)",
        "decayed 1",
        "alpha 1.5",
        "problems []",
    ]
