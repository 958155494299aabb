"""The objects an ASGI hub process loads once, kept out of the cyclic garbage collector.

A full collection walks every object the process tracks. A hub serving the relay holds
hundreds of streams open, and what they allocate keeps triggering full collections every few
seconds. Each of those walked the ~160k objects of Django, DRF and this project's modules,
which live as long as the process does. That took 100–180 ms with the event loop stopped,
and every stream's next tokens waited for it. Freezing those objects once they are loaded
leaves each full collection only what the requests made.

Not done for the WSGI processes: a full collection stops a gunicorn worker's threads for as
long, but freezing there gave the throughput bench no gain that its alternating pairs could tell
from the machine's swings (docs/decisions.md).
"""

import gc

from django.urls import get_resolver


def freeze_loaded() -> None:
    """Load every view (through the URLconf), collect, then freeze all that is left."""
    get_resolver().url_patterns  # noqa: B018 (imports each view's module)
    gc.collect()
    gc.freeze()
