"""Job outputs in an S3-compatible store (ARTIFACT_STORAGE=s3), against a real server over
HTTP (tests/jobs/s3server.py): an agent's upload through the API lands in the bucket, a
download is a redirect to a signed URL that serves the bytes, the zip reads each object as a
stream, and retention deletes the objects."""

import hashlib
import io
import os
import tempfile
import tracemalloc
import zipfile
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from botocore.exceptions import ClientError

from jobs.models import Artifact, Job
from jobs.retention import artifacts_expire
from ledger.models import Event
from ledger.verify import verify_ledger
from tests.jobs.conftest import claim, complete, job_body, online_node, upload
from web.job_zip import job_zip_chunks

pytestmark = pytest.mark.django_db


def _ran(submitter, bob, outputs: dict[str, bytes]) -> Job:
    """A one-slice job whose attempt uploaded `outputs` through the agent API and succeeded."""
    job_id = submitter.post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    _, agent = online_node(bob)
    lease = claim(agent).json()
    for name, data in outputs.items():
        stored = upload(agent, lease, name, data)
        assert stored.status_code == 201, stored.content
    listed = [{"name": n, "sha256": hashlib.sha256(d).hexdigest()} for n, d in outputs.items()]
    assert complete(agent, lease, artifacts=listed).status_code == 200
    return Job.objects.get(pk=job_id)


def test_an_upload_lands_in_the_bucket_and_its_download_is_a_signed_redirect(
    s3_bucket, submitter, bob, api, mallory, settings
):
    content = os.urandom(300_000)
    job = _ran(submitter, bob, {"result.bin": content})
    artifact = Artifact.objects.get(attempt__task__job=job)
    # In the bucket, as the agent sent it, read back by a client of the store itself.
    assert s3_bucket.keys() == [artifact.file.name]
    assert s3_bucket.read(artifact.file.name) == content

    response = submitter.get(f"/api/v1/artifacts/{artifact.pk}/download")
    assert response.status_code == 302
    assert response["X-Checksum-Sha256"] == hashlib.sha256(content).hexdigest()
    location = response["Location"]
    assert location.startswith(f"{s3_bucket.endpoint}/{s3_bucket.name}/")
    query = parse_qs(urlsplit(location).query)
    assert query["X-Amz-Expires"] == [str(settings.ARTIFACT_URL_EXPIRE_S)]
    assert "X-Amz-Signature" in query
    # The signed URL serves the bytes over HTTP, as an attachment under the output's name.
    fetched = requests.get(location, timeout=30)
    assert fetched.status_code == 200 and fetched.content == content
    assert 'filename="result.bin"' in fetched.headers["Content-Disposition"]
    # The object is private: without the signature the store refuses it.
    assert requests.get(location.split("?")[0], timeout=30).status_code == 403
    # Only the owner gets a URL at all.
    stranger = api(mallory, "submitter").get(f"/api/v1/artifacts/{artifact.pk}/download")
    assert stranger.status_code == 404 and "Location" not in stranger


def test_the_zip_of_outputs_reads_each_object_as_a_stream(s3_bucket, submitter, bob, client):
    big = os.urandom(4 * 1024 * 1024)
    job = _ran(submitter, bob, {"big.bin": big, "small.txt": b"small\n"})

    # The archive goes to a file as it comes, so what is traced is what writing it holds.
    with tempfile.TemporaryFile() as sink:
        tracemalloc.start()
        try:
            for chunk in job_zip_chunks(job):
                sink.write(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        sink.seek(0)
        archive = zipfile.ZipFile(io.BytesIO(sink.read()))
    assert archive.read("slice-0/big.bin") == big
    assert archive.read("slice-0/small.txt") == b"small\n"
    # Blocks of 64 KiB at a time: far less than the 4 MiB object, which a whole read holds.
    assert peak < len(big) // 4, peak

    client.force_login(job.submitter)
    page = client.get(f"/jobs/{job.pk}/outputs.zip")
    assert page.status_code == 200 and page.streaming
    served = zipfile.ZipFile(io.BytesIO(b"".join(page.streaming_content)))
    assert served.read("slice-0/big.bin") == big


def test_retention_deletes_the_objects_and_the_job_says_so(s3_bucket, submitter, bob):
    job = _ran(submitter, bob, {"a.txt": b"alpha\n", "b.txt": b"beta\n"})
    assert len(s3_bucket.keys()) == 2
    assert job.artifacts_expire_at == job.finished_at + timedelta(days=job.retention_days)

    assert artifacts_expire(now=job.artifacts_expire_at - timedelta(seconds=1)) == 0
    assert len(s3_bucket.keys()) == 2
    assert artifacts_expire(now=job.artifacts_expire_at) == 1
    assert s3_bucket.keys() == []
    for artifact in Artifact.objects.filter(attempt__task__job=job):
        with pytest.raises(ClientError):
            s3_bucket.client.head_object(Bucket=s3_bucket.name, Key=artifact.file.name)

    detail = submitter.get(f"/api/v1/jobs/{job.pk}").json()
    assert detail["artifacts_expired_at"] is not None
    outputs = detail["tasks"][0]["attempts"][0]["artifacts"]
    assert {o["name"] for o in outputs} == {"a.txt", "b.txt"}
    assert all(o["deleted_at"] for o in outputs)
    gone = submitter.get(f"/api/v1/artifacts/{outputs[0]['id']}/download")
    assert gone.status_code == 410 and gone.json()["error"] == "artifact_expired"
    assert artifacts_expire(now=job.artifacts_expire_at + timedelta(days=1)) == 0
    expired = Event.objects.get(stream=f"job:{job.pk}", type="ArtifactsExpired")
    assert expired.payload == {
        "job_id": job.pk,
        "retention_days": job.retention_days,
        "artifacts": 2,
        "bytes": len(b"alpha\n") + len(b"beta\n"),
    }
    assert verify_ledger(check_chain=False).ok
