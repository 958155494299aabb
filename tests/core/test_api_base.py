"""The API's common ground: error shape, pagination, throttling, schema."""

import re

import pytest
from django.core.cache import cache
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_validation_errors_have_one_shape_with_field_messages(api, alice):
    response = api(alice, "submitter").post("/api/v1/keys/", {"role": "emperor", "name": ""})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid"
    assert set(body["fields"]) == {"role", "name"}
    assert "emperor" in body["fields"]["role"][0]


def test_malformed_json_is_a_400_not_a_500(api, alice):
    response = api(alice, "submitter").post(
        "/api/v1/keys/", data="{nope", content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "parse_error"


def test_an_oversize_body_is_refused_with_413(api, alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = api(alice, "submitter").post(
        "/api/v1/keys/", {"role": "submitter", "name": "x" * 5000}
    )
    assert response.status_code == 413
    assert response.json()["error"] == "request_too_large"


def test_lists_are_cursor_paginated(api, alice):
    client = api(alice, "submitter")
    for i in range(5):
        client.post("/api/v1/keys/", {"role": "submitter", "name": f"k{i}"})
    first = client.get("/api/v1/keys/?page_size=4").json()
    assert len(first["results"]) == 4 and first["next"]
    second = client.get(first["next"]).json()
    ids = [k["id"] for k in first["results"] + second["results"]]
    assert len(ids) == 6 == len(set(ids))


def test_each_key_has_its_own_throttle_budget(api, alice, bob):
    from rest_framework.settings import api_settings
    from rest_framework.throttling import SimpleRateThrottle

    cache.clear()
    rates = {"per_key": "3/min", "anon": "2/min"}
    try:
        with override_settings(
            REST_FRAMEWORK={
                **__import__("django.conf").conf.settings.REST_FRAMEWORK,
                "DEFAULT_THROTTLE_RATES": rates,
            }
        ):
            api_settings.reload()
            SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
            alices, bobs = api(alice, "submitter"), api(bob, "operator")
            codes = [alices.get("/api/v1/me").status_code for _ in range(4)]
            assert codes == [200, 200, 200, 429]
            throttled = alices.get("/api/v1/me")
            assert throttled.json()["error"] == "throttled"
            assert 0 < int(throttled.headers["Retry-After"]) <= 60
            assert bobs.get("/api/v1/me").status_code == 200
    finally:
        # Outside the override: the rates go back to the real settings' (the budgets are read
        # from this class attribute, which DRF does not reset with the settings).
        api_settings.reload()
        SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
        cache.clear()


def test_the_openapi_schema_and_docs_are_served(client):
    schema = client.get("/api/v1/schema?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/keys/" in paths and "/api/v1/me" in paths
    assert client.get("/api/v1/docs").status_code == 200


@pytest.mark.parametrize("through", ["redis", "django cache"])
def test_throttle_windows_count_each_request_once(settings, through):
    from core.api.throttling import _counts

    cache.clear()
    if through == "django cache":
        settings.REDIS_URL = None  # the embedded default: counters in Django's cache
    key = f"test-throttle:{through.replace(' ', '-')}"
    assert _counts(key, 100, 60) == (0, 1)
    assert _counts(key, 100, 60) == (0, 2)
    assert _counts(key, 101, 60) == (2, 1)  # the next window sees the last one's count
    assert _counts(key, 103, 60) == (0, 1)  # two windows on, nothing carries over
    cache.clear()


@override_settings(WHITENOISE_USE_FINDERS=True)
def test_the_api_docs_are_served_by_the_hub_with_no_cdn():
    """Swagger UI's files come from the pinned sidecar package through the hub's own static
    files (here found in the package, as collectstatic copies them in a deployment)."""
    from django.test import Client

    client = Client()  # its middleware reads the overridden settings
    page = client.get("/api/v1/docs").content.decode()
    assert "cdn" not in page.lower() and "https://" not in page
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page)
    assert any("swagger-ui-bundle" in asset for asset in assets), page[:500]
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/jobs/-1", "/api/v1/jobs/abc"])
def test_a_path_the_api_does_not_serve_is_its_json_404_even_with_debug(api, alice, settings, path):
    settings.DEBUG = True  # Django's own 404 page would list the URL patterns
    response = api(alice, "submitter").get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "not_found", "detail": "Not found.", "fields": {}}


def test_a_filter_value_that_names_no_state_is_a_400(api, alice):
    response = api(alice, "submitter").get("/api/v1/jobs/", {"state": "bogus"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid" and "state" in response.json()["fields"]
    assert api(alice, "submitter").get("/api/v1/jobs/", {"state": "queued"}).status_code == 200


def test_a_services_refusal_is_invalid_and_names_the_fields_the_request_named(api, bob, carol):
    # Below the minimum cashout (the service's rule, not a serializer's).
    low = api(bob, "operator").post(
        "/api/v1/cashouts/",
        {"amount_minor": 100, "payout_details": {"method": "upi", "vpa": "bob@okbank"}},
        format="json",
    )
    assert low.status_code == 400, low.json()
    assert low.json()["error"] == "invalid" and "amount_minor" in low.json()["fields"]
    unknown = api(carol, "finance").post(
        "/api/v1/credits/grants",
        {"user_id": 987654, "amount_minor": 100, "reference": "x", "idempotency_key": "g-1"},
        format="json",
    )
    assert unknown.status_code == 400, unknown.json()
    assert unknown.json()["error"] == "invalid" and "user_id" in unknown.json()["fields"]
