"""What a hub process loads once, as it starts: every view (`load_views`), and then those
objects kept out of the cyclic garbage collector (`freeze_loaded`), in WSGI and ASGI processes
alike.

A full collection walks every object the process tracks, and the ~160k objects of Django, DRF
and this project's modules live as long as the process does. Walked, they cost twice:
- a pause: each full collection took 100–180 ms with an ASGI process's event loop stopped (the
  relay's streams waited for it), and 100–330 ms with a gunicorn worker's threads stopped, the
  whole tail of a heartbeat's latency on that worker;
- work on every request: an idle node's heartbeat, counted in instructions (`bench.instructions`,
  exact where timings on this machine swing by a tenth), runs about 7 % fewer of them with the
  loaded objects frozen, most of it the collections' walks.
Freezing them once they are loaded leaves each collection only what the requests made.
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
