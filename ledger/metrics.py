from collections.abc import Iterable

from django.db.models import Max

from ledger.models import Event, SealBatch

EVENTS_HELP = (
    "Events in the ledger's log. kind=all is the highest event id: read from the primary key's "
    "index, it counts ids taken by writes that rolled back too, so it may exceed the rows a "
    "little. kind=unsealed counts, exactly, the events at or past the last sealing pass's "
    "horizon (an index range over the log's tail; every event before it is sealed), or kind=all's "
    "figure before the first pass."
)


def event_samples() -> Iterable[tuple[dict[str, str], float]]:
    # A COUNT(*) of the whole log on every scrape would read every row of the largest table.
    highest = Event.objects.aggregate(highest=Max("id"))["highest"] or 0
    last = SealBatch.objects.order_by("-id").values_list("horizon_txid", flat=True).first()
    unsealed = highest if last is None else Event.objects.filter(txid__gte=last).count()
    return [({"kind": "all"}, highest), ({"kind": "unsealed"}, unsealed)]
