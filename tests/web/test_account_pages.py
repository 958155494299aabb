"""The account's own pages through Django's test client: who may see what, the API keys, the
home page's money, and the menu by role."""

import re

import pytest

from ledger.models import Event
from people.keys import hash_key
from people.models import ApiKey
from people.services import api_key_create
from tests.conftest import client_with_key
from tests.jobs.conftest import CREDITS, fund
from tests.ledger.economy_helpers import earn

pytestmark = pytest.mark.django_db


@pytest.fixture
def browsing(client):
    def as_user(user):
        client.force_login(user)
        return client

    return as_user


@pytest.mark.parametrize("path", ["/account/", "/account/keys/"])
def test_a_stranger_is_sent_to_log_in(client, path):
    response = client.get(path)
    assert response.status_code == 302 and response["Location"] == f"/login/?next={path}"


def test_an_api_key_does_not_open_a_page(alice):
    _, secret = api_key_create(user=alice, role="submitter", name="api only")
    response = client_with_key(secret).get("/account/keys/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_a_new_key_is_shown_once_and_works_against_the_api(browsing, alice):
    client = browsing(alice)
    created = client.post("/account/keys/", {"name": "laptop", "role": "submitter"})
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    secret = re.search(rb'<code id="new-key">(cpk_[^<]+)</code>', created.content).group(1).decode()
    key = ApiKey.objects.get(user=alice, name="laptop")
    assert key.key_hash == hash_key(secret) and key.role == "submitter"
    assert Event.objects.filter(type="ApiKeyIssued", stream=f"user:{alice.pk}").count() == 1
    listed = client.get("/account/keys/")
    assert secret.encode() not in listed.content  # only the prefix, from now on
    assert key.prefix.encode() in listed.content and b"never" in listed.content
    assert client_with_key(secret).get("/api/v1/me").json()["acting_as"] == ["submitter"]
    key.refresh_from_db()
    assert key.last_used_at is not None
    assert b"never" not in client.get("/account/keys/").content


def test_a_key_acts_only_as_a_role_its_owner_holds(browsing, alice):
    refused = browsing(alice).post("/account/keys/", {"name": "sneaky", "role": "finance"})
    assert refused.status_code == 200 and b"Select a valid choice" in refused.content
    assert not ApiKey.objects.filter(name="sneaky").exists()


def test_a_person_sees_and_revokes_only_their_own_keys(browsing, alice, bob):
    bobs, bobs_secret = api_key_create(user=bob, role="operator", name="bobs-rig")
    alices, _ = api_key_create(user=alice, role="submitter", name="alices-ci")
    client = browsing(alice)
    page = client.get("/account/keys/")
    assert alices.prefix.encode() in page.content and bobs.prefix.encode() not in page.content
    assert client.post(f"/account/keys/{bobs.pk}/revoke/").status_code == 404
    bobs.refresh_from_db()
    assert bobs.revoked_at is None
    assert client_with_key(bobs_secret).get("/api/v1/me").status_code == 200
    revoked = client.post(f"/account/keys/{alices.pk}/revoke/", follow=True)
    assert revoked.redirect_chain == [("/account/keys/", 302)]
    assert b"Revoked the key" in revoked.content
    alices.refresh_from_db()
    assert alices.revoked_at is not None


def test_the_home_page_shows_a_submitters_credits_as_money(browsing, alice):
    fund(alice, 1_234 * CREDITS + 56)
    page = browsing(alice).get("/account/").content.decode()
    assert "1,234.56 credits" in page and 'id="earnings"' not in page


def test_the_home_page_shows_an_operators_earnings_in_credits_and_rupees(browsing, alice, bob):
    earn(alice, bob, 302_400)  # at the seeded 1 paisa per credit: ₹30.24
    page = browsing(bob).get("/account/").content.decode()
    assert "3,024.00 credits" in page and "₹30.24" in page and 'id="credits"' not in page


def test_the_menu_follows_the_roles(browsing, alice, dave):
    submitter = browsing(alice).get("/account/").content.decode()
    assert 'href="/account/keys/"' in submitter and 'href="/admin/"' not in submitter
    admin = browsing(dave).get("/account/").content.decode()
    assert 'href="/admin/"' in admin
