"""A job's last task finishes it (the count and the finish are one statement), in the state the
rule names: cancelled if any task was cancelled, else failed if any failed, else succeeded."""

import itertools

import pytest
from django.utils import timezone

from jobs.attempts import job_count_finished
from jobs.models import Job
from ledger.models import Event
from tests.jobs.conftest import CREDITS, fund, submit_job

pytestmark = pytest.mark.postgres

SLICES = 3
_COUNTERS = ("tasks_succeeded", "tasks_failed", "tasks_cancelled")


def _endings():
    """Every way SLICES tasks can end, with the counter of the task reported last."""
    for counts in itertools.product(range(SLICES + 1), repeat=3):
        if sum(counts) == SLICES:
            for last, n in zip(_COUNTERS, counts, strict=True):
                if n:
                    yield dict(zip(_COUNTERS, counts, strict=True)), last


def _final(counts: dict[str, int]) -> str:
    if counts["tasks_cancelled"]:
        return "cancelled"
    return "failed" if counts["tasks_failed"] else "succeeded"


def test_the_statement_ends_each_job_as_the_rule_says(alice):
    fund(alice, 10_000_000 * CREDITS)
    endings = list(_endings())
    assert len(endings) == 18  # the ten mixes of three outcomes, each present outcome last
    for counts, last in endings:
        job = submit_job(alice.pk, SLICES)
        before = {name: counts[name] - (name == last) for name in _COUNTERS}
        Job.objects.filter(pk=job.pk).update(**before)
        final = job_count_finished(job.pk, last, timezone.now())
        expected = _final(counts)
        assert final == expected, (counts, last)
        job.refresh_from_db()
        assert job.state == expected and job.finished_at is not None
        finished = Event.objects.get(stream=f"job:{job.pk}", type="JobFinished").payload
        assert (finished["state"], finished["cancelled"]) == (expected, counts["tasks_cancelled"])


def test_a_count_short_of_the_last_task_finishes_nothing(alice):
    fund(alice, 10_000_000 * CREDITS)
    job = submit_job(alice.pk, SLICES)
    assert job_count_finished(job.pk, "tasks_failed", timezone.now()) is None
    job.refresh_from_db()
    assert (job.state, job.tasks_failed) == ("queued", 1)
