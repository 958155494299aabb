"""Every model has an admin page, and the pages render for an admin."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

APPS = ("ledger", "people", "nodes", "jobs", "inference", "webhooks")
MODELS = [m for m in apps.get_models() if m._meta.app_label in APPS]


def test_every_model_is_in_the_admin():
    missing = [m._meta.label for m in MODELS if m not in admin.site._registry]
    assert missing == []


@pytest.mark.django_db
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_each_changelist_renders(client, dave, model):
    client.force_login(dave)
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_the_log_and_the_books_are_read_only_in_the_admin(client, dave):
    from ledger.models import Event, Posting

    client.force_login(dave)
    for model in (Event, Posting):
        model_admin = admin.site._registry[model]
        request = client.get("/admin/").wsgi_request
        request.user = dave
        assert not model_admin.has_change_permission(request)
        assert not model_admin.has_delete_permission(request)
        assert not model_admin.has_add_permission(request)


@pytest.mark.django_db
def test_the_log_filters_by_a_registered_type(client, dave):
    from ledger.models import Event
    from tests.ledger.helpers import append

    noted = append("job:1")
    client.force_login(dave)
    url = reverse("admin:ledger_event_changelist")
    page = client.get(url)
    assert b"?type=JobStarted" in page.content  # a registered type is offered
    shown = client.get(url, {"type": noted.type})
    assert shown.status_code == 200
    assert shown.context["cl"].result_count == Event.objects.filter(type=noted.type).count() == 1
    assert client.get(url, {"type": "JobStarted"}).context["cl"].result_count == 0


@pytest.mark.django_db
def test_the_admin_shows_money_as_money(client, dave, alice, bob):
    from ledger.models import Cashout
    from tests.ledger.economy_helpers import earn, request_cashout

    earn(alice, bob, 5_000_000)
    cashout = request_cashout(bob, 5_000_000)  # 50,000.00 credits: ₹500.00 at 1 paisa each
    assert (cashout.amount_minor, cashout.inr_paise) == (5_000_000, 50_000)
    client.force_login(dave)
    page = client.get(reverse("admin:ledger_cashout_changelist")).content.decode()
    assert "50,000.00 credits" in page and "₹500.00" in page
    assert ">5000000<" not in page and ">50000<" not in page
    books = client.get(reverse("admin:ledger_pricebook_changelist")).content.decode()
    assert "₹500.00" in books  # the minimum cashout
    ordered = client.get(reverse("admin:ledger_cashout_changelist"), {"o": "4"})
    assert ordered.status_code == 200  # a money column still sorts by its field
    assert Cashout.objects.count() == 1


@pytest.mark.django_db
def test_the_admin_shows_times_to_the_second_in_the_viewers_zone(client, dave, bob):
    from datetime import UTC, datetime

    from nodes.models import Node
    from tests.nodes.conftest import register_node

    node, _ = register_node(bob)
    Node.objects.filter(pk=node.pk).update(created_at=datetime(2026, 3, 1, 12, 0, 7, tzinfo=UTC))
    client.force_login(dave)
    url = reverse("admin:nodes_node_change", args=[node.pk])
    client.cookies["tz"] = "Asia/Kolkata"
    page = client.get(url).content.decode()
    assert "times in Asia/Kolkata" in page and "2026-03-01" in page and "17:30:07" in page
    # A name the server does not know is ignored: UTC, not an error.
    client.cookies["tz"] = "../../etc/passwd"
    page = client.get(url).content.decode()
    assert "times in UTC" in page and "12:00:07" in page
