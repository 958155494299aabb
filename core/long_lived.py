"""What a hub process loads once, as it starts: every view (`load_views`, for WSGI and ASGI
processes alike) and, in an ASGI process, those objects kept out of the cyclic garbage collector
(`freeze_loaded`).

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


def load_views() -> None:
    """Import every view's module now, through the URLconf, as a hub process starts.

    Django loads the URLconf on a process's first request. Here that imports the API, the web
    app and the relay with its Redis client, about a second of work holding the interpreter's
    lock: a freshly started worker's first requests, and the others its threads were serving,
    would all wait behind it."""
    get_resolver().url_patterns  # noqa: B018 (imports each view's module)


def freeze_loaded() -> None:
    """Load every view, collect, then freeze all that is left."""
    load_views()
    gc.collect()
    gc.freeze()
