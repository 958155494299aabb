"""A submitter's pages through Django's test client: the jobs list, a job's page and its live
part, cancel, the zip of its outputs, the job form and its quote, credits; who may see what."""

import base64
import hashlib
import io
import uuid
import zipfile

import pytest
from django.test import Client

from jobs.models import Job, JobState, Task
from people.services import user_create
from tests.jobs.conftest import (
    CREDITS,
    claim,
    complete,
    fund,
    online_node,
    submit_job,
    upload,
)
from tests.web.conftest import fresh_address

pytestmark = pytest.mark.django_db

PAGES = ["/jobs/", "/jobs/new/", "/credits/"]


@pytest.fixture
def funded(alice):
    fund(alice, 10_000 * CREDITS)
    return alice


@pytest.mark.parametrize("path", PAGES)
def test_a_stranger_is_sent_to_log_in(client, path):
    response = client.get(path)
    assert response.status_code == 302 and response["Location"] == f"/login/?next={path}"


@pytest.mark.parametrize("path", PAGES)
def test_only_a_submitter_opens_them(browsing, bob, carol, path):
    for user in (bob, carol):
        assert browsing(user).get(path).status_code == 403


def test_the_menu_offers_them_to_a_submitter_only(browsing, alice, bob):
    assert b'href="/jobs/"' in browsing(alice).get("/account/").content
    assert b'href="/jobs/"' not in browsing(bob).get("/account/").content


def test_the_list_shows_my_jobs_newest_first_with_their_progress(browsing, funded, mallory):
    fund(mallory, 1_000 * CREDITS)
    mine = [submit_job(funded.pk, slices=4), submit_job(funded.pk, slices=2)]
    theirs = submit_job(mallory.pk, slices=1)
    Job.objects.filter(pk=mine[0].pk).update(tasks_succeeded=2, tasks_failed=1)
    page = browsing(funded).get("/jobs/").content.decode()
    assert f'data-job="{theirs.pk}"' not in page
    assert page.index(f'data-job="{mine[1].pk}"') < page.index(f'data-job="{mine[0].pk}"')
    assert f'aria-label="Job {mine[0].pk} progress">75%' in page.replace('value="75" ', "")
    assert "3/4" in page


def test_the_list_filters_by_state_and_pages_by_id(browsing, funded, settings):
    jobs = [submit_job(funded.pk, slices=1) for _ in range(3)]
    Job.objects.filter(pk=jobs[0].pk).update(state=JobState.CANCELLED)
    client = browsing(funded)
    cancelled = client.get("/jobs/?state=cancelled").content.decode()
    assert f'data-job="{jobs[0].pk}"' in cancelled and f'data-job="{jobs[1].pk}"' not in cancelled
    older = client.get(f"/jobs/?before={jobs[2].pk}").content.decode()
    assert f'data-job="{jobs[2].pk}"' not in older and f'data-job="{jobs[1].pk}"' in older


def test_the_list_reads_no_query_per_row(browsing, funded, django_assert_max_num_queries):
    for _ in range(60):
        submit_job(funded.pk, slices=3, price_ceiling=1)
    client = browsing(funded)
    client.get("/jobs/")  # the session and roles, read once
    with django_assert_max_num_queries(6):
        response = client.get("/jobs/")
    assert response.content.count(b"<progress") == 50  # one page


@pytest.fixture
def ran(funded, bob):
    """alice's 2-slice job: slice 0 ran on bob's node with an output and succeeded; slice 1
    is queued."""
    _, agent = online_node(bob, name="bob-rig")
    job = submit_job(funded.pk, slices=2)
    lease = claim(agent).json()
    agent.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/progress",
        {"lease_token": lease["lease_token"], "progress": 40, "message": "warming"},
        format="json",
    )
    agent.post(
        f"/api/v1/agent/attempts/{lease['attempt_id']}/log",
        {"lease_token": lease["lease_token"], "stream": "stdout", "seq": 0, "data": "hello\n"},
        format="json",
    )
    assert upload(agent, lease, "out.txt", b"result\n").status_code == 201
    done = complete(
        agent,
        lease,
        artifacts=[{"name": "out.txt", "sha256": hashlib.sha256(b"result\n").hexdigest()}],
    )
    assert done.status_code == 200, done.content
    return job


def test_the_job_page_shows_attempts_logs_cost_and_outputs(browsing, ran):
    from webhooks.payloads import job_cost

    page = browsing(ran.submitter).get(f"/jobs/{ran.pk}/").content.decode()
    assert "bob-rig" in page and "hello" in page
    assert hashlib.sha256(b"result\n").hexdigest() in page
    assert "Cost so far" in page and job_cost(ran.pk) > 0
    from ledger.display import credits

    assert credits(job_cost(ran.pk)) in page
    assert 'data-ended="0"' in page and "50%" in page
    live = browsing(ran.submitter).get(f"/jobs/{ran.pk}/live/")
    assert live.status_code == 200 and b"<html" not in live.content and b"bob-rig" in live.content


def _run_some(agent, count: int) -> None:
    for n in range(count):
        lease = claim(agent).json()
        name = f"out-{lease['attempt_id']}.txt"
        assert upload(agent, lease, name, b"x%d" % n).status_code == 201
        digest = hashlib.sha256(b"x%d" % n).hexdigest()
        assert (
            complete(agent, lease, artifacts=[{"name": name, "sha256": digest}]).status_code == 200
        )


def test_the_job_page_reads_no_query_per_task(browsing, funded, bob, django_assert_max_num_queries):
    agents = [online_node(bob, name=f"rig-{n}")[1] for n in range(3)]
    small = submit_job(funded.pk, slices=2)
    fund(funded, 20_000 * CREDITS)
    big = submit_job(funded.pk, slices=40)
    _run_some(agents[0], 1)  # small's first slice
    for agent in agents:
        _run_some(agent, 4)
    client = browsing(funded)
    client.get(f"/jobs/{small.pk}/")  # the session and roles, read once
    # The session, the job, its tasks, attempts, outputs, settlements and logs, and why it waits
    # (the nodes, the price book, one spot price per market): the same for 2 tasks or 40.
    for job, rows in ((small, 2), (big, 40)):
        with django_assert_max_num_queries(16):
            page = client.get(f"/jobs/{job.pk}/").content
        assert page.count(b'<td data-label="Slice">') == rows
    assert page.count(b'<td data-label="File">') == 11


def test_a_verified_job_shows_each_replica(browsing, funded, bob):
    submit_job(funded.pk, slices=1, verification={"replicas": 2, "quorum": 2})
    job = Job.objects.get(submitter=funded)
    page = browsing(funded).get(f"/jobs/{job.pk}/").content.decode()
    import re

    print(re.findall(r"<tr>.*?</tr>", page, re.S)[:3])
    assert "0 · replica 1" in page and "0 · replica 2" in page and "0 of 2 tasks" in page


def test_another_submitter_finds_no_such_job(browsing, ran, mallory):
    client = browsing(mallory)
    for path in ("", "live/", "outputs.zip"):
        assert client.get(f"/jobs/{ran.pk}/{path}").status_code == 404
    assert client.post(f"/jobs/{ran.pk}/cancel/").status_code == 404
    assert Job.objects.get(pk=ran.pk).cancel_requested_at is None


def test_download_all_is_one_zip_with_checksums(browsing, ran):
    response = browsing(ran.submitter).get(f"/jobs/{ran.pk}/outputs.zip")
    assert response.status_code == 200 and response.streaming
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert archive.read("slice-0/out.txt") == b"result\n"
    digest = hashlib.sha256(b"result\n").hexdigest()
    assert archive.read("SHA256SUMS").decode() == f"{digest}  slice-0/out.txt\n"


def test_cancel_ends_the_queued_tasks(browsing, ran):
    client = browsing(ran.submitter)
    response = client.post(f"/jobs/{ran.pk}/cancel/", follow=True)
    assert b"Cancelled job" in response.content
    assert Job.objects.get(pk=ran.pk).state == JobState.CANCELLED
    again = client.post(f"/jobs/{ran.pk}/cancel/", follow=True)
    assert b"already cancelled" in again.content
    assert b'data-ended="1"' in again.content and b"Final cost" in again.content


def test_every_form_refuses_a_post_without_its_csrf_token(ran):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(ran.submitter)
    assert browser.post(f"/jobs/{ran.pk}/cancel/").status_code == 403
    assert browser.post("/jobs/new/", _form()).status_code == 403
    assert not Job.objects.exclude(pk=ran.pk).exists()
    assert Job.objects.get(pk=ran.pk).cancel_requested_at is None


def _form(**overrides):
    data = {
        "name": "shout", "kind": "script", "script": "tr a-z A-Z < $COMPUTEPOOL_IN/w.txt",
        "interpreter": "sh", "slices": 2, "cpu_cores": 1, "ram_mb": 256, "disk_mb": 256,
        "gpu_count": 0, "min_vram_mb": 0, "region": "", "timeout_s": 60, "max_attempts": 3,
        "priority": 0, "price_ceiling": "5.00", "image": "", "command": "",
        "replicas": "", "quorum": "",
    }  # fmt: skip
    data.update(overrides)
    return data


def test_the_form_submits_through_the_api_rules(browsing, funded):
    from django.core.files.uploadedfile import SimpleUploadedFile

    files = [SimpleUploadedFile("w.txt", b"words\n"), SimpleUploadedFile("x.bin", b"\x00\x01")]
    script = "echo one\r\nsleep 1\r\n"  # as a browser sends a textarea
    response = browsing(funded).post("/jobs/new/", _form(inputs=files, script=script))
    job = Job.objects.get(submitter=funded)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.spec["inputs"] == {
        "w.txt": base64.b64encode(b"words\n").decode(),
        "x.bin": base64.b64encode(b"\x00\x01").decode(),
    }
    assert (job.slices, job.price_ceiling, job.ram_mb) == (2, 500, 256)
    assert job.spec["script"] == "echo one\nsleep 1\n"
    assert Task.objects.filter(job=job).count() == 2


def test_the_form_shows_the_apis_errors_on_their_fields(browsing, funded):
    client = browsing(funded)
    no_script = client.post("/jobs/new/", _form(script=""))
    assert no_script.status_code == 200
    assert "a script job needs a script" in no_script.content.decode()
    bad = client.post("/jobs/new/", _form(replicas=2, quorum=3, gpu_tiers=["cpu"], cpu_cores=0))
    page = bad.content.decode()
    assert "cannot be more than replicas" in page and "greater than or equal to 1" in page
    container = client.post("/jobs/new/", _form(kind="container", script=""))
    assert "a container job needs an image" in container.content.decode()
    assert not Job.objects.exists()


def test_the_form_asks_how_long_outputs_are_kept(browsing, funded, settings):
    settings.JOB_ARTIFACT_RETENTION_DAYS, settings.JOB_ARTIFACT_RETENTION_MAX_DAYS = 30, 90
    client = browsing(funded)
    assert 'name="retention_days"' in client.get("/jobs/new/").content.decode()
    too_long = client.post("/jobs/new/", _form(retention_days=91))
    assert too_long.status_code == 200 and "at most 90 days" in too_long.content.decode()
    assert client.post("/jobs/new/", _form(retention_days=7)).status_code == 302
    assert client.post("/jobs/new/", _form(retention_days="")).status_code == 302
    kept = Job.objects.filter(submitter=funded).order_by("id")
    assert [job.retention_days for job in kept] == [7, 30]


def test_the_form_refuses_what_the_credits_cannot_hold(browsing, alice):
    response = browsing(alice).post("/jobs/new/", _form())
    assert response.status_code == 200 and not Job.objects.exists()
    assert b'class="errors"' in response.content


def test_submitting_from_the_form_is_limited(client, settings):
    settings.WEB_JOB_SUBMIT_RATE = (2, 60)
    user = user_create(username=f"busy-{uuid.uuid4().hex[:8]}", roles=["submitter"])
    fund(user, 10_000 * CREDITS)
    client.force_login(user)
    address = fresh_address()
    for _ in range(2):
        assert client.post("/jobs/new/", _form(), REMOTE_ADDR=address).status_code == 302
    refused = client.post("/jobs/new/", _form(), REMOTE_ADDR=address)
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert Job.objects.filter(submitter=user).count() == 2


def test_the_quote_shows_the_hold_and_each_tier(browsing, funded):
    from ledger.display import credits

    query = "price_ceiling=5.00&timeout_s=60&slices=2&replicas=2&gpu_tiers=cpu"
    page = browsing(funded).get(f"/jobs/new/quote/?{query}").content.decode()
    assert credits(500 * 60 * 2 * 2) in page and '<td data-label="Tier">cpu</td>' in page
    cheap = browsing(funded).get("/jobs/new/quote/?price_ceiling=0.01&timeout_s=60&slices=1")
    assert b"above your ceiling" in cheap.content


def test_a_waiting_job_says_why(browsing, funded, bob):
    client = browsing(funded)
    job = submit_job(funded.pk, slices=1)
    assert b"No node is online" in client.get(f"/jobs/{job.pk}/").content
    online_node(bob, name="small")
    big = submit_job(funded.pk, slices=1, requirements={"cpu_cores": 512})
    assert b"No online node meets the job" in client.get(f"/jobs/{big.pk}/").content
    cheap = submit_job(funded.pk, slices=1, price_ceiling=1)
    assert b"below every price" in client.get(f"/jobs/{cheap.pk}/").content
    assert b"Why it waits" not in client.get(f"/jobs/{job.pk}/").content


def test_credits_show_the_balances_and_their_history(browsing, funded):
    submit_job(funded.pk, slices=1)
    page = browsing(funded).get("/credits/").content.decode()
    from ledger.display import credits
    from ledger.selectors import user_balances

    balances = user_balances(user_id=funded.pk)
    assert credits(balances.available) in page and credits(balances.held) in page
    assert balances.held > 0
    assert "topup" in page or "grant" in page
    assert "hold" in page


def test_credits_are_paged(browsing, funded):
    for _ in range(30):
        submit_job(funded.pk, slices=1, price_ceiling=1)  # each hold: two postings of hers
    client = browsing(funded)
    first = client.get("/credits/").content.decode()
    assert first.count('<td data-label="When">') == 50 and 'rel="next"' in first


def test_a_person_with_every_role_sees_only_their_own(browsing, funded):
    other = user_create(username="eve", roles=["submitter", "operator"])
    fund(other, 100 * CREDITS)
    job = submit_job(funded.pk, slices=1)
    assert browsing(other).get(f"/jobs/{job.pk}/").status_code == 404
    assert f'data-job="{job.pk}"'.encode() not in browsing(other).get("/jobs/").content
