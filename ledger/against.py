"""verify_ledger --against: does the log still hold the history an export's head vouches for?

The head (ledger.exports.export_head), kept with the export outside the database, says that the
chain from seal #1 to seal #last_seq hashed to head_hash, under the ledger key's signature. Here
the signature is checked with the trusted keys and the chain is recomputed from the events as
they are now, in seal order, from the genesis: a changed or deleted event that was sealed before
the export cannot reach the same head, even if every seal and batch since was recomputed, and
the signature cannot be redone without the key. The export's lines must still hash to its CSV.
"""

from typing import Any

from ledger.chain import GENESIS, link_hash
from ledger.exports import export_sha256
from ledger.models import EventSeal
from ledger.models_cashouts import CashoutExport
from ledger.projections import READ_CHUNK, LoggedEvent
from ledger.seal_signing import head_from_json, signature_problem


def against_check(data: Any, name: str) -> list[str]:
    """What in the log no longer matches the head file `data` (read from `name`)."""
    where = f"against {name}"
    if not isinstance(data, dict) or not data.get("chain"):
        return [
            f"{where}: it holds no signed chain head (an export made before anything was "
            "sealed, or before seals were signed, carries none)"
        ]
    try:
        head, signature = head_from_json(data["chain"])
    except (KeyError, TypeError) as exc:
        return [f"{where}: its chain head is malformed ({exc})"]
    why = signature_problem(head, signature)
    if why is not None:
        return [f"{where}: its chain head {why}: it is not a head this ledger signed"]
    return _history_check(where, head.last_seq, head.head_hash, data["chain"]) + _csv_check(
        where, data
    )


def _history_check(where: str, last_seq: int, head_hash: str, chain: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    fields = [f"event__{name}" for name in LoggedEvent._fields]
    rows = (
        EventSeal.objects.filter(seq__lte=last_seq)
        .order_by("seq")
        .values_list("seq", "hash", *fields)
        .iterator(chunk_size=READ_CHUNK)
    )
    previous, expected = GENESIS, 1
    event, first_differs = None, None
    for seq, stored, *values in rows:
        if seq != expected:
            problems.append(f"{where}: {_missing(expected, seq - 1)}")
            expected = seq
        event = LoggedEvent._make(values)
        previous = link_hash(previous, event)
        if first_differs is None and previous != stored:
            first_differs = (seq, event)
        expected += 1
    if expected <= last_seq:
        problems.append(f"{where}: {_missing(expected, last_seq)}")
    if previous != head_hash:
        line = (
            f"{where}: the log up to seal #{last_seq} no longer hashes to the exported head "
            f"{head_hash[:16]}: an event sealed before the export was changed or deleted"
        )
        if first_differs is not None:
            seq, changed = first_differs
            line += f" (the first to differ from its seal: event {changed.id}, seal #{seq})"
        problems.append(line)
    exported_last = chain.get("last_event_id")
    if event is not None and exported_last is not None and event.id != exported_last:
        problems.append(
            f"{where}: seal #{last_seq} is event {event.id}, the export says {exported_last}"
        )
    return problems


def _missing(first: int, last: int) -> str:
    if first == last:
        return f"seal #{first} of the exported history is missing"
    return f"seals #{first}–#{last} of the exported history are missing"


def _csv_check(where: str, data: dict[str, Any]) -> list[str]:
    export_id = data.get("export_id")
    export = CashoutExport.objects.filter(pk=export_id).first() if type(export_id) is int else None
    if export is None:
        return [f"{where}: export {export_id} is no longer in the database"]
    if export_sha256(export) != data.get("sha256"):
        return [f"{where}: export {export.pk}'s lines no longer give the CSV it was exported as"]
    return []
