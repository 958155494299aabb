"""Finance exports: each cashout once, the same bytes every time, an event with the file's hash."""

import csv
import hashlib
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone

from ledger import exports
from ledger.cashouts import cashout_mark_paid
from ledger.chain import chain_head, chain_seal
from ledger.errors import ImmutableRecord
from ledger.exports import NothingToExport, cashout_export_create, export_csv_chunks
from ledger.models import CashoutExport, CashoutExportLine, Event
from ledger.verify import verify_ledger
from tests.ledger.economy_helpers import approved_cashout, earn, request_cashout

pytestmark = pytest.mark.usefixtures("price_books")

MIN = 5_000_000


def csv_bytes(export) -> bytes:
    return b"".join(export_csv_chunks(export))


def period():
    now = timezone.now()
    return now - timedelta(hours=1), now + timedelta(hours=1)


@pytest.fixture
def cashouts(alice, bob, mallory):
    earn(alice, bob, MIN * 3)
    earn(alice, mallory, MIN, job_id=9001)
    paid = approved_cashout(bob, MIN)
    cashout_mark_paid(cashout_id=paid.pk, payout_reference="UTR-100", actor="user:carol")
    approved = approved_cashout(mallory, MIN)
    requested = request_cashout(bob, MIN)  # not approved: never exported
    return paid, approved, requested


def test_an_export_lists_approved_and_paid_cashouts_and_is_an_event(cashouts):
    paid, approved, _requested = cashouts
    chain_seal()
    start, end = period()
    export = cashout_export_create(period_from=start, period_to=end, actor="user:carol")
    assert (export.count, export.total_amount_minor, export.total_inr_paise) == (
        2,
        MIN * 2,
        100_000,
    )
    body = csv_bytes(export)
    assert hashlib.sha256(body).hexdigest() == export.sha256
    assert export.chain_head == chain_head()
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert [int(r["cashout_id"]) for r in rows] == [paid.pk, approved.pk]
    assert rows[0]["payout_reference"] == "UTR-100" and rows[0]["status"] == "paid"
    assert rows[0]["credits"] == "50000.00" and rows[0]["inr"] == "500.00"
    assert rows[0]["fee_credits"] == "0.00" and rows[1]["operator"] == "mallory"
    assert '"vpa":"bob@okbank"' in rows[0]["payout_details"]
    event = Event.objects.get(type="CashoutsExported")
    assert event.payload["sha256"] == export.sha256
    assert event.payload["cashout_ids"] == [paid.pk, approved.pk]
    assert event.payload["count"] == 2 and event.payload["total_inr_paise"] == 100_000


def test_a_cashout_is_exported_once(cashouts, alice, bob):
    start, end = period()
    first = cashout_export_create(period_from=start, period_to=end, actor="user:carol")
    with pytest.raises(NothingToExport):
        cashout_export_create(period_from=start, period_to=end, actor="user:carol")
    later = approved_cashout(bob, MIN)
    second = cashout_export_create(period_from=start, period_to=end, actor="user:carol")
    assert second.count == 1
    assert list(second.lines.values_list("cashout_id", flat=True)) == [later.pk]
    assert first.lines.count() == 2
    assert verify_ledger().ok


def test_lines_written_a_batch_at_a_time_give_the_hashed_bytes(cashouts, alice, bob, monkeypatch):
    """Lines are stored a batch at a time while the cashouts are still being read (COPY between
    two fetches on PostgreSQL), and the CSV is hashed as they are written: the download, made
    from the stored lines, must give exactly those bytes."""
    monkeypatch.setattr(exports, "_BATCH", 2)
    earn(alice, bob, MIN * 3, job_id=9002)
    extra = [approved_cashout(bob, MIN) for _ in range(3)]
    start, end = period()
    export = cashout_export_create(period_from=start, period_to=end, actor="user:carol")
    assert export.count == 5
    assert hashlib.sha256(csv_bytes(export)).hexdigest() == export.sha256
    lines = export.lines.order_by("position").values_list("position", "cashout_id")
    assert [p for p, _ in lines] == [1, 2, 3, 4, 5]
    assert [c for _, c in lines][2:] == [c.pk for c in extra]
    assert verify_ledger().ok


@pytest.mark.postgres
def test_the_database_refuses_a_second_line_for_a_cashout(cashouts):
    start, end = period()
    export = cashout_export_create(period_from=start, period_to=end, actor="user:carol")
    line = export.lines.first()
    with pytest.raises(Exception, match=r"duplicate key|unique"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO ledger_cashoutexportline (export_id, cashout_id, position, "
                "operator_id_at_export, operator_name, status, payout_details, amount_minor, "
                "fee_minor, inr_paise, paise_per_credit, approved_at, payout_reference) "
                "SELECT export_id, cashout_id, 99, operator_id_at_export, operator_name, status, "
                "payout_details, amount_minor, fee_minor, inr_paise, paise_per_credit, "
                "approved_at, payout_reference FROM ledger_cashoutexportline WHERE id = %s",
                [line.pk],
            )
    with pytest.raises(Exception, match="sealed"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE ledger_cashoutexport SET count = 0 WHERE id = %s", [export.pk])


def test_downloading_again_gives_the_same_bytes_even_after_payment(cashouts):
    _paid, approved, _ = cashouts
    start, end = period()
    export = cashout_export_create(period_from=start, period_to=end, actor="user:carol")
    before = csv_bytes(export)
    cashout_mark_paid(cashout_id=approved.pk, payout_reference="UTR-200", actor="user:carol")
    after = csv_bytes(CashoutExport.objects.get(pk=export.pk))
    assert hashlib.sha256(after).hexdigest() == hashlib.sha256(before).hexdigest() == export.sha256
    with pytest.raises(ImmutableRecord):
        export.save()
    with pytest.raises(ImmutableRecord):
        CashoutExportLine.objects.filter(export=export).update(status="paid")
    assert verify_ledger().ok


def test_finance_exports_and_downloads_through_the_api(api, cashouts, alice, bob, carol):
    start, end = period()
    finance = api(carol, "finance")
    made = finance.post(
        "/api/v1/exports/", {"from": start.isoformat(), "to": end.isoformat()}, format="json"
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["count"] == 2
    downloads = [b"".join(finance.get(body["download"]).streaming_content) for _ in range(2)]
    assert downloads[0] == downloads[1]
    assert hashlib.sha256(downloads[0]).hexdigest() == body["sha256"]
    response = finance.get(body["download"])
    assert response["Content-Type"].startswith("text/csv")
    assert response["X-Content-SHA256"] == body["sha256"]
    assert finance.get("/api/v1/exports/").json()["results"][0]["id"] == body["id"]
    assert finance.get(f"/api/v1/exports/{body['id']}").json()["sha256"] == body["sha256"]
    empty = finance.post(
        "/api/v1/exports/", {"from": start.isoformat(), "to": end.isoformat()}, format="json"
    )
    assert empty.status_code == 409 and empty.json()["error"] == "nothing_to_export"
    backwards = finance.post(
        "/api/v1/exports/", {"from": end.isoformat(), "to": start.isoformat()}, format="json"
    )
    assert backwards.status_code == 400 and "to" in backwards.json()["fields"]
    for user, role in ((bob, "operator"), (alice, "submitter")):
        client = api(user, role)
        assert client.get(body["download"]).status_code == 403
        assert client.post("/api/v1/exports/", {}, format="json").status_code == 403


def test_the_command_exports_and_writes_an_export_again(cashouts, tmp_path):
    start, end = period()
    out = tmp_path / "export.csv"
    call_command(
        "export_cashouts",
        "--from",
        start.isoformat(),
        "--to",
        end.isoformat(),
        "--output",
        str(out),
    )
    export = CashoutExport.objects.get()
    assert hashlib.sha256(out.read_bytes()).hexdigest() == export.sha256
    again = tmp_path / "again.csv"
    call_command("export_cashouts", "--export", str(export.pk), "--output", str(again))
    assert again.read_bytes() == out.read_bytes()
    with pytest.raises(CommandError, match="left to export"):
        call_command("export_cashouts", "--from", start.isoformat(), "--to", end.isoformat())
    with pytest.raises(CommandError, match="--from and --to"):
        call_command("export_cashouts")


def test_the_admin_exports_the_selected_cashouts_and_downloads_them(client, dave, cashouts):
    paid, _approved, requested = cashouts
    client.force_login(dave)
    response = client.post(
        "/admin/ledger/cashout/",
        {
            "action": "export_selected",
            "_selected_action": [paid.pk, requested.pk],
            "text": "",
        },
    )
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    export = CashoutExport.objects.get()
    assert list(export.lines.values_list("cashout_id", flat=True)) == [paid.pk]
    body = b"".join(response.streaming_content)
    assert hashlib.sha256(body).hexdigest() == export.sha256
    again = client.post(
        "/admin/ledger/cashoutexport/",
        {
            "action": "download",
            "_selected_action": [export.pk],
        },
    )
    assert b"".join(again.streaming_content) == body
