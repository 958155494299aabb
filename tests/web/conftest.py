"""The web pages' fixtures: budgets no ordinary test can spend, people with an email, and a real
browser (Playwright driving Debian's Chromium) against the hub served by pytest-django's
live server.

Without a Chromium at CHROMIUM (default /usr/bin/chromium: `apt-get install -y chromium`) the
browser tests skip, unless REQUIRE_BROWSER=1 (CI sets it), where they fail. Each browser test
saves a screenshot of every page it visits under var/screenshots/.
"""

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "var" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PASSWORD = "correct horse battery staple"
UNSPENDABLE = (1_000_000, 60)


@pytest.fixture(autouse=True)
def _unspendable_budgets(settings) -> None:
    """Every test here logs in and posts forms from one address; only the tests of the budgets
    themselves set a small one (with addresses and accounts of their own)."""
    settings.WEB_LOGIN_RATE = UNSPENDABLE
    settings.WEB_SIGNUP_RATE = UNSPENDABLE
    settings.WEB_PASSWORD_RESET_RATE = UNSPENDABLE
    settings.WEB_ENROL_RATE = UNSPENDABLE
    settings.WEB_CASHOUT_RATE = UNSPENDABLE
    settings.WEB_JOB_SUBMIT_RATE = UNSPENDABLE
    settings.WEB_NETWORK_PAGE_RATE = UNSPENDABLE
    settings.WEB_PUBLIC_NAME_RATE = UNSPENDABLE


def fresh_address() -> str:
    """An address no earlier run counted against (budgets live in Redis across runs)."""
    raw = uuid.uuid4().bytes
    return f"10.{raw[0]}.{raw[1]}.{raw[2]}"


def with_email(user, email: str | None = None):
    user.email = email or f"{user.username}@example.test"
    user.save(update_fields=["email"])
    return user


def reset_link(message) -> str:
    found = re.search(r"https?://\S+/reset/\S+/\S+/", message.body)
    assert found, message.body
    return found.group(0)


@pytest.fixture
def browsing(client):
    """browsing(user): Django's test client, logged in as `user`."""

    def as_user(user):
        client.force_login(user)
        return client

    return as_user


# --- The browser -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        message = f"no Chromium at {CHROMIUM}: apt-get install -y chromium"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {message}")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread, which Django takes for an async
    # context; the browser tests' own database calls are sync, so let them through (and only
    # while the browser is up).
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            # Debian's Chromium, not Playwright's download; root needs --no-sandbox.
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            yield chromium
            chromium.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def page(browser, live_server):
    """A fresh browser context (no cookies) on the live hub, in a viewer's time zone that is
    not the hub's, so the pages' local times are exercised."""
    context = browser.new_context(
        base_url=live_server.url,
        viewport={"width": 1100, "height": 800},
        timezone_id="Asia/Kolkata",
    )
    context.set_default_timeout(10_000)
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture
def shot():
    """shot(page, "name"): a full-page screenshot to var/screenshots/name.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(tab, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        tab.screenshot(path=str(path), full_page=True)
        return path

    return take
