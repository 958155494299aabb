"""The hardware benchmark: what a node can really do, measured where its jobs run.

The hub issues a benchmark spec (signed, with a fresh seed); the agent runs
`python -m agent.benchmark` inside its sandbox with the spec as input, and reports what it
prints. `run` measures the CPU, memory bandwidth and every NVIDIA GPU the driver shows;
AMD and Apple GPUs are not measured yet (docs/nodes.md).
"""

from __future__ import annotations

import time
from typing import Any

SUITE = "cp-bench/1"


class BadSpec(ValueError):
    """The benchmark spec is not one this agent can run."""


def _number(section: dict[str, Any], key: str, kind: type, low: float, high: float) -> Any:
    value = section.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
        raise BadSpec(f"{key} must be a number in [{low}, {high}]")
    return kind(value)


def parse(spec: dict[str, Any]) -> dict[str, Any]:
    from agent.benchmark import proofs

    if spec.get("suite") != SUITE:
        raise BadSpec(f"unknown benchmark suite {spec.get('suite')!r} (this agent runs {SUITE})")
    seed = spec.get("seed")
    if not isinstance(seed, str) or len(seed) != 32:
        raise BadSpec("seed must be 32 hex digits")
    try:
        proofs.seed_int(seed)
    except ValueError as exc:
        raise BadSpec("seed must be 32 hex digits") from exc
    cpu, gpu = spec.get("cpu") or {}, spec.get("gpu") or {}
    return {
        "seed": seed,
        "matmul_n": _number(cpu, "matmul_n", int, 64, 8192),
        "min_seconds": _number(cpu, "min_seconds", float, 0.1, 30),
        "stream_mb": _number(cpu, "stream_mb", int, 8, 4096),
        "iterations": _number(gpu, "iterations", int, 1, proofs.fp32_iterations_limit()),
    }


def figures(report: dict[str, Any]) -> dict[str, float]:
    """A report's figures by name (gpu<N>_… per GPU), for comparing runs."""
    out = {}
    if "cpu" in report:
        out["cpu_gflops"] = report["cpu"]["gflops"]
        out["memory_gb_per_s"] = report["memory"]["gb_per_s"]
    for gpu in report.get("gpus", []):
        for key, path in (
            ("fp32_tflops", ("fp32", "tflops")),
            ("fp16_tflops", ("fp16", "tflops")),
            ("bandwidth_gb_per_s", ("bandwidth", "gb_per_s")),
            ("vram_allocatable_mb", ("vram_allocatable", "mb")),
        ):
            if path[0] in gpu:
                out[f"gpu{gpu['index']}_{key}"] = gpu[path[0]][path[1]]
    out["elapsed_s"] = report["elapsed_s"]
    return out


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Every measurement the spec asks for; a part that cannot run says why in its place."""
    from agent.benchmark import cpu, gpu
    from agent.benchmark.cuda import CudaError, NoDriver

    params = parse(spec)
    started = time.perf_counter()
    report: dict[str, Any] = {"suite": SUITE, "seed": params["seed"]}
    try:
        report["cpu"] = cpu.matmul(params["seed"], params["matmul_n"], params["min_seconds"])
        report["memory"] = cpu.stream_copy(params["seed"], params["stream_mb"])
    except (RuntimeError, MemoryError) as exc:
        report["cpu_error"] = str(exc)
    try:
        report["gpus"] = gpu.measure(params["seed"], params["iterations"])
    except (NoDriver, CudaError) as exc:
        report["gpus"], report["gpu_error"] = [], str(exc)
    report["elapsed_s"] = round(time.perf_counter() - started, 3)
    return report
