"""An export carries the chain head as the ledger's key signed it; verify_ledger --against
shows that the log still holds the history it vouches for, or names what no longer does."""

import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from ledger import seal_signing
from ledger.against import against_check
from ledger.chain import chain_seal
from ledger.exports import cashout_export_create, export_head
from ledger.models import Event, EventSeal, SealBatch
from tests.ledger.economy_helpers import approved_cashout, earn
from tests.ledger.helpers import append, recompute_unkeyed_chain, rewrite_as_superuser

# transaction=True: the sealer seals only committed events.
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("price_books"),
]

MIN = 5_000_000


@pytest.fixture
def exported(alice, bob):
    """An export made after everything before it was sealed: (its head file, an early event)."""
    early = append("job:early", memo="sealed before the export")
    earn(alice, bob, MIN)
    approved_cashout(bob, MIN)
    chain_seal()
    now = timezone.now()
    export = cashout_export_create(
        period_from=now - timedelta(hours=1), period_to=now + timedelta(hours=1), actor="carol"
    )
    append("job:later", memo="after the export")
    chain_seal()
    return export_head(export), early


def test_the_head_is_the_signed_last_seal_at_export_time(exported):
    head, _early = exported
    batch = SealBatch.objects.order_by("id").first()
    assert head["chain"]["batch_id"] == batch.id
    assert head["chain"]["head_hash"] == batch.head_hash
    assert head["chain"]["signature"] == batch.signature
    assert head["chain"]["key_id"] == seal_signing.key_id()
    last_event = EventSeal.objects.get(seq=batch.last_seq).event_id
    assert head["chain"]["last_event_id"] == last_event
    assert Event.objects.get(type="CashoutsExported").payload["chain_seq"] == batch.last_seq


def test_an_untouched_log_holds_the_exported_history(exported, tmp_path):
    head, _early = exported
    assert against_check(head, "h.json") == []
    path = tmp_path / "head.json"
    path.write_text(json.dumps(head))
    call_command("verify_ledger", against=[str(path)])


def test_an_exported_event_edited_with_the_chain_recomputed_is_found(exported):
    head, early = exported
    rewrite_as_superuser(
        f"UPDATE ledger_event SET actor = 'm' WHERE id = {early.id}", "ledger_event"
    )
    recompute_unkeyed_chain()
    [problem] = against_check(head, "h.json")
    assert problem.startswith(
        f"against h.json: the log up to seal #{head['chain']['last_seq']} no longer hashes "
        "to the exported head"
    )


def test_an_exported_event_deleted_is_found(exported):
    head, early = exported
    seq = EventSeal.objects.get(event_id=early.id).seq
    rewrite_as_superuser(f"DELETE FROM ledger_eventseal WHERE seq = {seq}", "ledger_eventseal")
    rewrite_as_superuser(f"DELETE FROM ledger_event WHERE id = {early.id}", "ledger_event")
    problems = against_check(head, "h.json")
    assert problems[0] == f"against h.json: seal #{seq} of the exported history is missing"
    assert "no longer hashes to the exported head" in problems[1]


def test_a_head_file_not_signed_by_the_ledger_is_refused(exported, tmp_path):
    head, _early = exported
    forged = {**head, "chain": {**head["chain"], "head_hash": "0" * 64}}
    [problem] = against_check(forged, "h.json")
    assert "does not carry key" in problem
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged))
    with pytest.raises(CommandError, match="ledger verification failed"):
        call_command("verify_ledger", against=[str(path)])
