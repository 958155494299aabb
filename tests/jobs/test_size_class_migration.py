"""Migration jobs 0007 turns the task's generated size class into a column its insert trigger
sets: every task keeps its class, and tasks inserted after it get theirs."""

import pytest
from django.db import connection

from jobs.models import Task
from jobs.size_class import task_size_class
from tests.jobs.conftest import job_body
from tests.migrations import migrated_back_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("jobs", "0006_job_cancel_requested_at")]
SIZES = [(1, 256), (2, 2048), (3, 3000), (64, 4_194_304)]


def _classes() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, size_class FROM jobs_task")
        return dict(cursor.fetchall())


def _submit(client, cores: int, ram_mb: int) -> None:
    body = job_body(requirements={"cpu_cores": cores, "ram_mb": ram_mb}, slices=2)
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.json()


def _expected() -> dict[int, int]:
    return {
        t.pk: task_size_class(t.cpu_cores, t.ram_mb, t.gpu_count)
        for t in Task.objects.only("cpu_cores", "ram_mb", "gpu_count")
    }


def test_tasks_keep_their_classes_and_new_ones_get_theirs(submitter):
    for cores, ram_mb in SIZES[:2]:
        _submit(submitter, cores, ram_mb)
    with migrated_back_to(BEFORE):
        before = _classes()  # the generated column's
    assert before == _expected()
    assert _classes() == before  # written once by the migration, the same
    for cores, ram_mb in SIZES[2:]:
        _submit(submitter, cores, ram_mb)
    assert _classes() == _expected()
    assert len(set(_classes().values())) == len(SIZES)
