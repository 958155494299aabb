"""Migration jobs 0006 adds the job's cancel flag: a job cancelled before it gets the time of
its first JobCancelRequested from the log, and verify_ledger agrees with the result."""

import pytest
from django.db import connection

from jobs.models import Job
from ledger.models import Event
from ledger.verify import verify_ledger
from tests.jobs.conftest import job_body
from tests.migrations import migrated_back_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("jobs", "0005_task_size_class_gpu")]


def _columns() -> set[str]:
    with connection.cursor() as cursor:
        return {c.name for c in connection.introspection.get_table_description(cursor, "jobs_job")}


def test_jobs_cancelled_before_the_flag_get_it_from_the_log(submitter):
    ids = [submitter.post("/api/v1/jobs/", job_body(), format="json").json()["id"] for _ in "ab"]
    assert submitter.post(f"/api/v1/jobs/{ids[0]}/cancel").status_code == 200
    requested = Event.objects.get(type="JobCancelRequested").recorded_at
    with migrated_back_to(BEFORE):
        assert "cancel_requested_at" not in _columns()
    assert dict(Job.objects.values_list("id", "cancel_requested_at")) == {
        ids[0]: requested,
        ids[1]: None,
    }
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems
