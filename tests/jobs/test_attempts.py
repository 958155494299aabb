import hashlib
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from jobs.leases import leases_reap
from jobs.models import Attempt, Job, LogChunk, Task
from ledger.models import Account, Event
from ledger.verify import verify_ledger
from tests.jobs.conftest import beat, claim, complete, fail, job_body, online_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def leased(submitter, bob):
    job_id = submitter.post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    node, agent = online_node(bob)
    return job_id, node, agent, claim(agent).json()


def upload(agent, lease, name: str, content: bytes, sha: str | None = None):
    return agent.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/artifacts",
        {
            "lease_token": lease["lease_token"],
            "name": name,
            "sha256": sha or hashlib.sha256(content).hexdigest(),
            "file": SimpleUploadedFile(name, content),
        },
        format="multipart",
    )


def test_progress_starts_the_task_and_logs_arrive_once(leased):
    _, _, agent, lease = leased
    base = f"/api/v1/agent/attempts/{lease['attempt_id']}"
    token = lease["lease_token"]
    assert (
        agent.post(
            f"{base}/progress", {"lease_token": token, "progress": 10}, format="json"
        ).status_code
        == 200
    )
    assert Task.objects.get().state == "running"
    body = {"lease_token": token, "stream": "stdout", "seq": 0, "data": "hello\n"}
    assert agent.post(f"{base}/log", body, format="json").json()["status"] == "ok"
    assert agent.post(f"{base}/log", body, format="json").json()["status"] == "duplicate"
    assert LogChunk.objects.count() == 1


def test_artifacts_arrive_with_verified_checksums_and_only_the_owner_downloads(
    leased, submitter, api, mallory
):
    _, _, agent, lease = leased
    content = b"result bytes \x00\x01" * 100
    stored = upload(agent, lease, "out.bin", content)
    assert stored.status_code == 201, stored.json()
    bad = upload(agent, lease, "other.bin", b"abc", sha="0" * 64)
    assert bad.status_code == 400 and bad.json()["error"] == "artifact_rejected"
    done = complete(
        agent, lease, artifacts=[{"name": "out.bin", "sha256": hashlib.sha256(content).hexdigest()}]
    )
    assert done.status_code == 200, done.json()
    artifact_id = stored.json()["id"]
    download = submitter.get(f"/api/v1/artifacts/{artifact_id}/download")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == content
    assert download["X-Checksum-Sha256"] == hashlib.sha256(content).hexdigest()
    assert (
        api(mallory, "submitter").get(f"/api/v1/artifacts/{artifact_id}/download").status_code
        == 404
    )


def test_completion_must_list_only_uploaded_artifacts(leased):
    _, _, agent, lease = leased
    response = complete(agent, lease, artifacts=[{"name": "ghost", "sha256": "a" * 64}])
    assert response.status_code == 400
    assert Task.objects.get().state == "leased"


ABSENT = object()  # a key left out of the body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"lease_token": ABSENT}, "lease_token"),
        ({"lease_token": "x" * 65}, "lease_token"),
        ({"exit_code": "zero"}, "exit_code"),
        ({"exit_code": 1025}, "exit_code"),
        ({"want_next": "maybe"}, "want_next"),
        ({"stdout_tail": "a\x00b"}, "stdout_tail"),
        ({"stderr_tail": "x" * (256 * 1024 + 1)}, "stderr_tail"),
        ({"reported_runtime_s": 10**400}, "reported_runtime_s"),
        ({"artifacts": "out.txt"}, "artifacts"),
    ],
)
def test_a_bad_completion_body_is_a_field_error_and_changes_nothing(leased, body, field):
    _, _, agent, lease = leased
    body = {"lease_token": lease["lease_token"], **body}
    body = {name: value for name, value in body.items() if value is not ABSENT}
    response = agent.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/complete", body, format="json"
    )
    assert response.status_code == 400, response.content[:300]
    assert any(name.startswith(field) for name in response.json()["fields"]), response.json()
    assert Attempt.objects.get().state == "leased"


def test_a_completion_with_only_the_token_succeeds_with_the_defaults(leased):
    _, _, agent, lease = leased
    response = agent.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/complete",
        {"lease_token": lease["lease_token"]},
        format="json",
    )
    assert response.status_code == 200, response.content[:300]
    assert response.json()["status"] == "succeeded" and response.json()["next"] is None
    assert Attempt.objects.get().exit_code == 0


def test_another_nodes_agent_cannot_report_for_this_attempt(leased, bob, mallory):
    _, _, _, lease = leased
    _, other = online_node(mallory, name="not-bobs")
    assert complete(other, lease).status_code == 409
    assert fail(other, lease).status_code == 409
    assert Attempt.objects.get().state == "leased"


def test_heartbeats_extend_leases_and_flag_stale_tokens(
    leased, mallory, django_assert_max_num_queries
):
    *_, agent, lease = leased
    before = Attempt.objects.get().lease_expires_at
    beat(agent, "busy")  # the node's state settled: what follows is a steady beat
    # The key, the node's row, and every lease extended and read back in one statement.
    with django_assert_max_num_queries(3) as captured:
        reply = beat(agent, "busy", leases=[lease["lease_token"], "forgotten"]).json()
    assert [q["sql"].split()[0] for q in captured.captured_queries] == [
        "SELECT",
        "UPDATE",
        "UPDATE",
    ]
    assert set(reply["leases"]) == {lease["lease_token"]}
    assert reply["cancel"] == ["forgotten"]
    extended = Attempt.objects.get().lease_expires_at
    assert extended > before
    # Another node's agent presenting the token extends nothing and is told to drop it.
    _, other = online_node(mallory, name="not-bobs")
    reply = beat(other, "busy", leases=[lease["lease_token"]]).json()
    assert reply["leases"] == {} and reply["cancel"] == [lease["lease_token"]]
    assert Attempt.objects.get().lease_expires_at == extended
    # An expired lease is not brought back by a late heartbeat: the reaper's to take.
    Attempt.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    reply = beat(agent, "busy", leases=[lease["lease_token"]]).json()
    assert reply["leases"] == {} and reply["cancel"] == [lease["lease_token"]]


def test_an_expired_lease_is_reaped_requeued_and_fenced(leased, bob):
    _, node, agent, lease = leased
    Attempt.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert complete(agent, lease).status_code == 409  # expired: fenced even before the reaper
    assert leases_reap() == 1
    assert leases_reap() == 0  # idempotent
    task = Task.objects.get()
    assert task.state == "queued" and node.pk in task.excluded_nodes
    assert task.available_at > timezone.now()
    assert Event.objects.filter(type="AttemptLost").count() == 1
    assert verify_ledger(check_chain=False).ok


def test_a_node_that_lost_a_task_gets_it_back_only_when_no_other_took_it(leased, settings):
    _, _, agent, lost = leased
    Attempt.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert leases_reap() == 1
    task = Task.objects.get()
    # Past its backoff, but a fleet of one must not strand it: the loser is passed over only
    # for the grace period.
    Task.objects.update(available_at=timezone.now() - timedelta(seconds=1))
    settings.JOB_EXCLUSION_GRACE_S = 60
    assert claim(agent).status_code == 204
    Task.objects.update(available_at=timezone.now() - timedelta(seconds=61))
    again = claim(agent)
    assert again.status_code == 200 and again.json()["attempt_id"] != lost["attempt_id"]
    task.refresh_from_db()
    assert task.state == "leased" and task.attempts == 2


def test_the_last_lost_attempt_fails_the_task_and_releases_the_hold(submitter, bob):
    job_id = submitter.post("/api/v1/jobs/", job_body(max_attempts=1), format="json").json()["id"]
    _, agent = online_node(bob)
    claim(agent)
    Attempt.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    leases_reap()
    job = Job.objects.get(pk=job_id)
    assert job.state == "failed" and job.tasks_failed == 1
    assert Account.objects.get(code=f"job:{job_id}:held").balance == 0
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_an_offline_node_loses_its_leases(leased):
    from nodes.services import nodes_reap

    _, node, _, _ = leased
    from nodes.models import Node

    past = timezone.now() - timedelta(seconds=1)
    Node.objects.filter(pk=node.pk).update(degraded_after=past, offline_after=past)
    nodes_reap()
    assert Node.objects.get(pk=node.pk).state == "offline"
    assert Attempt.objects.get().state == "lost"
    assert Task.objects.get().state == "queued"


def test_a_lost_lease_counts_against_its_node_once_the_loss_is_committed(
    leased, django_capture_on_commit_callbacks
):
    from nodes.models import Node
    from nodes.services import nodes_reap

    _, node, _, _ = leased
    Attempt.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    leases_reap()  # its own transaction: blamed right after it
    assert Node.objects.get(pk=node.pk).consecutive_failures == 1
    Task.objects.update(available_at=timezone.now(), excluded_nodes=[])
    # The offline hook runs inside the node's transition: blamed when that commits.
    from jobs.claim import task_claim
    from jobs.node_profile import profile_for

    assert task_claim(profile=profile_for(Node.objects.get(pk=node.pk))) is not None
    online_node(node.operator, name="still-beating")  # the hub hears the rest of the fleet
    past = timezone.now() - timedelta(seconds=1)
    Node.objects.filter(pk=node.pk).update(degraded_after=past, offline_after=past)
    with django_capture_on_commit_callbacks(execute=False) as pending:
        nodes_reap()
    assert Node.objects.get(pk=node.pk).consecutive_failures == 1
    for callback in pending:
        callback()
    assert Node.objects.get(pk=node.pk).consecutive_failures == 2


def test_a_lease_that_lapsed_while_the_hub_heard_no_one_is_not_the_nodes_failure(leased):
    """Its web processes down: no heartbeat recorded, the lease runs out, the reaper (beat)
    finds it. The lease goes back to the queue; the node is not blamed."""
    from nodes.models import Node

    _, node, _, _ = leased
    now = timezone.now()
    Node.objects.update(degraded_after=now - timedelta(seconds=1))  # nobody beat lately
    Attempt.objects.update(lease_expires_at=now - timedelta(seconds=1))
    assert leases_reap(now=now) == 1
    assert Task.objects.get().state == "queued"
    assert Node.objects.get(pk=node.pk).consecutive_failures == 0


def test_a_lease_found_long_after_it_ended_is_not_the_nodes_failure(leased, bob):
    """The reapers were down too (the database was): the other nodes beat again before the
    reaper ran, but a lease that ended minutes ago says nothing about its node."""
    from nodes.models import Node

    _, node, _, _ = leased
    online_node(bob, name="back-first")
    now = timezone.now()
    Attempt.objects.update(lease_expires_at=now - timedelta(minutes=5))
    assert leases_reap(now=now) == 1
    assert Node.objects.get(pk=node.pk).consecutive_failures == 0
    # On time, with the hub hearing, the same loss counts.
    Task.objects.update(available_at=now, excluded_nodes=[])
    from jobs.claim import task_claim
    from jobs.node_profile import profile_for

    assert task_claim(profile=profile_for(Node.objects.get(pk=node.pk))) is not None
    Attempt.objects.filter(state="leased").update(lease_expires_at=now - timedelta(seconds=3))
    assert leases_reap(now=now) == 1
    assert Node.objects.get(pk=node.pk).consecutive_failures == 1


def test_a_job_failure_is_charged_and_not_retried(leased):
    job_id, _, agent, lease = leased
    response = fail(agent, lease, "job", exit_code=3, detail="exit 3")
    assert response.json()["status"] == "failed"
    assert Job.objects.get(pk=job_id).state == "failed"
    settled = Event.objects.get(type="AttemptSettled")
    assert settled.payload["charge"] is True


def test_an_infrastructure_failure_is_free_and_retried(leased):
    _, _, agent, lease = leased
    assert fail(agent, lease, "infra", detail="OOM").json()["status"] == "queued"
    assert Event.objects.get(type="AttemptSettled").payload["charged_minor"] == 0


def test_cancelling_stops_queued_tasks_at_once_and_running_ones_via_heartbeat(submitter, bob):
    job_id = submitter.post("/api/v1/jobs/", job_body(slices=3), format="json").json()["id"]
    _, agent = online_node(bob)
    lease = claim(agent).json()
    response = submitter.post(f"/api/v1/jobs/{job_id}/cancel")
    assert response.status_code == 200
    assert Task.objects.filter(state="cancelled").count() == 2
    assert claim(agent).status_code == 204
    reply = beat(agent, "busy", leases=[lease["lease_token"]]).json()
    assert reply["cancel"] == [lease["lease_token"]]
    assert fail(agent, lease, "job", detail="cancelled").json()["status"] == "cancelled"
    job = Job.objects.get(pk=job_id)
    assert job.state == "cancelled" and job.tasks_cancelled == 3
    assert Account.objects.get(code=f"job:{job_id}:held").balance == 0
    assert submitter.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 409
    report = verify_ledger(check_chain=False)
    assert report.ok, report.problems


def test_the_detail_and_timeline_come_from_the_tables_and_the_log(leased, submitter):
    job_id, _, agent, lease = leased
    complete(agent, lease)
    detail = submitter.get(f"/api/v1/jobs/{job_id}").json()
    assert detail["tasks"][0]["attempts"][0]["state"] == "succeeded"
    timeline = submitter.get(f"/api/v1/jobs/{job_id}/timeline").json()["results"]
    types = [e["type"] for e in reversed(timeline)]
    assert types == ["JobSubmitted", "TaskClaimed", "JobStarted", "AttemptSucceeded", "JobFinished"]


def _completion_refused_changing_nothing(node, lease, error: type[Exception]) -> None:
    """Complete the lease, expecting `error`; the node's reliability and the event log must be
    as they were."""
    from jobs import attempts
    from nodes.models import Node

    before = Node.objects.values_list("rel_alpha", "reliability_at").get(pk=node.pk)
    events = Event.objects.count()
    with pytest.raises(error):
        attempts.attempt_complete(
            attempt_id=lease["attempt_id"],
            token=lease["lease_token"],
            node_id=node.pk,
            exit_code=0,
        )
    assert Node.objects.values_list("rel_alpha", "reliability_at").get(pk=node.pk) == before
    assert Event.objects.count() == events


def test_a_completion_that_loses_its_compare_and_set_changes_nothing(leased, monkeypatch):
    # The lease ends between the fenced read and the write (a reaper got there first): the
    # completion's transaction (the node's reliability first, then the attempt and its task)
    # must leave everything as it was, that reliability included.
    from jobs import attempts
    from jobs.errors import StaleLease

    _, node, _, lease = leased
    read = attempts._read

    def read_then_lose(*args):
        fenced = read(*args)
        Attempt.objects.filter(pk=lease["attempt_id"]).update(state="lost")
        return fenced

    monkeypatch.setattr(attempts, "_read", read_then_lose)
    _completion_refused_changing_nothing(node, lease, StaleLease)
    assert Task.objects.get().state == "leased"


def test_a_completion_whose_event_meets_a_taken_version_changes_nothing(leased):
    # AttemptSucceeded goes through the ledger's door at the task's version as read before the
    # compare-and-set: a version someone else took rolls the whole completion back, the node's
    # reliability, the attempt and the task with it.
    from ledger.errors import VersionConflict
    from tests.ledger.helpers import append

    _, node, _, lease = leased
    task = Task.objects.get()
    append(f"task:{task.pk}", memo="in the way", expected_version=task.version)
    _completion_refused_changing_nothing(node, lease, VersionConflict)
    assert Attempt.objects.get().state == "leased"
    assert Task.objects.get().state == "leased"


def test_logs_read_oldest_first_and_a_success_says_so_in_the_attempts_message(leased, submitter):
    job_id, _, agent, lease = leased
    base = f"/api/v1/agent/attempts/{lease['attempt_id']}"
    token = lease["lease_token"]
    assert (
        agent.post(
            f"{base}/progress",
            {"lease_token": token, "progress": 5, "message": "started"},
            format="json",
        ).status_code
        == 200
    )
    for seq, line in enumerate(["first\n", "second\n", "third\n"]):
        body = {"lease_token": token, "stream": "stdout", "seq": seq, "data": line}
        assert agent.post(f"{base}/log", body, format="json").status_code == 200
    assert complete(agent, lease).status_code == 200
    logs = submitter.get(f"/api/v1/jobs/{job_id}/logs").json()["results"]
    assert [chunk["data"] for chunk in logs] == ["first\n", "second\n", "third\n"]
    attempt = submitter.get(f"/api/v1/jobs/{job_id}").json()["tasks"][0]["attempts"][0]
    assert (attempt["state"], attempt["progress"], attempt["message"]) == (
        "succeeded",
        100,
        "succeeded",
    )
