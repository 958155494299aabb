"""Builders for node tests: capabilities as the agent reports them, registered nodes, agents."""

import copy
from typing import Any

import pytest

from tests.conftest import client_with_key


def gpu(
    name: str | None = "NVIDIA GeForce RTX 4090",
    vram_total_mb: int | None = 24564,
    compute_capability: str | None = "8.9",
    driver_version: str | None = "550.54.14",
    vendor: str = "nvidia",
    index: int = 0,
) -> dict[str, Any]:
    return {
        "index": index,
        "name": name,
        "vendor": vendor,
        "uuid": f"GPU-{index:04d}",
        "vram_total_mb": vram_total_mb,
        "vram_free_mb": vram_total_mb,
        "compute_capability": compute_capability,
        "driver_version": driver_version,
        "utilization_pct": 3,
        "temperature_c": 40,
        "power_w": 21.5,
        "source": "nvml",
    }


# The agent contract's example report.
BASE = {
    "gpus": [gpu()],
    "cpu": {
        "model": "AMD Ryzen 9 7950X",
        "arch": "x86_64",
        "physical_cores": 16,
        "logical_cores": 32,
        "avx": True,
        "avx2": True,
        "avx512": True,
    },
    "ram_mb": 64000,
    "disk_free_mb": 500000,
    "os": {"system": "Linux", "release": "6.1.0", "machine": "x86_64"},
    "sandboxes": ["docker", "gvisor", "bwrap"],
    "detection": {"gpu_source": "nvml", "notes": ["GPUtil not installed"]},
    "agent_version": "0.1.0",
}


def capabilities(**overrides: Any) -> dict[str, Any]:
    caps = copy.deepcopy(BASE)
    caps.update(overrides)
    return caps


def register_node(operator, *, name: str = "rig-1", region: str = "IN", **caps: Any):
    """Register through the service, as the API would; (node, agent key)."""
    from nodes.services import node_register

    return node_register(
        operator=operator,
        name=name,
        region=region,
        capabilities=capabilities(**caps),
        actor=f"user:{operator.pk}",
    )


@pytest.fixture
def bobs_node(bob):
    return register_node(bob)


@pytest.fixture
def agent():
    """An API client authenticated with an agent key: agent(key)."""
    return client_with_key


def node_events(node) -> list[tuple[str, dict]]:
    from ledger.models import Event

    return [
        (event.type, event.payload)
        for event in Event.objects.filter(stream=f"node:{node.pk}").order_by("version")
    ]


def beat(client, status: str = "available", **body: Any):
    return client.post("/api/v1/agent/heartbeat", {"status": status, **body}, format="json")


class Statements:
    """The SQL a block ran, without the SAVEPOINT/RELEASE pairs that a test's own transaction
    adds around every atomic() (in production those blocks are BEGIN/COMMIT, not statements)."""

    def __init__(self) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        self._context = CaptureQueriesContext(connection)

    def __enter__(self) -> "Statements":
        self._context.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._context.__exit__(*exc)

    @property
    def sql(self) -> list[str]:
        return [
            q["sql"]
            for q in self._context.captured_queries
            if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO"))
        ]

    def __len__(self) -> int:
        return len(self.sql)
