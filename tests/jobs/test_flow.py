import pytest

from jobs.models import Job, Task
from ledger.verify import verify_ledger
from tests.jobs.conftest import claim, complete, fail, job_body, online_node

pytestmark = pytest.mark.django_db


def test_a_job_runs_from_submission_to_settlement(submitter, bob, alice):
    created = submitter.post("/api/v1/jobs/", job_body(slices=2), format="json")
    assert created.status_code == 201, created.json()
    job_id = created.json()["id"]
    _, agent = online_node(bob)
    first = claim(agent)
    assert first.status_code == 200, first.content
    lease = first.json()
    assert lease["spec"]["slice_count"] == 2
    done = complete(agent, lease, want_next=True)
    assert done.status_code == 200, done.json()
    nxt = done.json()["next"]
    assert nxt is not None and nxt["spec"]["slice_index"] != lease["spec"]["slice_index"]
    assert complete(agent, nxt).status_code == 200
    job = Job.objects.get(pk=job_id)
    assert job.state == "succeeded" and job.tasks_succeeded == 2
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_a_stale_token_changes_nothing(submitter, bob):
    submitter.post("/api/v1/jobs/", job_body(), format="json")
    _, agent = online_node(bob)
    lease = claim(agent).json()
    forged = {**lease, "lease_token": "not-the-token"}
    response = complete(agent, forged)
    assert response.status_code == 409
    assert response.json()["error"] == "stale_lease"
    assert Task.objects.get().state == "leased"
    assert fail(agent, lease).status_code == 200
    assert complete(agent, lease).status_code == 409
