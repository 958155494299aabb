"""The hub's settings plus the bench-only reference endpoint (bench/urls.py).

Used by the hubs the benchmarks start (DJANGO_SETTINGS_MODULE=bench.settings) and by the
benchmarks' own Django setup; nothing else of the hub is changed.
"""

from computepool.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
