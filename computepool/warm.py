"""What a server process does once, after loading the application and before its first request."""

import gc


def warm_and_freeze() -> None:
    """Import what the first request would (the URL configuration, and with it every view,
    serializer and DRF), then move every object alive now into the collector's permanent
    generation. A process holds some 150,000 such objects (modules, classes, functions, the
    app registry), all alive until it exits, and each full collection walked all of them again:
    about 0.06 ms per request on average, measured in process (docs/benchmarks.md, the tenth
    round). Frozen, they are never walked; what requests allocate is collected as before."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - the property imports every view module
    gc.collect()  # what import left as garbage is freed, not frozen
    gc.freeze()
