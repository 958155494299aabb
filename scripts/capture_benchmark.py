"""Run the hardware benchmark several times on this machine, check every report's proofs, and
write the reports and their spread into one folder.

    PYTHONPATH=. python3 scripts/capture_benchmark.py OUT_DIR [RUNS]

Each run is `python -m agent.benchmark` in its own process with a fresh seed, as the hub would
issue it. The reports become fixtures (tests/agent/fixtures/benchmark/, with a line in SOURCES.md)
and the spread shows how steady each figure is on that machine from one run to the next.
"""

from __future__ import annotations

import json
import platform
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

from agent.benchmark import SUITE, figures, proofs

SPEC = {
    "suite": SUITE,
    "cpu": {"matmul_n": 1024, "min_seconds": 1.0, "stream_mb": 512},
    "gpu": {"iterations": 32768},
}


def main(out: Path, runs: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    spec_file = out / "spec.json"
    records, failures = [], 0
    for number in range(1, runs + 1):
        spec = dict(SPEC, seed=secrets.token_hex(16))
        spec_file.write_text(json.dumps(spec))
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "agent.benchmark", str(spec_file)],
            capture_output=True,
            text=True,
            check=False,
        )
        wall = round(time.perf_counter() - started, 3)
        record = {"run": number, "spec": spec, "exit": done.returncode, "wall_s": wall}
        if done.returncode == 0:
            record["report"] = json.loads(done.stdout)
            record["problems"] = proofs.report_problems(record["report"], spec)
        else:
            record["stderr"] = done.stderr[-4000:]
        failures += done.returncode != 0 or bool(record.get("problems"))
        records.append(record)
        print(f"run {number}: exit {done.returncode}, {wall} s, {record.get('problems')}")
        if done.returncode:
            print(done.stderr[-2000:])
    (out / "runs.json").write_text(json.dumps(records, indent=2) + "\n")
    lines = [
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
        f"{platform.platform()} / Python {platform.python_version()}",
        f"{runs} runs, {failures} failed or disagreed with their seed",
        "figure: median [min, max] (spread from the median)",
    ]
    series: dict[str, list[float]] = {}
    for record in records:
        for key, value in figures(record.get("report", {"elapsed_s": 0})).items():
            series.setdefault(key, []).append(value)
    for key, values in series.items():
        median = statistics.median(values)
        low, high = min(values), max(values)
        spread = max(median - low, high - median) / median * 100 if median else 0.0
        lines.append(f"{key}: {median} [{low}, {high}] (±{spread:.1f} %)")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 5))
