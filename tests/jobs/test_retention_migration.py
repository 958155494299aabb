"""Migration jobs 0012 adds retention: a job that ended before it keeps its outputs one
retention period from the upgrade, not from its end, so the upgrade deletes nothing at once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.retention import artifacts_expire
from tests.jobs.conftest import claim, complete, job_body, online_node
from tests.migrations import migrated_back_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("jobs", "0011_verification")]


def test_jobs_that_ended_before_retention_keep_their_outputs_from_the_upgrade(
    submitter, bob, settings
):
    settings.JOB_ARTIFACT_RETENTION_DAYS = 30
    ended = submitter.post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    running = submitter.post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    _, agent = online_node(bob)
    assert complete(agent, claim(agent).json()).status_code == 200
    # It ended long ago: a deadline counted from its end would have passed already.
    Job.objects.filter(pk=ended).update(finished_at=timezone.now() - timedelta(days=400))
    with migrated_back_to(BEFORE):
        pass
    upgraded = timezone.now()
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=[ended, running])}
    assert jobs[ended].retention_days == 30
    assert jobs[ended].artifacts_expire_at >= upgraded - timedelta(minutes=5) + timedelta(days=30)
    assert jobs[running].finished_at is None and jobs[running].artifacts_expire_at is None
    assert artifacts_expire() == 0
