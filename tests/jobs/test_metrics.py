"""The queue, claims, dispatch, outcomes, money and the lease reaper as /metrics shows them."""

from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.leases import leases_reap
from ledger.models import Event
from ledger.settlement import job_held_balance
from tests.core.scraping import scrape, total, value
from tests.jobs.conftest import claim, complete, fail, online_node, submit_job

pytestmark = pytest.mark.django_db


def grew(before, after, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_the_queue_and_the_holds_read_live_work(client, submitter, alice, bob):
    job = submit_job(alice.pk, 3)
    found = scrape(client)
    assert total(found, "computepool_tasks", state="queued") == 3
    assert value(found, "computepool_tasks", state="queued", size_class="cpu-1c-512m") == 3
    assert value(found, "computepool_holds_outstanding") == 1
    assert value(found, "computepool_holds_outstanding_minor") == job_held_balance(job.pk) > 0
    _, agent = online_node(bob)
    assert claim(agent).status_code == 200
    found = scrape(client)
    assert total(found, "computepool_tasks", state="queued") == 2
    assert total(found, "computepool_tasks", state="leased") == 1


def test_claims_outcomes_and_money_are_counted_once_committed(
    client, submitter, alice, bob, django_capture_on_commit_callbacks
):
    job = submit_job(alice.pk, 2)
    _, agent = online_node(bob)
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        first, second = claim(agent).json(), claim(agent).json()
        assert claim(agent).status_code == 204  # nothing left
        # A minute's work, so that each attempt costs something and pays a fee.
        with time_machine.travel(timezone.now() + timedelta(seconds=60)):
            assert complete(agent, first).status_code == 200
            assert fail(agent, second, failure_class="job", exit_code=3).status_code == 200
    after = scrape(client)
    assert grew(before, after, "computepool_claims_total", result="leased") == 2
    assert grew(before, after, "computepool_claims_total", result="empty") == 1
    assert grew(before, after, "computepool_claim_seconds_count") == 3
    assert grew(before, after, "computepool_dispatch_seconds_count") == 2
    outcomes = "computepool_attempts_total"
    assert grew(before, after, outcomes, outcome="succeeded", failure_class="") == 1
    assert grew(before, after, outcomes, outcome="failed", failure_class="job") == 1
    job.refresh_from_db()
    assert grew(before, after, "computepool_jobs_finished_total", state=job.state) == 1
    # The fee and the operators' share are what the settlements' events say they were.
    settled = [
        e.payload for e in Event.objects.filter(type="AttemptSettled", payload__job_id=job.pk)
    ]
    credited = "computepool_ledger_credited_minor_total"
    kinds = {"entry_kind": "settlement", "currency": "CRD"}
    fee = grew(before, after, credited, account_kind="revenue", **kinds)
    share = grew(before, after, credited, account_kind="earnings", **kinds)
    assert fee == sum(p["fee_minor"] for p in settled) > 0
    assert share == sum(p["operator_minor"] for p in settled) > 0
    assert total(after, "computepool_tasks", state="leased") == 0
    assert value(after, "computepool_holds_outstanding") == 0


def test_nothing_is_counted_for_a_report_that_rolls_back(client, submitter, alice, bob):
    # A test's transaction never commits: what waits for the commit is not counted.
    submit_job(alice.pk, 1)
    _, agent = online_node(bob)
    lease = claim(agent).json()
    before = scrape(client)
    assert complete(agent, lease).status_code == 200
    after = scrape(client)
    succeeded = {"outcome": "succeeded", "failure_class": ""}
    assert grew(before, after, "computepool_attempts_total", **succeeded) == 0
    assert grew(before, after, "computepool_ledger_entries_total", kind="settlement") == 0


def test_the_lease_reaper_counts_its_batch_and_alerts_when_many_leases_go(
    client, submitter, alice, bob, dave, celery_queue, django_capture_on_commit_callbacks
):
    settings.ALERT_LEASES_LOST_AT = 2
    submit_job(alice.pk, 2)
    _, agent = online_node(bob)
    claim(agent), claim(agent)
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        assert leases_reap(now=timezone.now() + timedelta(hours=1)) == 2
    after = scrape(client)
    lost = {"outcome": "requeued", "failure_class": "lease_expired"}
    assert grew(before, after, "computepool_attempts_total", **lost) == 2
    batch = {"reason": "lease_expired"}
    assert grew(before, after, "computepool_lease_reaper_batch_size_count", **batch) == 1
    assert grew(before, after, "computepool_lease_reaper_batch_size_sum", **batch) == 2
    assert grew(before, after, "computepool_lease_reaper_seconds_count") == 1
    assert grew(before, after, "computepool_alerts_total", kind="leases_lost") == 1
    (queued,) = celery_queue()
    assert queued.task == "core.alert_mail" and queued.args[0] == "leases_lost"


def test_a_reaper_run_below_the_threshold_alerts_nobody(
    client, submitter, alice, bob, celery_queue, django_capture_on_commit_callbacks
):
    submit_job(alice.pk, 1)
    _, agent = online_node(bob)
    claim(agent)
    with django_capture_on_commit_callbacks(execute=True):
        assert leases_reap(now=timezone.now() + timedelta(hours=1)) == 1
    assert celery_queue() == []


def test_a_scrape_reads_no_history_and_caches_its_queries(client, submitter, alice, settings):
    submit_job(alice.pk, 2)
    history = ('"jobs_task"', '"jobs_attempt"', '"ledger_account"', '"ledger_cashout"')
    with CaptureQueriesContext(connection) as queries:
        scrape(client)
    read = [q["sql"] for q in queries if any(t in q["sql"] for t in history)]
    assert read
    assert all("WHERE" in sql for sql in read), read
    settings.METRICS_CACHE_S = 60
    scrape(client)  # fills the cache
    with CaptureQueriesContext(connection) as queries:
        found = scrape(client)
    assert not [q for q in queries if any(t in q["sql"] for t in history)]
    assert total(found, "computepool_tasks", state="queued") == 2


def test_a_lease_handed_back_is_counted_as_requeued(
    client, submitter, alice, bob, django_capture_on_commit_callbacks
):
    submit_job(alice.pk, 1)
    _, agent = online_node(bob)
    lease = claim(agent).json()
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        answer = agent.post(
            f"/api/v1/agent/attempts/{lease['attempt_id']}/hand-back",
            {"lease_token": lease["lease_token"], "reason": "the owner is gaming"},
            format="json",
        )
    assert answer.status_code == 200, answer.content
    after = scrape(client)
    back = {"outcome": "requeued", "failure_class": "handed_back"}
    assert grew(before, after, "computepool_attempts_total", **back) == 1
    assert total(after, "computepool_tasks", state="queued") == 1
