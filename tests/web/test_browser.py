"""The pages in a real browser: Playwright driving Debian's Chromium against the live hub.

A submitter signs up, logs out and in, creates an API key that is shown once, uses it against
the API, and revokes it; a forgotten password is reset through the mail; a closed sign-up
refuses. Every page visited is saved under var/screenshots/.
"""

import pytest
import requests
from django.contrib.auth import get_user_model

from people.models import ApiKey
from people.services import user_create
from tests.jobs.conftest import CREDITS, fund
from tests.ledger.economy_helpers import earn
from tests.web.conftest import PASSWORD, reset_link

User = get_user_model()

pytestmark = pytest.mark.django_db(transaction=True)
NEW_PASSWORD = "a brand new passphrase 77"


def api_me(base_url: str, key: str) -> tuple[int, dict]:
    """GET /api/v1/me with the key, as any HTTP client would: no cookies, only the header."""
    response = requests.get(
        f"{base_url}/api/v1/me", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    return response.status_code, response.json()


def log_in(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/account/")


def test_a_submitter_signs_up_and_manages_an_api_key(page, live_server, shot):
    page.goto("/")
    shot(page, "landing")
    page.get_by_role("link", name="Sign up").first.click()
    page.wait_for_url("**/signup/")
    page.get_by_label("Username").fill("priya")
    page.get_by_label("Email").fill("priya@example.test")
    page.get_by_label("Password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Password confirmation").fill(NEW_PASSWORD)
    page.get_by_label("Submit jobs and pay in credits (submitter)").check()
    shot(page, "signup")
    page.get_by_role("button", name="Open my account").click()
    page.wait_for_url("**/account/")
    assert "Welcome, priya" in page.content()
    assert page.locator("#credits .amount").inner_text() == "0.00 credits"
    fund(User.objects.get(username="priya"), 1_234 * CREDITS + 56)
    page.reload()
    assert page.locator("#credits .amount").inner_text() == "1,234.56 credits"
    shot(page, "account-submitter")

    page.get_by_role("button", name="Log out priya").click()
    page.wait_for_url(f"{live_server.url}/")
    assert page.get_by_role("link", name="Log in").first.is_visible()
    page.goto("/account/")
    page.wait_for_url("**/login/?next=/account/")
    shot(page, "login")
    page.get_by_label("Username").fill("priya")
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/account/")

    page.get_by_role("link", name="API keys").click()
    page.wait_for_url("**/account/keys/")
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Create the key").click()
    secret = page.locator("#new-key").inner_text()
    assert secret.startswith("cpk_")
    shot(page, "key-created")

    status, body = api_me(live_server.url, secret)
    assert status == 200 and body["username"] == "priya" and body["acting_as"] == ["submitter"]

    page.goto("/account/keys/")
    assert secret not in page.content()  # shown once
    row = page.locator("#keys tbody tr").first
    assert "laptop" in row.inner_text() and "active" in row.inner_text()
    # Times are written in UTC and shown in the viewer's zone (this browser is in India).
    created = row.locator("time").first
    assert created.get_attribute("datetime").endswith("Z")
    assert created.get_attribute("title").endswith(" UTC")
    assert "GMT+5:30" in created.inner_text() or "IST" in created.inner_text()
    assert "never" not in row.inner_text()  # the API call above is its last use
    shot(page, "keys")

    page.get_by_role("button", name="Revoke laptop").click()
    page.wait_for_url("**/account/keys/")
    assert "Revoked the key" in page.content()
    assert "revoked" in page.locator("#keys tbody tr").first.inner_text()
    shot(page, "key-revoked")
    status, body = api_me(live_server.url, secret)
    assert status == 401 and body["error"] == "authentication_failed"
    assert ApiKey.objects.get(name="laptop").revoked_at is not None

    # The same account on a phone: nothing wider than the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/account/keys/")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, "keys-phone")
    page.goto("/account/")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, "account-phone")


def test_a_forgotten_password_is_reset_through_the_mail(page, live_server, mailoutbox, shot):
    ravi = user_create(
        username="ravi", email="ravi@example.test", password=PASSWORD, roles=["operator"]
    )
    earn(user_create(username="sam", roles=["submitter"]), ravi, 5_000_000)
    page.goto("/login/")
    page.get_by_role("link", name="Forgot your password?").click()
    page.wait_for_url("**/password-reset/")
    page.get_by_label("Email").fill("ravi@example.test")
    shot(page, "password-reset")
    page.get_by_role("button", name="Send the link").click()
    page.wait_for_url("**/password-reset/sent/")
    shot(page, "password-reset-sent")

    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["ravi@example.test"]
    link = reset_link(mailoutbox[0])
    assert link.startswith(live_server.url)
    page.goto(link)
    page.wait_for_url("**/set-password/")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password confirmation").fill(NEW_PASSWORD)
    shot(page, "password-reset-confirm")
    page.get_by_role("button", name="Set my password").click()
    page.wait_for_url("**/reset/done/")
    shot(page, "password-reset-complete")

    log_in(page, "ravi", NEW_PASSWORD)
    assert page.locator("#earnings .amount").inner_text() == "50,000.00 credits"
    assert "worth ₹500.00" in page.locator("#earnings").inner_text()
    shot(page, "account-operator")
    page.goto(link)  # used: refused
    assert "This link is not valid" in page.content()


def test_a_closed_sign_up_refuses_with_a_clear_page(page, settings, shot):
    settings.WEB_SIGNUP_OPEN = False
    response = page.goto("/signup/")
    assert response.status == 403
    assert page.get_by_role("heading", name="Sign-up is closed").is_visible()
    shot(page, "signup-closed")


def test_too_many_log_ins_get_a_page_that_says_when_to_try_again(page, settings, shot):
    settings.WEB_LOGIN_RATE = (1, 60)  # per address: this browser's is 127.0.0.1
    answers = []
    for _ in range(2):
        page.goto("/login/")
        page.get_by_label("Username").fill("nobody")
        page.get_by_label("Password").fill("wrong")
        with page.expect_response("**/login/") as answer:
            page.get_by_role("button", name="Log in").click()
        answers.append(answer.value.status)
    # One attempt fits the budget (unless an earlier test spent it this minute); two do not.
    assert answers[-1] == 429 and set(answers) <= {200, 429}
    assert page.get_by_role("heading", name="Too many attempts").is_visible()
    assert int(answer.value.headers["retry-after"]) >= 1
    shot(page, "rate-limited")
