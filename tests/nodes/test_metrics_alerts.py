"""The fleet in /metrics, the node reaper's batches, and the admins told of quarantines."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from nodes.models import DriverBlock
from nodes.services import nodes_reap
from nodes.services.quarantine import Rule, driver_blocks_enforce, node_quarantine
from tests.conftest import client_with_key
from tests.core.alerting import webhook_receiver
from tests.core.scraping import scrape, value
from tests.nodes.conftest import beat, register_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def admins(dave, alice):
    """dave (an admin) and alice (a submitter) both with addresses: only dave is mailed."""
    users = get_user_model().objects
    users.filter(pk=dave.pk).update(email="dave@example.com")
    users.filter(pk=alice.pk).update(email="alice@example.com")


@pytest.fixture
def webhook(settings):
    """The bodies the admins' webhook receiver got."""
    with webhook_receiver() as (got, url):
        settings.ALERT_WEBHOOK_URL = url
        yield got


def test_a_blocked_driver_is_counted_and_mailed_to_the_admins(
    client, bob, admins, celery_queue, mailoutbox, django_capture_on_commit_callbacks
):
    node, _ = register_node(bob)
    DriverBlock.objects.create(pattern="550.54.*", reason="corrupts fp16 results")
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        assert driver_blocks_enforce(actor="user:admin") == 1
    after = scrape(client)
    rule = {"rule": "driver_blocklisted"}
    assert value(after, "computepool_nodes_quarantined_total", **rule) == (
        value(before, "computepool_nodes_quarantined_total", **rule) + 1
    )
    queued = celery_queue()
    assert [q.task for q in queued] == ["core.alert_mail"]  # no webhook configured
    assert queued[0].run() == 1
    (mail,) = mailoutbox
    assert mail.to == ["dave@example.com"]
    assert mail.subject == f"[ComputePool] Blocked GPU driver seen on node {node.pk}"
    assert "corrupts fp16 results" in mail.body and "550.54.14" in mail.body


def test_a_quarantine_goes_to_the_webhook_and_the_configured_addresses(
    settings, bob, admins, webhook, celery_queue, mailoutbox, django_capture_on_commit_callbacks
):
    settings.ALERT_EMAILS = ["ops@example.com"]
    node, _ = register_node(bob)
    with django_capture_on_commit_callbacks(execute=True):
        node_quarantine(node=node, rule=Rule.ERROR_RATE, reason="9% errors", actor="system")
    for queued in celery_queue():
        queued.run()
    assert [m.to for m in mailoutbox] == [["ops@example.com"]]
    (posted,) = webhook
    assert posted["kind"] == "node_quarantined"
    assert posted["subject"] == f"[ComputePool] Node {node.pk} quarantined (error_rate)"
    assert "9% errors" in posted["body"] and posted["sent_at"]


def test_a_quarantine_that_rolls_back_tells_nobody(
    bob, admins, celery_queue, django_capture_on_commit_callbacks
):
    node, _ = register_node(bob)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            node_quarantine(node=node, rule=Rule.ADMIN, reason="checking", actor="user:1")
            raise RuntimeError("the caller's change failed")
    assert callbacks == [] and celery_queue() == []


def test_the_fleet_gauges_read_the_last_heartbeats(client, bob):
    for name, temperature, utilization in (("a", 71, 80), ("b", 55, 20)):
        _, key = register_node(bob, name=name)
        gpus = [{"index": 0, "temperature_c": temperature, "utilization_pct": utilization}]
        assert beat(client_with_key(key), gpus=gpus).status_code == 200
    found = scrape(client)
    tier = {"tier": "rtx-4090"}
    assert value(found, "computepool_gpus", **tier) == 2
    assert value(found, "computepool_gpu_temperature_celsius", stat="max", **tier) == 71
    assert value(found, "computepool_gpu_temperature_celsius", stat="mean", **tier) == 63
    assert value(found, "computepool_gpu_utilization_percent", stat="max", **tier) == 80
    assert value(found, "computepool_gpu_utilization_percent", stat="mean", **tier) == 50
    assert value(found, "computepool_nodes", state="online", region="IN", **tier) == 2
    lag = value(found, "computepool_node_heartbeat_lag_seconds", state="online", stat="max")
    assert 0 <= lag < 30


def test_a_node_reaper_run_counts_its_batch_and_its_time(client, bob):
    for name in ("a", "b"):
        _, key = register_node(bob, name=name)
        beat(client_with_key(key))
    before = scrape(client)
    result = nodes_reap(now=timezone.now() + timedelta(hours=1))
    after = scrape(client)
    assert result.offline == 2
    offline = {"to": "offline"}
    for sample, grew in (("_count", 1), ("_sum", 2)):
        name = f"computepool_node_reaper_batch_size{sample}"
        assert value(after, name, **offline) == value(before, name, **offline) + grew
    runs = "computepool_node_reaper_seconds_count"
    assert value(after, runs) == value(before, runs) + 1
    assert value(after, "computepool_nodes", state="offline", tier="rtx-4090", region="IN") == 2
