"""A submitter in a real browser against a live hub (hub, worker and beat processes) with a real
agent: submits a script job from the form with an input file, sees its quote first, watches
its progress bar reach 100 % while the agent runs it, downloads its outputs as one zip and
checks their checksums, and cancels another job that waits for a node it cannot have."""

import hashlib
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from jobs.models import Artifact, Job
from ledger.funding import credits_grant
from people.services import api_key_create, user_create
from tests.e2e.conftest import (  # noqa: F401 - fixtures used below
    ROOT,
    live_stack,
    live_stack_process_env,
)
from tests.e2e.test_job_run import start_agent
from tests.web.conftest import PASSWORD

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SCRIPT = """\
echo "slice $CP_SLICE_INDEX starts"
echo "CP_PROGRESS 50 halfway"
sleep 1
tr a-z A-Z < "$COMPUTEPOOL_IN/words.txt" > "$COMPUTEPOOL_OUT/upper-$CP_SLICE_INDEX.txt"
echo "slice $CP_SLICE_INDEX done"
"""
WORDS = b"pooled compute\n"


@pytest.fixture
def live_stack_env(tmp_path: Path) -> dict[str, str]:
    """The pages' scripts and stylesheet collected where the live hub serves them from, before
    it starts (WhiteNoise indexes its files once, as a deployment's collectstatic step feeds it)."""
    var = tmp_path / "var"
    env = os.environ | {"COMPUTEPOOL_VAR_DIR": str(var), "SECRET_KEY": "collectstatic"}
    done = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return {}


def _submit(tab, *, name: str, slices: int, cores: int = 1) -> None:
    tab.goto("/jobs/new/")
    tab.get_by_label("Name", exact=True).fill(name)
    tab.get_by_role("textbox", name="Script").fill(SCRIPT)
    tab.get_by_label("Inputs").set_input_files(
        files=[{"name": "words.txt", "mimeType": "text/plain", "buffer": WORDS}]
    )
    tab.get_by_label("Slices", exact=True).fill(str(slices))
    tab.get_by_label("CPU cores").fill(str(cores))
    tab.get_by_label("RAM (MB)", exact=True).fill("256")
    tab.get_by_label("Timeout (s)").fill("60")
    tab.get_by_label("Price ceiling (credits/s)").fill("5.00")
    tab.get_by_role("button", name="Quote").click()
    # The quote before the submit: what the job holds at most (5.00/s × 60 s × slices).
    hold = f"{5 * 60 * slices:,}.00 credits"
    tab.locator("#quote-max").filter(has_text=hold).wait_for()


def test_a_submitter_runs_a_job_from_the_form_and_takes_its_outputs(
    live_stack,  # noqa: F811 - the fixture imported above
    browser,
    shot,
    tmp_path: Path,
):
    submitter = user_create(username="asha", roles=["submitter"], password=PASSWORD)
    credits_grant(
        user_id=submitter.pk, amount=1_000_000, actor="test", reference="web", idempotency_key="w"
    )
    operator = user_create(username="web-op", roles=["operator"])
    _, op_key = api_key_create(user=operator, role="operator", name="rig")
    start_agent(live_stack, tmp_path, op_key, name="web-rig")
    context = browser.new_context(
        base_url=live_stack.url,
        viewport={"width": 1100, "height": 800},
        timezone_id="Asia/Kolkata",
        accept_downloads=True,
    )
    context.set_default_timeout(15_000)
    tab = context.new_page()
    try:
        tab.goto("/login/")
        tab.get_by_label("Username").fill("asha")
        tab.get_by_label("Password").fill(PASSWORD)
        tab.get_by_role("button", name="Log in").click()
        tab.wait_for_url("**/account/")

        _submit(tab, name="shout", slices=2)
        shot(tab, "job-form")
        tab.get_by_role("button", name="Submit the job").click()
        tab.wait_for_url("**/jobs/*/")
        job = Job.objects.get(submitter=submitter, name="shout")
        assert tab.url.endswith(f"/jobs/{job.pk}/")
        # The page follows the job by itself: no reload, the bar fills as the agent works.
        tab.locator('#job-progress[value="100"]').wait_for(timeout=120_000)
        tab.locator("#job-state").filter(has_text="succeeded").wait_for()
        tab.locator("#download-all").wait_for()
        assert "Final cost" in tab.content()
        assert "web-rig" in tab.locator("#attempts").inner_text()
        log = tab.locator("#job-log").inner_text()
        assert "slice 0 starts" in log and "slice 0 done" in log and "invalid" not in log
        shot(tab, "job-succeeded")

        with tab.expect_download() as download:
            tab.locator("#download-all").click()
        archive = zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes()))
        sums = {}
        for line in archive.read("SHA256SUMS").decode().splitlines():
            digest, path = line.split("  ")
            sums[path] = digest
        assert set(sums) == {"slice-0/upper-0.txt", "slice-1/upper-1.txt"}
        recorded = set(
            Artifact.objects.filter(attempt__task__job=job).values_list("sha256", flat=True)
        )
        for path, digest in sums.items():
            body = archive.read(path)
            assert body == WORDS.upper()
            assert hashlib.sha256(body).hexdigest() == digest
            assert digest in recorded

        # A job no node can take: the page says why, and its owner cancels it.
        _submit(tab, name="too big", slices=1, cores=512)
        tab.get_by_role("button", name="Submit the job").click()
        tab.wait_for_url("**/jobs/*/")
        waiting = tab.locator("#job-waiting")
        assert "No online node meets the job's requirements" in waiting.inner_text()
        shot(tab, "job-waiting")
        tab.get_by_role("button", name="Cancel the job").click()
        tab.locator("#job-state").filter(has_text="cancelled").wait_for()
        assert Job.objects.get(submitter=submitter, name="too big").state == "cancelled"

        tab.goto("/jobs/")
        rows = tab.locator("#jobs tbody tr")
        assert rows.count() == 2
        assert rows.nth(1).locator("progress").get_attribute("value") == "100"
        assert "cancelled" in rows.nth(0).inner_text()
        shot(tab, "jobs")
        tab.goto("/credits/")
        assert "hold" in tab.locator("#postings").inner_text()
        shot(tab, "credits")
        tab.set_viewport_size({"width": 390, "height": 844})
        tab.goto(f"/jobs/{job.pk}/")
        # Phone-sized: nothing wider than the screen, not even inside a table's scroller.
        assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        scrollers = "[...document.querySelectorAll('.scroll')]"
        assert tab.evaluate(f"{scrollers}.every(e => e.scrollWidth <= e.clientWidth + 1)")
        shot(tab, "job-phone")
    finally:
        context.close()
