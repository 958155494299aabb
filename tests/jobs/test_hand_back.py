"""An agent hands an attempt back because its owner wants the machine; an agent stops one at a
critical temperature and says so."""

import pytest
from django.utils import timezone

from jobs.models import Attempt, Job, Task, Verification
from ledger.models import Account, Event
from ledger.verify import verify_ledger
from nodes.models import Node
from tests.jobs.conftest import claim, complete, fail, job_body, online_node

pytestmark = pytest.mark.django_db


def hand_back(client, lease: dict, reason: str = "steam running"):
    return client.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/hand-back",
        {"lease_token": lease["lease_token"], "reason": reason},
        format="json",
    )


def reliability(node) -> tuple:
    return Node.objects.values_list(
        "rel_alpha", "rel_beta", "consecutive_failures", "reliability_at"
    ).get(pk=node.pk)


def lease_one(submitter, operator, **job):
    """A job of one task, leased by a node of `operator`'s: (job id, node, agent, lease)."""
    job_id = submitter.post("/api/v1/jobs/", job_body(**job), format="json").json()["id"]
    node, agent = online_node(operator)
    return job_id, node, agent, claim(agent).json()


@pytest.fixture
def leased(submitter, bob):
    return lease_one(submitter, bob, max_attempts=1)


def test_a_handed_back_task_is_queued_at_once_for_another_node(
    leased, bob, django_capture_on_commit_callbacks
):
    job_id, node, agent, lease = leased
    before = reliability(node)
    now = timezone.now()

    with django_capture_on_commit_callbacks(execute=True):
        response = hand_back(agent, lease)

    assert response.status_code == 200 and response.json() == {"status": "queued"}
    task = Task.objects.get()
    attempt = Attempt.objects.get()
    assert task.state == "queued" and task.current_attempt_id is None
    assert task.available_at <= timezone.now() and task.available_at >= now  # no backoff
    # Its one attempt is not used up: max_attempts=1, and the task is still to run.
    assert (task.attempts, task.max_attempts) == (1, 2)
    assert node.pk in task.excluded_nodes
    assert attempt.state == "lost" and attempt.detail == "handed back: steam running"
    assert reliability(node) == before
    event = Event.objects.get(type="AttemptHandedBack")
    assert event.payload["reason"] == "steam running" and event.payload["outcome"] == "requeued"
    assert Event.objects.get(type="AttemptSettled").payload["charged_minor"] == 0

    # Another machine takes it straight away, runs it, and the job is done.
    _, other = online_node(bob, name="rig-2")
    again = claim(other).json()
    assert again["attempt_id"] != lease["attempt_id"]
    assert claim(agent).status_code == 204  # the owner's machine is passed over
    assert complete(other, again).json()["status"] == "succeeded"
    assert Job.objects.get(pk=job_id).state == "succeeded"
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_a_hand_back_is_fenced_like_any_report(leased, mallory):
    _, _, agent, lease = leased
    _, intruder = online_node(mallory)

    assert hand_back(intruder, lease).status_code == 409
    assert hand_back(agent, {**lease, "lease_token": "stale"}).status_code == 409
    assert hand_back(agent, lease).status_code == 200
    assert hand_back(agent, lease).status_code == 409  # once only
    assert Event.objects.filter(type="AttemptHandedBack").count() == 1


def test_a_hand_back_needs_a_reason(leased):
    _, _, agent, lease = leased

    response = agent.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/hand-back",
        {"lease_token": lease["lease_token"]},
        format="json",
    )

    assert response.status_code == 400 and "reason" in response.json()["fields"]
    assert Task.objects.get().state == "leased"


def test_a_task_of_a_cancelled_job_handed_back_ends_cancelled(leased, submitter):
    job_id, _, agent, lease = leased
    assert submitter.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 200

    assert hand_back(agent, lease).json() == {"status": "cancelled"}

    job = Job.objects.get(pk=job_id)
    assert job.state == "cancelled" and job.tasks_cancelled == 1
    assert Account.objects.get(code=f"job:{job_id}:held").balance == 0
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_a_thermal_stop_is_an_infrastructure_failure_with_its_reason(submitter, bob):
    _, node, agent, lease = lease_one(submitter, bob)
    detail = "GPU at 97 °C, at or above the critical 95 °C"

    response = fail(agent, lease, "infra", detail=detail, reason="thermal")

    assert response.json()["status"] == "queued"  # retried elsewhere, not charged
    attempt = Attempt.objects.get(pk=lease["attempt_id"])
    assert attempt.failure_class == "infra" and attempt.detail == f"[thermal] {detail}"
    event = Event.objects.get(type="AttemptFailed")
    assert event.payload["reason"] == "thermal"
    assert Node.objects.get(pk=node.pk).consecutive_failures == 1  # the machine overheated
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_an_unknown_failure_reason_is_refused(leased):
    _, _, agent, lease = leased

    response = fail(agent, lease, "infra", reason="meteor")

    assert response.status_code == 400 and "reason" in response.json()["fields"]
    assert Attempt.objects.get().state == "leased"


def test_hand_backs_never_push_the_attempts_past_what_the_column_holds(leased):
    _, _, agent, lease = leased
    Task.objects.update(max_attempts=32767)

    assert hand_back(agent, lease).status_code == 200

    assert Task.objects.get().max_attempts == 32767


def test_a_replica_handed_back_runs_elsewhere_and_its_slice_is_still_verified(
    submitter, bob, django_capture_on_commit_callbacks
):
    from tests.jobs.test_verification import RIGHT, finish, operator, take, verified_job

    verified_job(submitter, slices=1)
    _, home = online_node(bob, name="bob-home")
    _, olga = online_node(operator("olga"), name="olga-1")
    _, pete = online_node(operator("pete"), name="pete-1")
    handed, kept = take(home), take(olga)

    with django_capture_on_commit_callbacks(execute=True):
        assert hand_back(home, handed).json() == {"status": "queued"}
        finish(olga, kept, RIGHT)
        assert Job.objects.get().state == "running"  # one result is not a verdict
        finish(pete, take(pete), RIGHT)

    assert Job.objects.get().state == "succeeded"
    assert Event.objects.get(type="SliceVerified").payload["outcome"] == "agreed"
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_a_replica_of_a_cancelled_job_handed_back_lets_its_slice_conclude(
    submitter, bob, django_capture_on_commit_callbacks
):
    from tests.jobs.test_verification import operator, take, verified_job

    job = verified_job(submitter, slices=1)
    _, home = online_node(bob, name="bob-home")
    _, olga = online_node(operator("olga"), name="olga-1")
    first, second = take(home), take(olga)

    with django_capture_on_commit_callbacks(execute=True):
        assert submitter.post(f"/api/v1/jobs/{job['id']}/cancel").status_code == 200
        assert fail(olga, second, "job", detail="cancelled").json()["status"] == "cancelled"
        # The last replica to end: its hand-back is what concludes the slice.
        assert hand_back(home, first).json() == {"status": "cancelled"}

    assert Job.objects.get().state == "cancelled"
    assert Verification.objects.get().state != "open"
    assert Account.objects.get(code=f"job:{job['id']}:held").balance == 0
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems
