"""The hardware benchmark's own figures, on this machine: how long a node's benchmark takes
through the agent's path (its sandbox included), and how much its figures move from one run to
the next on the same machine.

Each run is what a node does when the hub issues it a benchmark: a spec with a fresh seed and
the hub's default sizes (NODE_BENCHMARK_*), measured by `BenchmarkService.measure` (the
benchmark in its bubblewrap sandbox), then checked by the hub's proofs. The hub's side of the
check is timed on its own.

    .venv/bin/python -m bench.hardware [--runs 5] [--matmul-n 1024] [--stream-mb 256]
"""

import argparse
import os
import secrets
import statistics
import time

from agent.benchmark import SUITE, figures, proofs
from agent.benchmarking import BenchmarkService
from bench import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--matmul-n", type=int, default=1024)
    parser.add_argument("--stream-mb", type=int, default=256)
    parser.add_argument("--cpu-ms", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=32768)
    args = parser.parse_args()
    common.banner("hardware benchmark: duration and run-to-run spread")
    gpu = os.path.exists("/dev/nvidiactl")
    service = BenchmarkService(client=None, hub_public_key="", gpu=gpu)  # type: ignore[arg-type]
    walls: list[float] = []
    checks: list[float] = []
    series: dict[str, list[float]] = {}
    for run in range(1, args.runs + 1):
        spec = {
            "suite": SUITE,
            "seed": secrets.token_hex(16),
            "cpu": {
                "matmul_n": args.matmul_n,
                "min_seconds": args.cpu_ms / 1000,
                "stream_mb": args.stream_mb,
            },
            "gpu": {"iterations": args.iterations},
        }
        t0 = time.perf_counter()
        report = service.measure(spec)
        walls.append(time.perf_counter() - t0)
        if "error" in report:
            raise SystemExit(f"run {run}: the benchmark did not run: {report['error']}")
        t0 = time.perf_counter()
        problems = proofs.report_problems(report, spec)
        checks.append((time.perf_counter() - t0) * 1000)
        if problems:
            raise SystemExit(f"run {run}: the report does not check: {problems}")
        measured = figures(report)
        for name, value in measured.items():
            series.setdefault(name, []).append(value)
        print(
            f"run {run}: {walls[-1]:.2f} s, " + ", ".join(f"{k} {v}" for k, v in measured.items())
        )
    print()
    rows = []
    for name, values in series.items():
        median = statistics.median(values)
        worst = max(abs(v - median) for v in values) / median * 100
        rows.append(
            [name, f"{median:.4g}", f"{min(values):.4g}", f"{max(values):.4g}", f"±{worst:.1f} %"]
        )
    common.table(rows, ["figure", "median", "min", "max", "spread from the median"])
    print()
    print(f"benchmark duration (sandbox start to report): {common.spread(walls)} s")
    print(f"the hub's check of a report: {common.spread(checks)} ms")


if __name__ == "__main__":
    main()
