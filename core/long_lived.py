"""The objects a hub process loads once, kept out of the cyclic garbage collector.

A full collection walks every object the process tracks, with every thread and the event loop
stopped. Each walked the ~160k objects of Django, DRF and this project's modules, which live as
long as the process does: 100–180 ms in an ASGI worker relaying hundreds of streams (every
stream's next tokens waited for it), and 100–330 ms in a gunicorn thread worker under load,
where a completion that holds an operator's earnings or the platform's revenue row until its
commit makes every other completion of the hub wait with it. Freezing those objects once they
are loaded leaves a full collection only what the requests made.
"""

import gc

from django.urls import get_resolver


def freeze_loaded() -> None:
    """Load every view (through the URLconf), collect, then freeze all that is left."""
    get_resolver().url_patterns  # noqa: B018 (imports each view's module)
    gc.collect()
    gc.freeze()
