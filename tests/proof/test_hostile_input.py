"""Hostile input, case by case: every refusal is a 4xx with a message, and writes nothing.

Numbers past every bound, enums nobody defined, bodies that are not JSON or not JSON at all,
bodies too big to read, and idempotency keys replayed with a different request, on the doors
money goes through: job submission, credit grants, the payment webhook and cashout requests.
"""

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ledger.models import Account, Event
from tests.jobs.conftest import job_body
from tests.proof.conftest import UPI, World, earn, min_cashout_minor, signed

pytestmark = pytest.mark.django_db

HUGE = [10**30, 2**63, -(2**63) - 1, 1e308, -1, 0]


def _state() -> tuple[int, list[int]]:
    return Event.objects.count(), list(Account.objects.order_by("id").values_list("balance"))


@contextmanager
def writes_nothing() -> Iterator[None]:
    before = _state()
    yield
    assert _state() == before, "a refused request changed the log or a balance"


def refused(response, *codes: int) -> dict:
    assert response.status_code in codes, (response.status_code, response.content[:500])
    body = response.json()
    assert set(body) == {"error", "detail", "fields"} and body["detail"], body
    return body


def webhook(client, payload, *, sign: bool = True, content_type: str = "application/json"):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"HTTP_X_PAYMENT_SIGNATURE": signed(body)} if sign else {}
    return client.post("/api/v1/credits/webhook", body, content_type=content_type, **headers)


def payment(user_id: int, **overrides) -> dict:
    return {
        "id": "pay-1",
        "type": "payment.succeeded",
        "user_id": user_id,
        "amount_paise": 50_000,
        "currency": "INR",
        **overrides,
    }


# --- numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field", ["price_ceiling", "timeout_s", "slices", "priority", "max_attempts"]
)
@pytest.mark.parametrize("value", HUGE)
def test_job_numbers_out_of_range_are_field_errors(world: World, field, value):
    if field == "priority" and value in (-1, 0):
        value = -101 if value else 101  # -1 and 0 are ordinary priorities
    with writes_nothing():
        body = refused(
            world.clients["alice"].post("/api/v1/jobs/", job_body(**{field: value}), format="json"),
            400,
        )
    assert field in body["fields"], body


@pytest.mark.parametrize("value", HUGE)
def test_requirement_numbers_out_of_range_are_field_errors(world: World, value):
    requirements = {"cpu_cores": value, "ram_mb": 256}
    with writes_nothing():
        body = refused(
            world.clients["alice"].post(
                "/api/v1/jobs/", job_body(requirements=requirements), format="json"
            ),
            400,
        )
    assert "requirements.cpu_cores" in body["fields"], body


def test_a_job_whose_worst_case_passes_the_limit_is_refused(world: World):
    with writes_nothing():
        body = refused(
            world.clients["alice"].post(
                "/api/v1/jobs/",
                job_body(price_ceiling=1_000_000, timeout_s=604_800, slices=10_000),
                format="json",
            ),
            400,
        )
    assert "price_ceiling" in body["fields"]


@pytest.mark.parametrize("value", [*HUGE, 1.5, "1e3", True, None, [100], {"n": 1}])
def test_grant_amounts_must_be_positive_bounded_integers(world: World, value):
    with writes_nothing():
        refused(
            world.clients["carol"].post(
                "/api/v1/credits/grants",
                {"user_id": world.users["alice"].pk, "amount_minor": value, "idempotency_key": "g"},
                format="json",
            ),
            400,
        )


@pytest.mark.parametrize("user_id", [10**30, 2**63, 999_999_999, -1, 0])
def test_a_grant_to_nobody_is_refused(world: World, user_id):
    with writes_nothing():
        refused(
            world.clients["carol"].post(
                "/api/v1/credits/grants",
                {"user_id": user_id, "amount_minor": 100, "idempotency_key": "g"},
                format="json",
            ),
            400,
        )


@pytest.mark.parametrize("value", [*HUGE, 1.5, "x"])
def test_cashout_amounts_must_be_positive_bounded_integers(world: World, value):
    with writes_nothing():
        refused(
            world.clients["bob"].post(
                "/api/v1/cashouts/", {"amount_minor": value, "payout_details": UPI}, format="json"
            ),
            400,
            402,
        )


@pytest.mark.parametrize("value", HUGE)
def test_payment_amounts_must_be_positive_bounded_integers(world: World, client, value):
    with writes_nothing():
        refused(webhook(client, payment(world.users["alice"].pk, amount_paise=value)), 400)


@pytest.mark.parametrize(
    "query",
    [
        "tier=rtx-4090&ceiling_per_s_minor=100000000000000000000&timeout_s=60",
        "tier=rtx-4090&ceiling_per_s_minor=-1&timeout_s=60",
        "tier=rtx-4090&ceiling_per_s_minor=5&timeout_s=99999999999999999999999",
        "tier=rtx-4090&for=node&floor_per_s_minor=1e400",
        "tier=rtx-4090&ceiling_per_s_minor=5&timeout_s=60&slices=0",
        "tier=" + "x" * 500 + "&ceiling_per_s_minor=5&timeout_s=60",
    ],
)
def test_quotes_refuse_numbers_out_of_range(world: World, query):
    refused(world.clients["alice"].get(f"/api/v1/quote?{query}"), 400)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs/99999999999999999999999999",
        "/api/v1/jobs/99999999999999999999999999/timeline",
        "/api/v1/nodes/99999999999999999999999999",
        "/api/v1/artifacts/99999999999999999999999999/download",
    ],
)
def test_ids_past_the_column_range_are_404s(world: World, path):
    client = world.clients["bob" if "/nodes/" in path else "alice"]
    assert client.get(path).status_code == 404


def test_attempt_ids_past_the_column_range_are_refused_like_any_foreign_attempt(world: World):
    response = world.clients["bob_agent"].post(
        "/api/v1/agent/attempts/99999999999999999999999999/progress",
        {"lease_token": world.lease_token, "progress": 1},
        format="json",
    )
    assert refused(response, 409)["error"] == "stale_lease"


@pytest.mark.parametrize("page_size", ["0", "-1", "10000000000000000000000", "abc", "1e9"])
def test_page_sizes_are_capped_not_trusted(world: World, page_size):
    response = world.clients["alice"].get(f"/api/v1/jobs/?page_size={page_size}")
    assert response.status_code == 200
    assert len(response.json()["results"]) <= 200


# --- query strings nobody expected ----------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    ["stream=%00", "attempt=%C2%B2", "attempt=99999999999999999999999", "stream=" + "s" * 5000],
)
def test_log_filters_refuse_or_ignore_garbage(world: World, query):
    response = world.clients["alice"].get(f"/api/v1/jobs/{world.job.pk}/logs?{query}")
    assert response.status_code in (200, 400), (response.status_code, response.content[:300])


@pytest.mark.parametrize("query", ["state=%00", "kind=%00", "created_after=yesterday"])
def test_job_list_filters_refuse_or_ignore_garbage(world: World, query):
    response = world.clients["alice"].get(f"/api/v1/jobs/?{query}")
    assert response.status_code in (200, 400), (response.status_code, response.content[:300])


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs/?created_after=2026-01-01T00:00:00%2B17:03",
        "/api/v1/jobs/?created_before=0001-01-01T00:00:00%2B01:00",
        "/api/v1/statements/me?from=2026-01-01T00:00:00%2B17:03&to=2026-02-01T00:00:00Z",
        "/api/v1/statements/me?from=0001-01-01T00:00:00%2B01:00&to=2026-02-01T00:00:00Z",
    ],
)
def test_datetimes_at_the_edge_of_the_calendar_are_refused_or_ignored(world: World, path):
    """Python takes UTC offsets up to ±23:59; PostgreSQL only up to ±15:59."""
    response = world.clients["alice"].get(path)
    assert response.status_code in (200, 400), (response.status_code, response.content[:300])


# Base64 of "p=\x00" and of "r=1&p=x": well-formed cursors at positions no page ever had.
@pytest.mark.parametrize("cursor", ["bm90IGEgY3Vyc29y", "%%%", "cD0lMDA%3D", "cj0xJnA9eA%3D%3D"])
@pytest.mark.parametrize("listing", ["jobs", "node history"])
def test_a_cursor_that_was_never_issued_is_refused_or_ignored(world: World, cursor, listing):
    # The node history pages by version, with a paginator of its own.
    principal, path = {
        "jobs": ("alice", "/api/v1/jobs/"),
        "node history": ("bob", f"/api/v1/nodes/{world.node.pk}/history"),
    }[listing]
    response = world.clients[principal].get(f"{path}?cursor={cursor}")
    assert response.status_code in (200, 404), (response.status_code, response.content[:300])


# --- enums --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("principal", "path", "body", "field"),
    [
        ("alice", "/api/v1/jobs/", job_body(kind="teleport"), "kind"),
        ("alice", "/api/v1/jobs/", job_body(interpreter="perl"), "interpreter"),
        (
            "alice",
            "/api/v1/jobs/",
            job_body(requirements={"gpu_tiers": ["rtx-9999"]}),
            "requirements.gpu_tiers",
        ),
        ("alice", "/api/v1/jobs/", job_body(requirements={"region": "ZZ"}), "requirements.region"),
        ("alice", "/api/v1/keys/", {"role": "emperor", "name": "k"}, "role"),
        ("bob_agent", "/api/v1/agent/heartbeat", {"status": "asleep"}, "status"),
        ("bob", "/api/v1/cashouts/", {"payout_details": {"method": "paypal"}}, "amount_minor"),
    ],
)
def test_unknown_enum_values_are_field_errors(world: World, principal, path, body, field):
    with writes_nothing():
        got = refused(world.clients[principal].post(path, body, format="json"), 400)
    assert field in got["fields"], got


def test_unknown_payout_methods_are_field_errors(world: World):
    earn(world.users["alice"], world.users["bob"], min_cashout_minor())
    with writes_nothing():
        got = refused(
            world.clients["bob"].post(
                "/api/v1/cashouts/",
                {"amount_minor": min_cashout_minor(), "payout_details": {"method": "paypal"}},
                format="json",
            ),
            400,
        )
    assert "payout_details.method" in got["fields"], got


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("fail", {"failure_class": "cosmic-rays"}, "failure_class"),
        ("log", {"stream": "stdlog", "seq": 0, "data": "x"}, "stream"),
        ("log", {"stream": "stdout", "seq": -1, "data": "x"}, "seq"),
        ("log", {"stream": "stdout", "seq": 10**30, "data": "x"}, "seq"),
        ("progress", {"progress": 101}, "progress"),
        ("progress", {"progress": -(10**30)}, "progress"),
        ("complete", {"exit_code": 10**30}, "exit_code"),
        ("complete", {"reported_runtime_s": -1}, "reported_runtime_s"),
        ("complete", {"reported_runtime_s": "NaN"}, "reported_runtime_s"),
    ],
)
def test_agent_reports_out_of_range_are_field_errors(world: World, path, body, field):
    with writes_nothing():
        got = refused(
            world.clients["bob_agent"].post(
                f"/api/v1/agent/attempts/{world.attempt_id}/{path}",
                {"lease_token": world.lease_token, **body},
                format="json",
            ),
            400,
        )
    assert field in got["fields"], got


def test_a_payment_in_another_currency_is_refused(world: World, client):
    with writes_nothing():
        got = refused(webhook(client, payment(world.users["alice"].pk, currency="USD")), 400)
    assert "currency" in got["fields"]


def test_an_unknown_payment_event_is_acknowledged_and_ignored(world: World, client):
    with writes_nothing():
        response = webhook(client, payment(world.users["alice"].pk, type="payment.teleported"))
    assert response.status_code == 200 and response.json()["status"] == "ignored"


# --- malformed and mistyped bodies ---------------------------------------------------------

JSON_DOORS = [
    ("alice", "/api/v1/jobs/"),
    ("alice", "/api/v1/keys/"),
    ("carol", "/api/v1/credits/grants"),
    ("bob", "/api/v1/cashouts/"),
    ("bob", "/api/v1/nodes/"),
    ("carol", "/api/v1/exports/"),
    ("bob_agent", "/api/v1/agent/heartbeat"),
    ("bob_agent", "/api/v1/agent/claim"),
    ("bob_agent", "/api/v1/agent/attempts/{attempt}/complete"),
]


@pytest.mark.parametrize(("principal", "path"), JSON_DOORS)
@pytest.mark.parametrize(
    "raw", [b"{nope", b'{"a": 1', b"\xff\xfe\x00", b'{"a": NaN}', b"[" * 10_000, b"null"]
)
def test_malformed_json_is_a_400(world: World, principal, path, raw):
    path = path.format(attempt=world.attempt_id)
    with writes_nothing():
        response = world.clients[principal].post(path, raw, content_type="application/json")
    assert response.status_code == 400, (raw[:20], response.status_code, response.content[:300])


@pytest.mark.parametrize(("principal", "path"), JSON_DOORS)
@pytest.mark.parametrize(
    ("content_type", "raw"),
    [
        ("text/plain", b"please run my job"),
        ("application/xml", b"<job><kind>script</kind></job>"),
        ("application/x-yaml", b"kind: script"),
    ],
)
def test_a_body_in_a_type_the_api_does_not_speak_is_a_415(
    world: World, principal, path, content_type, raw
):
    path = path.format(attempt=world.attempt_id)
    with writes_nothing():
        response = world.clients[principal].post(path, raw, content_type=content_type)
    assert response.status_code == 415, (response.status_code, response.content[:300])


@pytest.mark.parametrize(
    "raw", [b"{nope", b"<payment/>", b"[1, 2]", b"\xff\xfe", b"null", b'"text"', b"[" * 10_000]
)
def test_a_signed_webhook_that_is_not_a_json_object_is_a_400(world: World, client, raw):
    with writes_nothing():
        response = webhook(client, raw, content_type="text/plain")
    assert response.status_code == 400, (response.status_code, response.content[:300])


@pytest.mark.parametrize(
    "header",
    [
        "",
        "t=,v1=",
        "v1=00",
        "t=abc,v1=00",
        "t=1e5,v1=00",
        "t=" + "9" * 400 + ",v1=00",
        "t=-" + "9" * 400 + ",v1=00",
        "t=" + "9" * 5000 + ",v1=00",
        f"t={int(time.time())},v1={'0' * 64}",
        f"t={int(time.time()) - 3600},v1={'0' * 64}",
        f"t={int(time.time())},v1=\u00e9",
        "garbage",
    ],
)
def test_a_bad_webhook_signature_is_a_401(world: World, client, header):
    with writes_nothing():
        response = client.post(
            "/api/v1/credits/webhook",
            json.dumps(payment(world.users["alice"].pk)),
            content_type="application/json",
            HTTP_X_PAYMENT_SIGNATURE=header,
        )
    assert refused(response, 401)["error"] == "bad_signature"


# --- oversize bodies ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("principal", "path"),
    [*JSON_DOORS, ("anonymous", "/api/v1/credits/webhook")],
)
def test_a_body_past_the_limit_is_a_413(world: World, settings, principal, path):
    path = path.format(attempt=world.attempt_id)
    filler = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    raw = json.dumps({"name": filler}).encode()
    with writes_nothing():
        response = world.clients[principal].post(path, raw, content_type="application/json")
    assert refused(response, 413)["error"] == "request_too_large"


def test_an_artifact_past_its_limit_is_a_413(world: World, settings):
    import hashlib

    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.JOB_MAX_ARTIFACT_BYTES = 1024
    data = b"x" * 2048
    response = world.clients["bob_agent"].post(
        f"/api/v1/agent/attempts/{world.attempt_id}/artifacts",
        {
            "lease_token": world.lease_token,
            "name": "big.bin",
            "sha256": hashlib.sha256(data).hexdigest(),
            "file": SimpleUploadedFile("big.bin", data),
        },
        format="multipart",
    )
    assert refused(response, 413)["error"] == "artifact_too_large"


def test_an_artifact_whose_checksum_lies_is_refused(world: World):
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = world.clients["bob_agent"].post(
        f"/api/v1/agent/attempts/{world.attempt_id}/artifacts",
        {
            "lease_token": world.lease_token,
            "name": "lie.txt",
            "sha256": "0" * 64,
            "file": SimpleUploadedFile("lie.txt", b"the truth"),
        },
        format="multipart",
    )
    assert refused(response, 400)["error"] == "artifact_rejected"


# --- idempotency keys replayed with a different request ------------------------------------


def test_a_job_key_replayed_with_another_body_is_a_409(world: World):
    client = world.clients["alice"]
    key = {"HTTP_IDEMPOTENCY_KEY": "job-once"}
    first = client.post("/api/v1/jobs/", job_body(), format="json", **key)
    assert first.status_code == 201
    with writes_nothing():
        again = client.post("/api/v1/jobs/", job_body(), format="json", **key)
        assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])
        other = client.post("/api/v1/jobs/", job_body(slices=2), format="json", **key)
    assert refused(other, 409)["error"] == "idempotency_conflict"


def test_a_job_key_is_per_submitter(world: World):
    key = {"HTTP_IDEMPOTENCY_KEY": "shared-key"}
    mine = world.clients["alice"].post("/api/v1/jobs/", job_body(), format="json", **key)
    theirs = world.clients["mallory_submitter"].post(
        "/api/v1/jobs/", job_body(slices=3), format="json", **key
    )
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["id"] != theirs.json()["id"]


@pytest.mark.parametrize("length", [201, 5000])
def test_an_overlong_job_key_is_a_400(world: World, length):
    with writes_nothing():
        response = world.clients["alice"].post(
            "/api/v1/jobs/", job_body(), format="json", HTTP_IDEMPOTENCY_KEY="k" * length
        )
    assert "Idempotency-Key" in refused(response, 400)["fields"]


def test_a_job_key_of_the_longest_accepted_length_works(world: World):
    response = world.clients["alice"].post(
        "/api/v1/jobs/", job_body(), format="json", HTTP_IDEMPOTENCY_KEY="k" * 200
    )
    assert response.status_code == 201, response.content[:300]


def test_a_grant_key_replayed_with_another_body_is_a_409(world: World):
    client = world.clients["carol"]
    body = {"user_id": world.users["alice"].pk, "amount_minor": 500, "idempotency_key": "grant-1"}
    assert client.post("/api/v1/credits/grants", body, format="json").status_code == 201
    with writes_nothing():
        again = client.post("/api/v1/credits/grants", body, format="json")
        assert again.status_code == 201
        other = client.post("/api/v1/credits/grants", {**body, "amount_minor": 501}, format="json")
        assert refused(other, 409)["error"] == "idempotency_conflict"
        to_other = client.post(
            "/api/v1/credits/grants", {**body, "user_id": world.users["bob"].pk}, format="json"
        )
        assert refused(to_other, 409)["error"] == "idempotency_conflict"


@pytest.mark.parametrize("length", [100, 150])
def test_a_grant_key_of_any_accepted_length_works(world: World, length):
    response = world.clients["carol"].post(
        "/api/v1/credits/grants",
        {"user_id": world.users["alice"].pk, "amount_minor": 5, "idempotency_key": "g" * length},
        format="json",
    )
    assert response.status_code in (201, 400), (response.status_code, response.content[:300])


def test_a_payment_replayed_with_another_amount_is_a_409(world: World, client):
    alice = world.users["alice"]
    assert webhook(client, payment(alice.pk)).status_code == 200
    with writes_nothing():
        again = webhook(client, payment(alice.pk))
        assert again.status_code == 200 and again.json()["status"] == "credited"
        other = webhook(client, payment(alice.pk, amount_paise=50_001))
        assert refused(other, 409)["error"] == "idempotency_conflict"
        elsewhere = webhook(client, payment(world.users["mallory"].pk))
        assert refused(elsewhere, 409)["error"] == "idempotency_conflict"


@pytest.mark.parametrize("length", [100, 150])
def test_a_payment_id_of_any_accepted_length_works(world: World, client, length):
    response = webhook(client, payment(world.users["alice"].pk, id="p" * length))
    assert response.status_code in (200, 400), (response.status_code, response.content[:300])


def test_a_cashout_key_replayed_with_another_body_is_a_409(world: World):
    bob, minimum = world.users["bob"], min_cashout_minor()
    earn(world.users["alice"], bob, 3 * minimum)
    client = world.clients["bob"]
    body = {"amount_minor": minimum, "payout_details": UPI, "idempotency_key": "co-1"}
    first = client.post("/api/v1/cashouts/", body, format="json")
    assert first.status_code == 201
    with writes_nothing():
        again = client.post("/api/v1/cashouts/", body, format="json")
        assert again.json()["id"] == first.json()["id"]
        bigger = client.post(
            "/api/v1/cashouts/", {**body, "amount_minor": 2 * minimum}, format="json"
        )
        assert refused(bigger, 409)["error"] == "idempotency_conflict"
        elsewhere = client.post(
            "/api/v1/cashouts/",
            {**body, "payout_details": {"method": "upi", "vpa": "mallory@okbank"}},
            format="json",
        )
        assert refused(elsewhere, 409)["error"] == "idempotency_conflict"


def test_a_cashout_key_in_the_header_is_honoured_and_bounded(world: World):
    bob, minimum = world.users["bob"], min_cashout_minor()
    earn(world.users["alice"], bob, 3 * minimum)
    client = world.clients["bob"]
    body = {"amount_minor": minimum, "payout_details": UPI}
    first = client.post("/api/v1/cashouts/", body, format="json", HTTP_IDEMPOTENCY_KEY="h-1")
    again = client.post("/api/v1/cashouts/", body, format="json", HTTP_IDEMPOTENCY_KEY="h-1")
    assert (first.status_code, again.json()["id"]) == (201, first.json()["id"])
    with writes_nothing():
        response = client.post(
            "/api/v1/cashouts/", body, format="json", HTTP_IDEMPOTENCY_KEY="h" * 300
        )
    assert response.status_code == 400, (response.status_code, response.content[:300])
