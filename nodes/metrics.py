"""The nodes' figures for /metrics (docs/metrics.md): the fleet as its heartbeats describe it,
read by two cached grouped queries, and what the reaper and quarantine do, counted where they
do it."""

from collections.abc import Iterable

from django.db import connection
from django.utils import timezone

from core.metrics import SECONDS_FAST, cached, counter, histogram
from core.sql import statement
from nodes.models import LIVE_STATES, NodeState

Samples = Iterable[tuple[dict[str, str], float]]

REAPED = histogram(
    "computepool_node_reaper_batch_size",
    "Nodes one node reaper batch moved, by the state it moved them to (degraded, offline).",
    (1, 5, 10, 50, 100, 250, 500, 1000, 5000),
    ["to"],
)
REAP_SECONDS = histogram(
    "computepool_node_reaper_seconds", "How long one node reaper run took.", SECONDS_FAST
)
QUARANTINED = counter(
    "computepool_nodes_quarantined_total",
    "Nodes quarantined, by rule (driver_blocklisted, thermal_throttling, error_rate, "
    "results_rejected, vram_mismatch, admin).",
    ["rule"],
)


@cached
def _nodes() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            statement("nodes", "fleet_nodes"), {"now": timezone.now(), "live": list(LIVE_STATES)}
        )
        return cursor.fetchall()


@cached
def _gpus() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(statement("nodes", "fleet_gpus"), {"live": list(LIVE_STATES)})
        return cursor.fetchall()


def node_samples() -> Samples:
    rows = _nodes()
    samples = [
        ({"state": state, "tier": tier, "region": region}, count)
        for state, tier, region, count, *_ in rows
    ]
    # Every state appears, at 0 when no node is in it, so a query over it never sees a gap.
    seen = {row[0] for row in rows}
    samples += [
        ({"state": state, "tier": "", "region": ""}, 0)
        for state in NodeState.values
        if state not in seen
    ]
    return samples


def heartbeat_lag_samples() -> Samples:
    worst: dict[str, float] = {}
    weighted: dict[str, tuple[float, int]] = {}
    for state, _, _, _, most, mean, beating in _nodes():
        if most is None:  # not in service, or never beat
            continue
        worst[state] = max(worst.get(state, 0.0), float(most))
        total, n = weighted.get(state, (0.0, 0))
        weighted[state] = (total + float(mean) * beating, n + beating)
    return [({"state": s, "stat": "max"}, v) for s, v in sorted(worst.items())] + [
        ({"state": s, "stat": "mean"}, total / n) for s, (total, n) in sorted(weighted.items())
    ]


def gpu_count_samples() -> Samples:
    return [({"tier": tier}, count) for tier, count, *_ in _gpus()]


def _stat_samples(columns: slice) -> Samples:
    samples = []
    for tier, _, *figures in _gpus():
        most, mean = figures[columns]
        if most is not None:
            samples += [
                ({"tier": tier, "stat": "max"}, most),
                ({"tier": tier, "stat": "mean"}, mean),
            ]
    return samples


def gpu_temperature_samples() -> Samples:
    return _stat_samples(slice(0, 2))


def gpu_utilization_samples() -> Samples:
    return _stat_samples(slice(2, 4))
