"""The nightly verify_ledger (beat's `ledger.verify`): counted, and a failure mailed."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from ledger.tasks import verify
from tests.core.scraping import scrape, value
from tests.jobs.conftest import fund

pytestmark = pytest.mark.django_db

RUNS = "computepool_ledger_verifications_total"


def test_a_clean_ledger_verifies_and_tells_nobody(
    client, alice, celery_queue, django_capture_on_commit_callbacks
):
    fund(alice, 5_000)
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        assert verify() is True
    assert value(scrape(client), RUNS, result="ok") == value(before, RUNS, result="ok") + 1
    assert celery_queue() == []


def test_a_difference_is_mailed_to_the_admins(
    client, alice, dave, celery_queue, mailoutbox, django_capture_on_commit_callbacks
):
    get_user_model().objects.filter(pk=dave.pk).update(email="dave@example.com")
    fund(alice, 5_000)
    with connection.cursor() as cursor:  # a projection edited behind the ledger's back
        cursor.execute(
            "UPDATE ledger_account SET balance = balance + 1 WHERE owner_id = %s AND balance > 0",
            [alice.pk],
        )
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        assert verify() is False
    after = scrape(client)
    assert value(after, RUNS, result="failed") == value(before, RUNS, result="failed") + 1
    (queued,) = celery_queue()
    assert queued.task == "core.alert_mail" and queued.args[0] == "verify_ledger_failed"
    queued.run()
    (mail,) = mailoutbox
    assert mail.to == ["dave@example.com"]
    assert mail.subject.startswith("[ComputePool] verify_ledger found")
    assert f"account user:{alice.pk}:available: balance column 5001, the log says 5000" in mail.body
