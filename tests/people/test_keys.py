import pytest
import time_machine

from ledger.models import Event
from people.keys import hash_key
from people.models import ApiKey
from tests.conftest import client_with_key, key_for

pytestmark = pytest.mark.django_db


def test_it_shows_the_key_once_and_stores_only_its_hash(alice):
    secret = key_for(alice, "submitter")
    stored = ApiKey.objects.get(user=alice)
    assert secret.startswith("cpk_") and len(secret) > 40
    assert stored.key_hash == hash_key(secret) and secret not in stored.key_hash
    assert stored.prefix == secret[:12]
    assert Event.objects.filter(stream=f"user:{alice.pk}", type="ApiKeyIssued").count() == 1


def test_a_key_acts_only_as_its_role(mallory):
    as_operator = client_with_key(key_for(mallory, "operator"))
    body = as_operator.get("/api/v1/me").json()
    assert body["roles"] == ["operator", "submitter"]
    assert body["acting_as"] == ["operator"]


def test_it_refuses_a_key_for_a_role_the_user_lacks(api, alice):
    response = api(alice, "submitter").post("/api/v1/keys/", {"role": "finance", "name": "x"})
    assert response.status_code == 403
    assert response.json()["error"] == "role_required"
    assert ApiKey.objects.filter(user=alice).count() == 1


def test_it_issues_and_revokes_keys_through_the_api(api, alice):
    client = api(alice, "submitter")
    created = client.post("/api/v1/keys/", {"role": "submitter", "name": "ci"})
    assert created.status_code == 201
    secret = created.json()["secret"]
    assert client_with_key(secret).get("/api/v1/me").status_code == 200
    revoked = client.post(f"/api/v1/keys/{created.json()['key']['id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    response = client_with_key(secret).get("/api/v1/me")
    assert response.status_code == 401
    assert response.json() == {
        "error": "authentication_failed",
        "detail": "Invalid or revoked API key.",
        "fields": {},
    }


def test_revoking_twice_writes_one_event(api, alice):
    client = api(alice, "submitter")
    key_id = client.post("/api/v1/keys/", {"role": "submitter", "name": "x"}).json()["key"]["id"]
    client.post(f"/api/v1/keys/{key_id}/revoke")
    client.post(f"/api/v1/keys/{key_id}/revoke")
    assert Event.objects.filter(type="ApiKeyRevoked").count() == 1


def test_a_person_sees_and_revokes_only_their_own_keys(api, alice, bob):
    bobs_key = ApiKey.objects.get(pk=key_for_id(bob))
    client = api(alice, "submitter")
    listed = client.get("/api/v1/keys/").json()["results"]
    assert {k["id"] for k in listed} == set(
        ApiKey.objects.filter(user=alice).values_list("id", flat=True)
    )
    assert client.post(f"/api/v1/keys/{bobs_key.pk}/revoke").status_code == 404
    bobs_key.refresh_from_db()
    assert bobs_key.revoked_at is None


def key_for_id(user) -> int:
    key_for(user, "operator")
    return ApiKey.objects.filter(user=user).latest("id").pk


def test_anonymous_and_malformed_credentials_are_refused(client):
    assert client.get("/api/v1/me").status_code in (401, 403)
    for header in ("Bearer", "Bearer a b", "Bearer cpk_nope", "Bearer cpa_nope", "Bearer \xff"):
        response = client.get("/api/v1/me", HTTP_AUTHORIZATION=header)
        assert response.status_code == 401, header
        assert set(response.json()) == {"error", "detail", "fields"}


def test_the_create_api_key_command_prints_a_working_key(db, capsys):
    from django.core.management import call_command

    call_command("create_api_key", "erin", "submitter", "--create-user")
    secret = capsys.readouterr().out.strip()
    assert client_with_key(secret).get("/api/v1/me").json()["acting_as"] == ["submitter"]


def test_a_keys_last_use_is_kept_to_the_minute(alice):
    secret = key_for(alice, "submitter")
    key = ApiKey.objects.get(user=alice)
    assert key.last_used_at is None
    client = client_with_key(secret)
    with time_machine.travel("2026-11-27 10:00:00Z", tick=False):
        assert client.get("/api/v1/me").status_code == 200
        key.refresh_from_db()
        first = key.last_used_at
        assert first is not None
    with time_machine.travel("2026-11-27 10:00:59Z", tick=False):
        client.get("/api/v1/me")  # within the minute: no write
        key.refresh_from_db()
        assert key.last_used_at == first
    with time_machine.travel("2026-11-27 10:01:00Z", tick=False):
        client.get("/api/v1/me")
        key.refresh_from_db()
        assert key.last_used_at > first
