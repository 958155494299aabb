"""The reaper over a large silent fleet: every node moved, one event each, in one transaction.

Runs 2,000 nodes by default; set NODES_REAPER_SCALE=100000 to measure the figure in
docs/nodes.md (the time is printed; run with -s to see it).
"""

import os
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from ledger.models import Event
from nodes.models import Node
from nodes.services import nodes_reap

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SIZE = int(os.environ.get("NODES_REAPER_SCALE", "2000"))


def seed_silent_nodes(operator_id: int, size: int) -> None:
    """`size` online nodes whose last heartbeat was at T0, written in one statement."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO nodes_node (
              operator_id, name, region, state, state_changed_at, event_version, created_at,
              price_floor,
              agent_key_prefix, tier, claimed_tier, confirmed_tier, measured, gpu_count, gpu_name,
              gpu_vendor,
              driver_version, fp16_ok, avx2, avx512, sandboxes, agent_version, capabilities,
              load, gpu_state, throttled, thermal_events, rel_alpha, rel_beta, reliability,
              reliability_at, consecutive_failures, quarantine_rule, quarantine_reason,
              last_heartbeat_at, degraded_after, offline_after)
            SELECT %s, 'n' || g, 'IN', 'online', %s, 0, %s, 0,
              'cpa_', 'rtx-4090', 'rtx-4090', '', '{}', 1, '', 'nvidia', '550.54.14', true, true,
              false, '[]', '',
              '{}', '{}', '[]', false, '[]', 1, 1, 0.5, %s, 0, '', '', %s, %s, %s
            FROM generate_series(1, %s) AS g
            """,
            [
                operator_id,
                T0,
                T0,
                T0,
                T0,
                T0 + timedelta(seconds=35),
                T0 + timedelta(seconds=95),
                size,
            ],
        )
        cursor.execute("ANALYZE nodes_node")


def test_it_takes_a_large_silent_fleet_offline_in_one_pass(pg, bob):
    seed_silent_nodes(bob.pk, SIZE)
    started = time.perf_counter()
    result = nodes_reap(now=T0 + timedelta(minutes=5))
    elapsed = time.perf_counter() - started
    print(f"\nnodes_reap: {SIZE} silent nodes → offline in {elapsed:.3f} s")
    assert tuple(result) == (0, SIZE)
    assert Node.objects.filter(state="offline", event_version=1).count() == SIZE
    events = Event.objects.filter(stream__startswith="node:", actor="system:reaper")
    assert events.count() == SIZE
    # The COPY path stamps the writing transaction like an INSERT does (the sealer needs it).
    assert not events.filter(txid__isnull=True).exists()
    assert set(events.values_list("version", flat=True)) == {1}
    assert nodes_reap(now=T0 + timedelta(minutes=5)) == (0, 0)
