"""`Client(hub, key)`: the entry point of the library."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import cast

import requests

from computepool_client import operations as ops
from computepool_client.jobs import Jobs
from computepool_client.models import JobQuote
from computepool_client.transport import Transport


def client_version() -> str:
    try:
        return version("computepool")
    except PackageNotFoundError:  # run from a checkout, not installed
        return "0+checkout"


class Client:
    """A submitter's view of one hub, authenticated by an API key (`Authorization: Bearer`).

    >>> client = Client("http://127.0.0.1:8000", "cpk_…")
    >>> job = client.jobs.submit(kind="script", script="echo hi", price_ceiling=10, timeout_s=60)
    >>> client.jobs.wait(job)["state"]
    'succeeded'
    """

    def __init__(
        self,
        hub: str,
        key: str,
        *,
        session: requests.Session | None = None,
        trace: str | Path | None = None,
        page_size: int = 200,
    ) -> None:
        self._http = Transport(
            hub, key, session=session, trace=trace, user_agent=f"computepool/{client_version()}"
        )
        # Rows a list, log or timeline read asks for at once (at most 200, the hub's limit).
        self.jobs = Jobs(self._http, page_size=page_size)

    @property
    def hub(self) -> str:
        return self._http.hub

    def quote(
        self,
        *,
        tier: str,
        ceiling_per_s_minor: int,
        timeout_s: int,
        slices: int = 1,
        replicas: int = 1,
        region: str = "",
        expected_runtime_s: int | None = None,
    ) -> JobQuote:
        """What a job would hold, and cost at today's spot price for `tier` in `region`."""
        query = {
            "for": "job",
            "tier": tier,
            "region": region,
            "ceiling_per_s_minor": ceiling_per_s_minor,
            "timeout_s": timeout_s,
            "slices": slices,
            "replicas": replicas,
            "expected_runtime_s": expected_runtime_s,
        }
        return cast(JobQuote, self._http.call(ops.QUOTE, query=query).json())
