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


def register_node(
    operator, *, name: str = "rig-1", region: str = "IN", benchmarked: bool = True, **caps: Any
):
    """Register through the service, as the API would; (node, agent key). With `benchmarked`,
    its first benchmark is then reported as an honest agent on the GPUs it names would report
    it, so the node is paid and routed as what it claims (benchmark_pass)."""
    from nodes.services import node_register

    node, key = node_register(
        operator=operator,
        name=name,
        region=region,
        capabilities=capabilities(**caps),
        actor=f"user:{operator.pk}",
    )
    if benchmarked:
        benchmark_pass(node)
        node.refresh_from_db()
    return node, key


def honest_report(spec: dict[str, Any], gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """What `python -m agent.benchmark` prints for `spec` on a machine with these GPUs, each
    {"name", "fp32_tflops", "vram_mb", "compute_capability"}: every proof right for the seed.
    The GPU figures are given, not measured: the test machines have no GPU (the H200's real
    reports are in tests/agent/fixtures/benchmark/)."""
    from agent.benchmark import SUITE, proofs

    seed, n = spec["seed"], spec["cpu"]["matmul_n"]

    def timed(flops: int, tflops: float) -> dict[str, Any]:
        return {"tflops": tflops, "ms": flops / (tflops * 1e12) * 1000, "threads": threads}

    words = spec["cpu"]["stream_mb"] * (1 << 20) // 8
    iterations, threads = spec["gpu"]["iterations"], 8 * 256 * 16
    return {
        "suite": SUITE,
        "seed": seed,
        "cpu": {
            "gflops": 50.0,
            "n": n,
            "runs": 10,
            "probes": [proofs.matmul_cell(seed, n, i, j) for i, j in proofs.probe_cells(seed, n)],
        },
        "memory": {
            "gb_per_s": 20.0,
            "mb": spec["cpu"]["stream_mb"],
            "threads": 2,
            "probe": proofs.stream_probe(seed, words),
        },
        "gpus": [
            {
                "index": index,
                "name": gpu["name"],
                "compute_capability": gpu.get("compute_capability", "8.9"),
                "fp32": timed(proofs.flops_fp32(threads, iterations), gpu["fp32_tflops"])
                | {"proof": proofs.fp32_expected(seed, threads, iterations)},
                "fp16": timed(proofs.flops_fp16(threads, iterations), 2 * gpu["fp32_tflops"])
                | {"proof": proofs.fp16_expected(seed, threads)},
                "bandwidth": {"gb_per_s": 900.0, "bytes": 1 << 30, "ms": 2.4},
                "vram_allocatable": {"mb": gpu["vram_mb"], "blocks": 4, "verified_blocks": 4},
            }
            for index, gpu in enumerate(gpus)
        ],
        "elapsed_s": 0.0,
    }


def claimed_gpus(node) -> list[dict[str, Any]]:
    """The GPUs the node reported, with the figures an honest benchmark of each would find: its
    tier's spec-sheet float32 figure (10 TFLOPS where the tier has none) and its VRAM."""
    from nodes.models import GpuTier
    from nodes.tiers import TierTable

    tiers = TierTable.load()
    out = []
    for gpu in node.capabilities.get("gpus") or []:
        if gpu.get("vendor") != "nvidia":
            continue  # the benchmark measures NVIDIA GPUs only
        tier = tiers.for_gpu(gpu.get("name"), gpu.get("vram_total_mb"))
        spec = GpuTier.objects.filter(slug=tier.slug).values_list("spec_fp32_tflops", flat=True)
        figure = next(iter(spec), None)
        out.append(
            {
                "name": gpu.get("name") or "",
                "fp32_tflops": float(figure) if figure is not None else 10.0,
                "vram_mb": gpu.get("vram_total_mb") or 0,
                "compute_capability": gpu.get("compute_capability") or "8.9",
            }
        )
    return out


def benchmark_pass(node, gpus: list[dict[str, Any]] | None = None):
    """Take the node's due benchmark and report it honestly (`gpus`: claimed_gpus by default)."""
    from nodes.services import benchmark_report, benchmark_take

    node.refresh_from_db()
    benchmark = benchmark_take(node=node)
    assert benchmark is not None, "the node has no benchmark due"
    report = honest_report(benchmark.spec, claimed_gpus(node) if gpus is None else gpus)
    return benchmark_report(node=node, benchmark_id=benchmark.pk, report=report)


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
