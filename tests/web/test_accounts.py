"""Accounts through Django's test client: sign up, closed sign-up, log in, password reset by
mail, the budgets of those forms, and CSRF on every form."""

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from ledger.models import Event
from people.roles import user_roles
from tests.web.conftest import PASSWORD, fresh_address, reset_link, with_email

pytestmark = pytest.mark.django_db
User = get_user_model()
NEW_PASSWORD = "a brand new passphrase 77"


def signup_form(username: str, role: str = "submitter", **extra) -> dict[str, str]:
    return {
        "username": username,
        "email": f"{username}@example.test",
        "password1": NEW_PASSWORD,
        "password2": NEW_PASSWORD,
        "role": role,
        **extra,
    }


def test_the_landing_page_is_public_and_offers_sign_up_and_log_in(client):
    page = client.get("/")
    assert page.status_code == 200
    assert b'href="/signup/"' in page.content and b'href="/login/"' in page.content
    # The figures are the price book's in force (seeded: a 20% fee, ₹500 minimum cashout).
    text = " ".join(page.content.decode().split())
    assert "80% of what the job pays; cash out from ₹500.00" in text


def test_a_person_signs_up_as_an_operator_and_lands_on_their_account(client):
    response = client.post("/signup/", signup_form("olga", role="operator"))
    assert response.status_code == 302 and response["Location"] == "/account/"
    olga = User.objects.get(username="olga")
    assert user_roles(olga) == {"operator"} and olga.email == "olga@example.test"
    assert olga.check_password(NEW_PASSWORD)
    assert Event.objects.filter(stream=f"user:{olga.pk}", type="RoleGranted").count() == 1
    home = client.get("/account/")  # logged in by signing up
    assert home.status_code == 200 and b'id="earnings"' in home.content
    assert b'id="credits"' not in home.content


def test_sign_up_offers_only_the_operator_and_submitter_roles(client):
    response = client.post("/signup/", signup_form("eve", role="admin"))
    assert response.status_code == 200 and b"Select a valid choice" in response.content
    assert not User.objects.filter(username="eve").exists()


def test_sign_up_refuses_a_taken_name_a_taken_email_and_a_weak_password(client, alice):
    with_email(alice)
    taken_name = client.post("/signup/", signup_form("Alice"))
    assert b"already exists" in taken_name.content
    taken_email = client.post("/signup/", signup_form("alicia", email="ALICE@example.test"))
    assert b"An account with this email exists" in taken_email.content
    weak = client.post("/signup/", signup_form("wendy", password1="password", password2="password"))
    assert b"too common" in weak.content
    assert User.objects.count() == 1


def test_closed_sign_up_answers_a_clear_page_and_opens_no_account(client, settings):
    settings.WEB_SIGNUP_OPEN = False
    page = client.get("/signup/")
    assert page.status_code == 403 and b"Sign-up is closed" in page.content
    posted = client.post("/signup/", signup_form("late"))
    assert posted.status_code == 403
    assert not User.objects.filter(username="late").exists()


def test_log_in_and_log_out(client, alice):
    wrong = client.post("/login/", {"username": "alice", "password": "not it"})
    assert wrong.status_code == 200 and b"Please enter a correct username" in wrong.content
    right = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert right.status_code == 302 and right["Location"] == "/account/"
    assert client.get("/account/").status_code == 200
    assert client.get("/logout/").status_code == 405  # a link cannot log anyone out
    out = client.post("/logout/")
    assert out.status_code == 302 and out["Location"] == "/"
    assert client.get("/account/")["Location"] == "/login/?next=/account/"


def test_log_in_returns_to_the_page_asked_for_but_never_off_site(client, alice):
    back = client.post("/login/?next=/account/keys/", {"username": "alice", "password": PASSWORD})
    assert back["Location"] == "/account/keys/"
    client.post("/logout/")
    away = client.post(
        "/login/", {"username": "alice", "password": PASSWORD, "next": "https://evil.test/"}
    )
    assert away["Location"] == "/account/"


def test_a_password_reset_mails_a_link_that_sets_a_new_password_once(client, alice, mailoutbox):
    with_email(alice)
    asked = client.post("/password-reset/", {"email": "ALICE@example.test"})
    assert asked.status_code == 302 and asked["Location"] == "/password-reset/sent/"
    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    assert mail.to == ["alice@example.test"] and "password" in mail.subject.lower()
    link = reset_link(mail).split("testserver", 1)[1]
    form = client.get(link)
    assert form.status_code == 302 and form["Location"].endswith("/set-password/")
    page = client.get(form["Location"])
    assert page.context["validlink"] is True
    done = client.post(
        form["Location"], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert done.status_code == 302 and done["Location"] == "/reset/done/"
    alice.refresh_from_db()
    assert alice.check_password(NEW_PASSWORD)
    again = client.get(link)  # the token was for the old password
    assert again.status_code == 200 and again.context["validlink"] is False


def test_a_reset_for_an_unknown_email_sends_nothing_and_says_the_same(client, mailoutbox):
    asked = client.post("/password-reset/", {"email": "nobody@example.test"})
    assert asked.status_code == 302 and asked["Location"] == "/password-reset/sent/"
    assert mailoutbox == []


# --- Budgets --------------------------------------------------------------------------------


def test_log_in_is_limited_per_address_and_per_account(client, settings):
    settings.WEB_LOGIN_RATE = (3, 60)
    name, address = f"target-{uuid.uuid4().hex[:8]}", fresh_address()
    for _ in range(3):
        tried = client.post("/login/", {"username": name, "password": "x"}, REMOTE_ADDR=address)
        assert tried.status_code == 200
    refused = client.post("/login/", {"username": name, "password": "x"}, REMOTE_ADDR=address)
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert b"Too many attempts" in refused.content
    # Another address against the same account: its budget is spent too.
    elsewhere = client.post(
        "/login/", {"username": name, "password": "x"}, REMOTE_ADDR=fresh_address()
    )
    assert elsewhere.status_code == 429
    # Another account from another address is untouched.
    other = client.post(
        "/login/", {"username": "someone", "password": "x"}, REMOTE_ADDR=fresh_address()
    )
    assert other.status_code == 200


def test_sign_up_is_limited_per_address(client, settings):
    settings.WEB_SIGNUP_RATE = (2, 3600)
    address = fresh_address()
    for n in range(2):
        made = client.post(
            "/signup/", signup_form(f"s{n}-{uuid.uuid4().hex[:6]}"), REMOTE_ADDR=address
        )
        assert made.status_code == 302
        client.post("/logout/")
    refused = client.post("/signup/", signup_form("third"), REMOTE_ADDR=address)
    assert refused.status_code == 429
    assert not User.objects.filter(username="third").exists()


def test_password_reset_is_limited_per_email(client, settings, alice, mailoutbox):
    settings.WEB_PASSWORD_RESET_RATE = (2, 3600)
    with_email(alice, f"alice-{uuid.uuid4().hex[:8]}@example.test")
    for _ in range(2):
        asked = client.post("/password-reset/", {"email": alice.email}, REMOTE_ADDR=fresh_address())
        assert asked.status_code == 302
    refused = client.post("/password-reset/", {"email": alice.email}, REMOTE_ADDR=fresh_address())
    assert refused.status_code == 429
    assert len(mailoutbox) == 2


# --- CSRF -----------------------------------------------------------------------------------


def _token(client: Client, path: str) -> str:
    client.get(path)
    return client.cookies["csrftoken"].value


def test_every_form_refuses_a_post_without_its_csrf_token(alice):
    from people.models import ApiKey
    from people.services import api_key_create

    key, _ = api_key_create(user=alice, role="submitter", name="kept")
    anonymous = Client(enforce_csrf_checks=True)
    for path, data in (
        ("/login/", {"username": "alice", "password": PASSWORD}),
        ("/signup/", signup_form("csrf-victim")),
        ("/password-reset/", {"email": "alice@example.test"}),
    ):
        assert anonymous.post(path, data).status_code == 403, path
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    for path, data in (
        ("/account/keys/", {"name": "forged", "role": "submitter"}),
        (f"/account/keys/{key.pk}/revoke/", {}),
        ("/logout/", {}),
    ):
        assert browser.post(path, data).status_code == 403, path
    assert not User.objects.filter(username="csrf-victim").exists()
    assert list(ApiKey.objects.filter(user=alice).values_list("name", "revoked_at")) == [
        ("kept", None)
    ]
    # The same forms with the page's token go through.
    token = _token(browser, "/account/keys/")
    made = browser.post(
        "/account/keys/", {"name": "real", "role": "submitter", "csrfmiddlewaretoken": token}
    )
    assert made.status_code == 200 and ApiKey.objects.filter(name="real").exists()
    token = _token(anonymous, "/login/")
    logged_in = anonymous.post(
        "/login/", {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert logged_in.status_code == 302


def test_a_session_reaches_the_api_only_with_its_csrf_token(alice):
    from people.models import ApiKey

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.get("/api/v1/me").json()["username"] == "alice"  # reads need no token
    forged = browser.post("/api/v1/keys/", {"role": "submitter", "name": "forged"})
    assert forged.status_code == 403 and "CSRF" in forged.json()["detail"]
    assert not ApiKey.objects.filter(user=alice).exists()
