from collections.abc import Iterable

from ledger.models import Event, EventSeal

EVENTS_HELP = "Events in the ledger's log."


def event_samples() -> Iterable[tuple[dict[str, str], float]]:
    total = Event.objects.count()
    sealed = EventSeal.objects.count()
    return [({"kind": "all"}, total), ({"kind": "unsealed"}, total - sealed)]
