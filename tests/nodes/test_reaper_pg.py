"""Two reapers at once on PostgreSQL, each in its own connection: every node moves once, with one
event, and its leases' hook sees it once."""

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction

from ledger.models import Event
from nodes import hooks
from nodes.models import Node
from nodes.services import liveness, nodes_reap
from tests.nodes.test_reaper_scale import T0, seed_silent_nodes

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SIZE = 3000


def test_two_reapers_at_once_move_each_node_once(bob, monkeypatch):
    seed_silent_nodes(bob.pk, SIZE)
    monkeypatch.setattr(liveness, "REAP_BATCH", 250)  # many batches, so the two interleave
    seen: Counter[int] = Counter()
    lock = threading.Lock()

    def reclaim(node_ids):
        with lock:
            seen.update(node_ids)

    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def reaper() -> None:
        try:
            barrier.wait(30)
            results.append(tuple(nodes_reap(now=T0 + timedelta(minutes=5))))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    hooks.register_offline_hook(reclaim)
    try:
        threads = [threading.Thread(target=reaper) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        hooks.unregister(reclaim)
    assert not errors, errors
    assert sum(offline for _, offline in results) == SIZE
    assert all(degraded == 0 for degraded, _ in results)
    assert set(seen.values()) == {1} and len(seen) == SIZE
    assert Node.objects.filter(state="offline", event_version=1).count() == SIZE
    events = Event.objects.filter(stream__startswith="node:", actor="system:reaper")
    assert events.count() == SIZE
    assert set(events.values_list("version", flat=True)) == {1}
    assert nodes_reap(now=T0 + timedelta(minutes=5)) == (0, 0)


def test_a_node_whose_row_a_heartbeat_holds_is_left_to_the_heartbeat(bob):
    seed_silent_nodes(bob.pk, 3)
    held = Node.objects.order_by("id").first()
    locked, release = threading.Event(), threading.Event()

    def heartbeat() -> None:
        """A beat that landed just now: its UPDATE holds the row until it commits."""
        try:
            with transaction.atomic():
                Node.objects.filter(pk=held.pk).update(
                    offline_after=T0 + timedelta(hours=1), degraded_after=T0 + timedelta(hours=1)
                )
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    beat = threading.Thread(target=heartbeat)
    beat.start()
    try:
        assert locked.wait(30)
        assert nodes_reap(now=T0 + timedelta(minutes=5)) == (0, 2)
    finally:
        release.set()
        beat.join(30)
    assert Node.objects.get(pk=held.pk).state == "online"
    assert not Event.objects.filter(stream=f"node:{held.pk}").exists()
    assert nodes_reap(now=T0 + timedelta(minutes=5)) == (0, 0)  # its deadline moved on


def test_one_reap_on_three_connections_moves_each_node_once_offline(bob, monkeypatch, settings):
    seed_silent_nodes(bob.pk, SIZE)
    monkeypatch.setattr(liveness, "REAP_BATCH", 200)
    settings.NODE_REAPER_WORKERS = 3
    threads: set[str] = set()
    real = liveness.transition_due_logged

    def spy(**kwargs):
        threads.add(threading.current_thread().name)
        return real(**kwargs)

    monkeypatch.setattr(liveness, "transition_due_logged", spy)
    # Past both deadlines: offline in one step, never degraded first.
    assert tuple(nodes_reap(now=T0 + timedelta(minutes=5))) == (0, SIZE)
    assert len({name for name in threads if name.startswith("reaper")}) == 3
    assert Node.objects.filter(state="offline", event_version=1).count() == SIZE
    assert Event.objects.filter(stream__startswith="node:", actor="system:reaper").count() == SIZE
    assert tuple(nodes_reap(now=T0 + timedelta(minutes=5))) == (0, 0)


def test_a_node_held_by_a_completion_is_not_degraded_on_its_way_offline(bob, monkeypatch):
    """The offline pass skips a row another transaction holds (a completion records its node's
    success first). If that transaction ends before the degraded pass, the degraded pass must
    not take the node, past both deadlines, for a merely late one: the next reap takes it
    offline, with one event."""
    seed_silent_nodes(bob.pk, 3)
    held = Node.objects.order_by("id").first()
    holding, done = threading.Event(), threading.Event()

    def completion() -> None:
        try:
            with transaction.atomic():
                Node.objects.select_for_update().get(pk=held.pk)
                holding.set()
                done.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=completion)
    real = liveness.transition_due_logged

    def between_the_passes(**kwargs):
        if kwargs["to_state"] == "degraded" and not done.is_set():
            done.set()  # the completion commits after the offline pass, before this one
            thread.join(30)
        return real(**kwargs)

    monkeypatch.setattr(liveness, "transition_due_logged", between_the_passes)
    thread.start()
    assert holding.wait(10)
    try:
        first = tuple(nodes_reap(now=T0 + timedelta(minutes=5)))
    finally:
        done.set()
        thread.join(30)
    assert first == (0, 2)
    assert Node.objects.get(pk=held.pk).state == "online"
    assert tuple(nodes_reap(now=T0 + timedelta(minutes=5))) == (0, 1)
    held.refresh_from_db()
    assert (held.state, held.event_version) == ("offline", 1)
