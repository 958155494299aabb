import threading

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from ledger.chain import GENESIS, chain_head, chain_seal, chain_verify
from ledger.models import EventSeal, SealBatch
from tests.ledger.helpers import append

# The sealer takes only committed events: on PostgreSQL, events written inside the test's own
# (never committed) transaction are rightly left for later, so sealing tests commit for real.
sealing_db = pytest.mark.django_db(transaction=True)


@sealing_db
def test_it_seals_in_id_order_and_verifies():
    events = [append(f"job:{i}") for i in range(5)]
    result = chain_seal()
    assert result.sealed == 5
    seals = list(EventSeal.objects.order_by("seq"))
    assert [s.event_id for s in seals] == [e.id for e in events]
    assert seals[-1].hash == result.head == chain_head() != GENESIS
    assert chain_verify() == []


@sealing_db
def test_sealing_twice_changes_nothing():
    append("job:1")
    chain_seal()
    again = chain_seal()
    assert again.sealed == 0 and again.batch_id is None
    assert SealBatch.objects.count() == 1


@sealing_db
def test_it_continues_the_chain_across_batches():
    append("job:1")
    first = chain_seal()
    append("job:2")
    second = chain_seal()
    assert second.head != first.head
    assert list(EventSeal.objects.values_list("seq", flat=True).order_by("seq")) == [1, 2]
    assert chain_verify() == []


@sealing_db
def test_the_command_seals_everything():
    for i in range(3):
        append(f"job:{i}")
    call_command("seal_ledger")
    assert EventSeal.objects.count() == 3


class Held(threading.Thread):
    """A transaction on its own connection, held open until released."""

    def __init__(self, stream: str, before=None) -> None:
        super().__init__()
        self.stream = stream
        self.before = before
        self.ready = threading.Event()
        self.release = threading.Event()
        self.appended = threading.Event()
        self.go_append = threading.Event()
        self.event = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with transaction.atomic():
                if self.before:
                    self.before()
                self.ready.set()
                self.go_append.wait(10)
                self.event = append(self.stream)
                self.appended.set()
                self.release.wait(10)
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            connection.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_late_commit_is_never_skipped():
    late = Held("late")
    late.start()
    late.ready.wait(5)
    late.go_append.set()
    late.appended.wait(5)
    early = append("early")  # commits now, with a higher id than the open transaction's event
    assert early.id > late.event.id
    first = chain_seal()
    assert not EventSeal.objects.filter(event_id=early.id).exists(), (
        "sealed past an open transaction: its event would be skipped"
    )
    late.release.set()
    late.join(10)
    assert late.error is None
    chain_seal()
    assert set(EventSeal.objects.values_list("event_id", flat=True)) == {late.event.id, early.id}
    assert chain_verify() == []
    assert first.sealed == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_late_commit_with_an_older_transaction_id_is_sealed_in_a_later_pass():
    # The open transaction's event has the lower id, but the committed one's transaction is older.
    def take_txid() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_xact_id()")

    older = Held("older", before=take_txid)
    older.start()
    older.ready.wait(5)
    newer = Held("newer")
    newer.start()
    newer.ready.wait(5)
    newer.go_append.set()
    newer.appended.wait(5)
    older.go_append.set()
    older.appended.wait(5)
    older.release.set()
    older.join(10)
    assert newer.event.id < older.event.id
    chain_seal()  # seals the older transaction's event; the newer is still open
    assert EventSeal.objects.filter(event_id=older.event.id).exists()
    assert not EventSeal.objects.filter(event_id=newer.event.id).exists()
    newer.release.set()
    newer.join(10)
    chain_seal()
    assert EventSeal.objects.filter(event_id=newer.event.id).exists()
    assert chain_verify() == []
    assert newer.error is None and older.error is None
