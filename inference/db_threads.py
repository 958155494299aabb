"""The relay's database work, from its async views, on a few threads of its own.

Under ASGI each request's sync work would otherwise get a thread of its own, each with a
database connection kept for CONN_MAX_AGE: hundreds of streams opened together then ask
PostgreSQL for hundreds of connections ("too many clients"). A fixed pool
(INFERENCE_DB_THREADS per process) bounds them; each thread keeps its connection and drops a
broken or aged one before each call, as Django does at a request's start.

Under WSGI (the test client, or a WSGI hub) a request already owns its thread, and the
database work runs there, in the request's transaction and connection.
"""

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.db import close_old_connections
from django.http import HttpRequest

T = TypeVar("T")
Runner = Callable[..., Awaitable[Any]]
_pool: ThreadPoolExecutor | None = None


async def in_pool(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(settings.INFERENCE_DB_THREADS, thread_name_prefix="relay-db")

    def run() -> T:
        close_old_connections()
        return fn(*args, **kwargs)

    return await asyncio.get_running_loop().run_in_executor(_pool, run)


async def in_request_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await sync_to_async(fn)(*args, **kwargs)


def runner(request: HttpRequest) -> Runner:
    return in_request_thread if isinstance(request, WSGIRequest) else in_pool
