import pytest

from jobs.models import Job, Task
from ledger.models import Account, Event
from tests.jobs.conftest import CREDITS, fund, job_body

pytestmark = pytest.mark.django_db


def test_it_creates_the_job_its_tasks_its_event_and_its_hold(submitter, alice):
    response = submitter.post(
        "/api/v1/jobs/", job_body(slices=3, timeout_s=100, price_ceiling=200), format="json"
    )
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert job.submitter == alice and job.state == "queued"
    assert list(job.tasks.values_list("index", flat=True).order_by("index")) == [0, 1, 2]
    assert Event.objects.filter(stream=f"job:{job.pk}", type="JobSubmitted").count() == 1
    held = Account.objects.get(code=f"job:{job.pk}:held")
    assert held.balance == job.max_cost == 200 * 100 * 3


def test_a_replayed_key_returns_the_original_job(submitter):
    headers = {"HTTP_IDEMPOTENCY_KEY": "render-42"}
    first = submitter.post("/api/v1/jobs/", job_body(), format="json", **headers)
    again = submitter.post("/api/v1/jobs/", job_body(), format="json", **headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    other = submitter.post("/api/v1/jobs/", job_body(slices=2), format="json", **headers)
    assert other.status_code == 409 and other.json()["error"] == "idempotency_conflict"
    assert Job.objects.count() == 1


def test_not_enough_credits_is_a_402_and_writes_nothing(api, alice):
    fund(alice, 10 * CREDITS)
    client = api(alice, "submitter")
    events = Event.objects.count()
    response = client.post("/api/v1/jobs/", job_body(timeout_s=3600), format="json")
    assert response.status_code == 402
    assert response.json()["error"] == "insufficient_funds"
    assert Job.objects.count() == 0 and Task.objects.count() == 0
    assert Event.objects.count() == events


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"slices": 0}, "slices"),
        ({"slices": 10_000_000}, "slices"),
        ({"timeout_s": -5}, "timeout_s"),
        ({"price_ceiling": 0}, "price_ceiling"),
        ({"priority": 1000}, "priority"),
        ({"kind": "quantum"}, "kind"),
        ({"kind": "container", "script": None}, "image"),
        ({"kind": "script", "script": ""}, "script"),
        ({"requirements": {"gpu_tiers": ["rtx-9999"]}}, "requirements.gpu_tiers"),
        ({"requirements": {"region": "XX"}}, "requirements.region"),
        ({"requirements": {"ram_mb": -1}}, "requirements.ram_mb"),
        (
            {"requirements": {"min_compute_capability": "seven"}},
            "requirements.min_compute_capability",
        ),
        ({"env": {"CP_TASK_ID": "1"}}, "env"),
        ({"inputs": {"../etc/passwd": "aGk="}}, "inputs"),
        ({"inputs": {"a.txt": "not base64!"}}, "inputs"),
        ({"price_ceiling": 1_000_000, "timeout_s": 604800, "slices": 10_000}, "price_ceiling"),
    ],
)
def test_bad_input_gets_a_field_level_400_and_writes_nothing(submitter, overrides, field):
    body = {k: v for k, v in job_body(**overrides).items() if v is not None}
    response = submitter.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    assert Job.objects.count() == 0


@pytest.mark.parametrize("region", ["xx", "XX", "zz"])
def test_a_region_that_is_not_a_country_is_a_400(submitter, region):
    response = submitter.post(
        "/api/v1/jobs/", job_body(requirements={"region": region}), format="json"
    )
    assert response.status_code == 400, response.json()
    assert "ISO 3166-1 alpha-2" in response.json()["fields"]["requirements.region"][0]
    assert Job.objects.count() == 0


def test_a_job_may_ask_for_any_country_capitalised(submitter):
    # No node is in Fiji: the job waits for one, as it would for a tier nobody has online.
    response = submitter.post(
        "/api/v1/jobs/", job_body(requirements={"region": "fj"}), format="json"
    )
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert job.region == "FJ" and set(job.tasks.values_list("region", flat=True)) == {"FJ"}


def test_an_oversize_submission_is_a_413(submitter, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = submitter.post("/api/v1/jobs/", job_body(script="x" * 10_000), format="json")
    assert response.status_code == 413


def test_only_submitters_submit_and_each_sees_only_their_own(submitter, api, bob, mallory):
    job_id = submitter.post("/api/v1/jobs/", job_body(), format="json").json()["id"]
    as_operator = api(bob, "operator")
    assert as_operator.post("/api/v1/jobs/", job_body(), format="json").status_code == 403
    fund(mallory, 100 * CREDITS)
    other = api(mallory, "submitter")
    assert other.get("/api/v1/jobs/").json()["results"] == []
    for path in ("", "/cancel", "/logs", "/timeline"):
        call = other.post if path == "/cancel" else other.get
        assert call(f"/api/v1/jobs/{job_id}{path}").status_code == 404, path
    assert [j["id"] for j in submitter.get("/api/v1/jobs/").json()["results"]] == [job_id]


def test_the_browsable_apis_job_form_asks_for_what_a_job_takes(submitter):
    page = submitter.get("/api/v1/jobs/", HTTP_ACCEPT="text/html").content.decode()
    form = page[page.index('id="post-generic-content-form"') :]
    for field in ("kind", "script", "slices", "timeout_s", "price_ceiling"):
        assert f'name="{field}"' in page or f"&quot;{field}&quot;" in form, field
    # Nothing a job only has once submitted.
    for field in ("max_cost", "tasks_succeeded", "created_at", "finished_at"):
        assert f'name="{field}"' not in page and f"&quot;{field}&quot;" not in form, field
