"""Cancelling a job: its queued tasks end in a few statements, each with its event, and a
task whose lease is lost after the cancel ends cancelled instead of running again."""

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.cancellation import job_cancel
from jobs.leases import leases_reap
from jobs.models import Job, Task
from ledger.models import Event
from ledger.verify import verify_ledger
from tests.jobs.conftest import CREDITS, claim, fail, fund, job_body, online_node, submit_job


def test_a_large_cancel_is_a_few_statements_and_an_event_per_task(alice):
    fund(alice, 10_000_000 * CREDITS)
    job = submit_job(alice.pk, 1200)
    versions = dict(Task.objects.filter(job=job).values_list("id", "version"))
    with CaptureQueriesContext(connection) as statements:
        result = job_cancel(job=job, actor=f"user:{alice.pk}")
    assert result.queued_cancelled == 1200 and result.job_state == "cancelled"
    # Two statements per task (2,400 here) held every task's lock for seconds on a large job;
    # now it is batches: an UPDATE per 900 tasks, the events written together.
    assert len(statements.captured_queries) <= 60, len(statements.captured_queries)
    tasks = Task.objects.filter(job=job)
    assert {t.state for t in tasks} == {"cancelled"}
    assert all(t.version == versions[t.pk] + 1 for t in tasks)
    events = Event.objects.filter(type="TaskCancelled")
    assert sorted((e.stream, e.version) for e in events) == sorted(
        (f"task:{pk}", version + 1) for pk, version in versions.items()
    )
    assert {e.payload["job_id"] for e in events} == {job.pk}
    report = verify_ledger(check_chain=False)
    assert report.ok, report


def test_a_lease_lost_after_the_cancel_ends_the_task_cancelled(submitter, bob):
    job_id = submitter.post("/api/v1/jobs/", job_body(slices=2), format="json").json()["id"]
    _, agent = online_node(bob)
    claim(agent).json()
    assert submitter.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 200
    leases_reap(now=timezone.now() + timedelta(hours=1))
    assert sorted(Task.objects.values_list("state", flat=True)) == ["cancelled", "cancelled"]
    assert Job.objects.get(pk=job_id).state == "cancelled"
    lost = Event.objects.get(type="AttemptLost")
    assert lost.payload["outcome"] == "cancelled"
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_an_infrastructure_failure_after_the_cancel_is_not_retried(submitter, bob):
    job_id = submitter.post("/api/v1/jobs/", job_body(slices=1), format="json").json()["id"]
    _, agent = online_node(bob)
    lease = claim(agent).json()
    assert submitter.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 200
    assert fail(agent, lease, "infra").json()["status"] == "cancelled"
    assert Job.objects.get(pk=job_id).state == "cancelled"
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_the_jobs_cancel_flag_is_what_the_log_says(submitter, alice):
    first = submitter.post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    second = submitter.post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    reply = submitter.post(f"/api/v1/jobs/{first}/cancel")
    assert reply.status_code == 200 and reply.json()["cancel_requested_at"] is not None
    assert submitter.get(f"/api/v1/jobs/{first}").json()["cancel_requested_at"] is not None
    assert submitter.get(f"/api/v1/jobs/{second}").json()["cancel_requested_at"] is None
    assert verify_ledger(check_chain=False).ok
    # A flag lost (a job's tasks could run on after its cancel), and one set with no request.
    Job.objects.filter(pk=first).update(cancel_requested_at=None)
    Job.objects.filter(pk=second).update(cancel_requested_at=timezone.now())
    report = verify_ledger(check_chain=False)
    assert not report.ok
    assert [p for p in report.problems if "cancel flag" in p] == [
        f"jobs: job {first}'s cancel flag is not set in the table, with a JobCancelRequested "
        "in the log",
        f"jobs: job {second}'s cancel flag is set in the table, with no JobCancelRequested "
        "in the log",
    ]
