"""Seals signed with the ledger's key: a chain recomputed without it does not verify, seals
signed before a rotation still do, and seals from before signing are said to be so."""

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from core import keys
from ledger import seal_signing
from ledger.chain import chain_seal, chain_verify, signed_head
from ledger.models import SealBatch
from ledger.verify import verify_ledger
from tests.ledger.helpers import append, recompute_unkeyed_chain, rewrite_as_superuser

# transaction=True: the sealer seals only committed events.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def three_batches():
    """Three passes: two events, then one alone, then two: the lone one is named exactly."""
    events = [append("job:a", memo="a"), append("job:b", memo="b")]
    chain_seal()
    events.append(append("job:c", memo="c"))
    chain_seal()
    events += [append("job:d", memo="d"), append("job:e", memo="e")]
    chain_seal()
    assert chain_verify() == []
    return events


def test_every_batch_is_signed_by_the_ledger_key(three_batches):
    batches = list(SealBatch.objects.order_by("id"))
    assert len(batches) == 3
    for batch in batches:
        assert batch.key_id == seal_signing.key_id()
        assert seal_signing.signature_problem(signed_head(batch), batch.signature) is None


def test_an_edit_with_the_unkeyed_chain_recomputed_is_named_by_the_signatures(three_batches):
    lone = three_batches[2]
    rewrite_as_superuser(
        f'UPDATE ledger_event SET payload = \'{{"memo": "a lie"}}\' WHERE id = {lone.id}',
        "ledger_event",
    )
    recompute_unkeyed_chain()
    problems = verify_ledger().problems
    batch_2, batch_3 = SealBatch.objects.order_by("id")[1:]
    key = seal_signing.key_id()
    assert problems == [
        f"chain: seal batch {batch_2.id} (seals #3–#3), event {lone.id}, does not carry key "
        f"{key}'s signature of its head: its seals or the events they seal were rewritten "
        "after sealing",
        f"chain: seal batch {batch_3.id} (seals #4–#5), events {three_batches[3].id}–"
        f"{three_batches[4].id}, does not carry key {key}'s signature of its head: its seals "
        "or the events they seal were rewritten after sealing",
    ]


def test_wiping_the_signatures_too_is_named(three_batches):
    rewrite_as_superuser(
        f'UPDATE ledger_event SET payload = \'{{"memo": "a lie"}}\' '
        f"WHERE id = {three_batches[0].id}",
        "ledger_event",
    )
    recompute_unkeyed_chain()
    rewrite_as_superuser(
        "UPDATE ledger_sealbatch SET signature = '', key_id = ''", "ledger_sealbatch"
    )
    first, *_, last = SealBatch.objects.order_by("id")
    assert chain_verify() == [
        f"chain: seal batches {first.id}–{last.id} (seals #1–#5) carry no signature, though "
        "seals from #1 on must (LEDGER_SIGNED_FROM_SEQ)"
    ]


def test_seals_verify_with_their_key_and_not_with_another(three_batches, ledger_key):
    old = seal_signing.key_id()
    ledger_key(Ed25519PrivateKey.generate())
    problems = chain_verify()
    assert len(problems) == 3
    assert all(
        f"is signed by key {old}, which is neither LEDGER_SIGNING_KEY" in p for p in problems
    )


def test_a_head_signed_by_another_key_under_the_ledger_keys_id_fails(three_batches):
    forger = Ed25519PrivateKey.generate()
    last = SealBatch.objects.order_by("id").last()
    forged = forger.sign(signed_head(last).message())
    rewrite_as_superuser(
        f"UPDATE ledger_sealbatch SET signature = '{base64.b64encode(forged).decode()}' "
        f"WHERE id = {last.id}",
        "ledger_sealbatch",
    )
    [problem] = chain_verify()
    assert f"seal batch {last.id} " in problem
    assert f"does not carry key {seal_signing.key_id()}'s signature" in problem


def test_seals_signed_before_a_rotation_verify_with_the_retired_public_key(
    three_batches, ledger_key, settings
):
    retired_public = seal_signing.public_key_b64()
    retired = seal_signing.key_id()
    new = Ed25519PrivateKey.generate()
    ledger_key(new)
    settings.LEDGER_VERIFY_KEYS = [retired_public]
    append("job:f")
    chain_seal()
    assert chain_verify() == []
    last = SealBatch.objects.order_by("id").last()
    assert last.key_id == keys.fingerprint(new) != retired
    assert set(SealBatch.objects.values_list("key_id", flat=True)) == {retired, last.key_id}


def test_seals_from_before_signing_are_a_note_once_a_signed_head_covers_them(
    three_batches, settings
):
    rewrite_as_superuser(
        "UPDATE ledger_sealbatch SET signature = '', key_id = '' WHERE first_seq < 4",
        "ledger_sealbatch",
    )
    first, second, third = SealBatch.objects.order_by("id")
    assert chain_verify() != []  # seals must be signed from #1 unless the setting says not
    settings.LEDGER_SIGNED_FROM_SEQ = 4
    report = verify_ledger()
    assert report.ok, report.problems
    assert report.notes == [
        f"chain: seal batches {first.id}–{second.id} (seals #1–#3) were sealed before seals "
        f"were signed; the signed head of batch {third.id} covers them"
    ]
    # A rewrite of an event in the unsigned part still reaches the signed head.
    rewrite_as_superuser(
        f"UPDATE ledger_event SET actor = 'm' WHERE id = {three_batches[0].id}", "ledger_event"
    )
    recompute_unkeyed_chain()
    [problem] = chain_verify()
    assert f"chain: seal batch {third.id} (seals #4–#5)" in problem
