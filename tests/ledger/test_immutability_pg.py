"""Raw SQL cannot rewrite the log or the books on PostgreSQL, whatever the models say."""

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from ledger.chain import chain_seal
from ledger.models import Account, Event, Posting
from tests.ledger.helpers import append, funded, rewrite_as_superuser

# transaction=True: the sealer seals only committed events.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

REFUSED = [
    "UPDATE ledger_event SET actor = 'mallory'",
    "DELETE FROM ledger_event",
    "TRUNCATE ledger_event CASCADE",
    "UPDATE ledger_posting SET amount = amount * 2",
    "DELETE FROM ledger_posting",
    "TRUNCATE ledger_posting",
    "UPDATE ledger_entry SET kind = 'gift'",
    "DELETE FROM ledger_eventseal",
]


@pytest.mark.parametrize("statement", REFUSED)
def test_raw_sql_cannot_change_the_log(statement):
    funded("alice:available", 1000)
    chain_seal()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(statement)
    assert Event.objects.filter(actor="mallory").count() == 0
    assert Posting.objects.count() == 2


def test_replica_mode_does_not_silence_the_triggers():
    append("job:1")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
            cursor.execute("UPDATE ledger_event SET actor = 'mallory'")


def test_the_database_refuses_an_unbalanced_entry_at_commit():
    funded("alice:available", 1000)
    account = Account.objects.get(code="alice:available")
    entry_id = Posting.objects.first().entry_id
    with pytest.raises(DatabaseError, match="sum to 5"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO ledger_posting (entry_id, account_id, amount, currency) "
                "VALUES (%s, %s, 5, 'CRD')",
                [entry_id, account.id],
            )
            # The constraint trigger is deferred: it fires when the transaction commits.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert Posting.objects.count() == 2


def test_verify_catches_an_event_rewritten_with_the_triggers_disabled(capsys):
    funded("alice:available", 1000)
    target = append("job:1", memo="the truth")
    chain_seal()
    call_command("verify_ledger")
    rewrite_as_superuser(
        f"UPDATE ledger_event SET payload = jsonb_set(payload, '{{memo}}', '\"a lie\"') "
        f"WHERE id = {target.id}",
        "ledger_event",
    )
    with pytest.raises(CommandError, match="ledger verification failed"):
        call_command("verify_ledger")
    err = capsys.readouterr().err
    assert f"event {target.id} (job:1@1 TestNoted) does not match seal" in err


def test_verify_catches_a_posting_rewritten_with_the_triggers_disabled(capsys):
    funded("alice:available", 1000)
    chain_seal()
    rewrite_as_superuser(
        "UPDATE ledger_posting SET amount = 999999 WHERE amount = 1000", "ledger_posting"
    )
    with pytest.raises(CommandError):
        call_command("verify_ledger")
    err = capsys.readouterr().err
    assert "account alice:available: the log says 1000, postings sum to 999999" in err
    assert "postings sum to 998999 CRD, not zero" in err


def test_verify_catches_a_balance_column_that_drifted(capsys):
    funded("alice:available", 1000)
    Account.objects.filter(code="alice:available").update(balance=5000)
    with pytest.raises(CommandError):
        call_command("verify_ledger")
    assert "balance column 5000, the log says 1000" in capsys.readouterr().err


def test_verify_catches_an_event_that_was_never_sealed(capsys):
    append("job:1")
    chain_seal()
    rewrite_as_superuser("DELETE FROM ledger_eventseal", "ledger_eventseal")
    with pytest.raises(CommandError):
        call_command("verify_ledger")
    assert "below the sealed horizon but not sealed" in capsys.readouterr().err
