"""Retention of job outputs on local disk (the default storage): the period a job asks for or
the hub's default, the deadline set when the job ends, beat's deletion (once, whoever runs it
at the same time), what the job says afterwards, and downloads that stream."""

import hashlib
import os
import threading
import tracemalloc
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.http import FileResponse

from jobs.models import Artifact, Job
from jobs.retention import artifacts_expire
from ledger.models import Event
from ledger.verify import verify_ledger
from tests.jobs.conftest import claim, complete, fail, job_body, online_node, upload

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path


def _ran(submitter, bob, outputs: dict[str, bytes], **body) -> Job:
    job_id = submitter.post("/api/v1/jobs/", job_body(**body), format="json").json()["id"]
    _, agent = online_node(bob)
    lease = claim(agent).json()
    for name, data in outputs.items():
        assert upload(agent, lease, name, data).status_code == 201
    listed = [{"name": n, "sha256": hashlib.sha256(d).hexdigest()} for n, d in outputs.items()]
    assert complete(agent, lease, artifacts=listed).status_code == 200
    return Job.objects.get(pk=job_id)


def _stored(job: Job) -> list[Path]:
    from django.conf import settings

    names = Artifact.objects.filter(attempt__task__job=job).values_list("file", flat=True)
    return [Path(settings.MEDIA_ROOT) / name for name in names]


def test_a_job_keeps_its_outputs_for_the_days_it_asked_or_the_hubs_default(submitter, settings):
    settings.JOB_ARTIFACT_RETENTION_DAYS = 30
    settings.JOB_ARTIFACT_RETENTION_MAX_DAYS = 90
    default = submitter.post("/api/v1/jobs/", job_body(), format="json").json()
    assert default["retention_days"] == 30 and default["artifacts_expire_at"] is None
    asked = submitter.post("/api/v1/jobs/", job_body(retention_days=7), format="json").json()
    assert submitter.get(f"/api/v1/jobs/{asked['id']}").json()["retention_days"] == 7
    submitted = Event.objects.get(stream=f"job:{asked['id']}", type="JobSubmitted")
    assert submitted.payload["retention_days"] == 7
    for days in (0, 91, "soon"):
        refused = submitter.post("/api/v1/jobs/", job_body(retention_days=days), format="json")
        assert refused.status_code == 400 and "retention_days" in refused.json()["fields"]


def test_the_deadline_is_set_when_the_job_ends(submitter, bob):
    job = _ran(submitter, bob, {"out.txt": b"out\n"}, retention_days=3)
    assert job.finished_at is not None
    assert job.artifacts_expire_at == job.finished_at + timedelta(days=3)
    shown = submitter.get(f"/api/v1/jobs/{job.pk}").json()
    assert shown["artifacts_expire_at"] is not None and shown["artifacts_expired_at"] is None


def test_beat_deletes_the_files_once_and_the_job_page_says_so(submitter, bob, client):
    job = _ran(submitter, bob, {"out.txt": b"out\n", "log.txt": b"log\n"}, retention_days=2)
    files = _stored(job)
    assert all(path.exists() for path in files)
    client.force_login(job.submitter)
    kept = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Kept until" in kept and 'id="download-all"' in kept

    assert artifacts_expire(now=job.artifacts_expire_at) == 1
    assert not any(path.exists() for path in files)
    assert artifacts_expire(now=job.artifacts_expire_at) == 0  # a second run finds nothing
    assert Event.objects.filter(type="ArtifactsExpired").count() == 1
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    job.refresh_from_db()
    assert f"Deleted on {job.artifacts_expired_at:%Y-%m-%d}, 2 days after the job ended" in page
    assert 'id="download-all"' not in page and "out.txt" in page
    assert hashlib.sha256(b"out\n").hexdigest() in page  # the checksums stay
    assert "/download" not in page
    artifact = Artifact.objects.filter(attempt__task__job=job).first()
    gone = submitter.get(f"/api/v1/artifacts/{artifact.pk}/download").json()
    assert gone["error"] == "artifact_expired" and "2 days after" in gone["detail"]
    timeline = submitter.get(f"/api/v1/jobs/{job.pk}/timeline").json()["results"]
    assert "ArtifactsExpired" in [event["type"] for event in timeline]
    assert verify_ledger(check_chain=False).ok


def test_a_job_with_no_outputs_leaves_the_deadline_with_nothing_to_say(submitter, bob):
    job_id = submitter.post("/api/v1/jobs/", job_body(max_attempts=1), format="json").json()["id"]
    _, agent = online_node(bob)
    assert fail(agent, claim(agent).json(), failure_class="job", exit_code=1).status_code == 200
    job = Job.objects.get(pk=job_id)
    assert job.state == "failed" and job.artifacts_expire_at is not None
    assert artifacts_expire(now=job.artifacts_expire_at) == 1
    job.refresh_from_db()
    assert job.artifacts_expire_at is None and job.artifacts_expired_at is None
    assert not Event.objects.filter(type="ArtifactsExpired").exists()
    assert artifacts_expire(now=job.finished_at + timedelta(days=3650)) == 0


def test_the_verifier_sees_outputs_marked_deleted_without_their_event(submitter, bob):
    job = _ran(submitter, bob, {"out.txt": b"out\n"})
    Job.objects.filter(pk=job.pk).update(artifacts_expired_at=job.finished_at)
    report = verify_ledger(check_chain=False)
    assert not report.ok
    assert any(
        "outputs are deleted in the table, with no ArtifactsExpired" in p for p in report.problems
    )


@pytest.mark.django_db(transaction=True)
def test_two_runs_at_once_never_take_the_same_job(submitter, bob):
    first = _ran(submitter, bob, {"a.txt": b"a\n"})
    second = _ran(submitter, bob, {"b.txt": b"b\n"})
    due = max(first.artifacts_expire_at, second.artifacts_expire_at)
    locked, release, finished = threading.Event(), threading.Event(), threading.Event()

    def hold_first() -> None:
        # Another run, part way through the first job: its row stays locked meanwhile.
        try:
            with transaction.atomic():
                Job.objects.select_for_update().get(pk=first.pk)
                locked.set()
                release.wait(30)
        finally:
            connection.close()
            finished.set()

    holder = threading.Thread(target=hold_first)
    holder.start()
    try:
        assert locked.wait(30)
        # SKIP LOCKED: the locked job is passed over at once, not waited for.
        assert artifacts_expire(now=due) == 1
        assert Job.objects.get(pk=second.pk).artifacts_expired_at is not None
        assert Job.objects.get(pk=first.pk).artifacts_expired_at is None
    finally:
        release.set()
        holder.join(30)
    assert finished.is_set()
    assert artifacts_expire(now=due) == 1
    assert artifacts_expire(now=due) == 0
    assert Event.objects.filter(type="ArtifactsExpired").count() == 2
    assert not any(path.exists() for job in (first, second) for path in _stored(job))


def test_a_local_download_streams_the_file_a_block_at_a_time(submitter, bob):
    content = os.urandom(4 * 1024 * 1024)
    job = _ran(submitter, bob, {"big.bin": content})
    artifact = Artifact.objects.get(attempt__task__job=job)
    response = submitter.get(f"/api/v1/artifacts/{artifact.pk}/download")
    assert response.status_code == 200 and isinstance(response, FileResponse)
    assert response.streaming
    digest = hashlib.sha256()
    tracemalloc.start()
    try:
        for block in response.streaming_content:
            digest.update(block)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    response.close()
    assert digest.hexdigest() == hashlib.sha256(content).hexdigest()
    assert peak < len(content) // 4, peak


def test_beats_task_deletes_what_is_due_by_the_clock(submitter, bob, time_machine):
    from jobs.tasks import expire_artifacts

    job = _ran(submitter, bob, {"out.txt": b"out\n"}, retention_days=1)
    time_machine.move_to(job.artifacts_expire_at - timedelta(minutes=1))
    assert expire_artifacts() == 0
    time_machine.move_to(job.artifacts_expire_at + timedelta(minutes=1))
    assert expire_artifacts() == 1
    assert not any(path.exists() for path in _stored(job))
