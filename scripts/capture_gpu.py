"""Capture a real NVIDIA machine's tool output and the agent's detection of it, into one folder.

    PYTHONPATH=. python3 scripts/capture_gpu.py OUT_DIR

Run it on a machine with an NVIDIA GPU and the agent's requirements (requirements/agent.txt).
It writes, unedited:

- ``table.txt``, ``list-L.txt``, ``q.txt``, ``q-x.xml``: ``nvidia-smi``, ``-L``, ``-q``, ``-q -x``;
- ``query-csv*.csv``: ``--query-gpu`` with the agent's own field list, in the three formats the
  parsers read (header with units, header without units, neither);
- ``detection.json``: every GPU source run on its own (NVML, GPUtil, nvidia-smi), then
  ``detect_capabilities()`` and ``detect_gpu_state()`` as the agent runs them, each with its
  wall time;
- ``machine.txt`` and ``commands.txt``: what ran where, with exit codes.

The tool files become test fixtures (tests/agent/fixtures/hardware/nvidia-smi/, with a line in
SOURCES.md); ``detection.json`` is what the parsers' answers are checked against.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from agent.detect import detect_capabilities, detect_gpu_state, nvidia_smi, sources
from agent.detect.tools import Host

TIMEOUT_S = 60


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    commands: list[str] = []
    fields = ",".join(nvidia_smi.QUERY_FIELDS)
    captures = {
        "table.txt": [],
        "list-L.txt": ["-L"],
        "q.txt": ["-q"],
        "q-x.xml": ["-q", "-x"],
        "query-csv.csv": [f"--query-gpu={fields}", "--format=csv"],
        "query-csv-nounits.csv": [f"--query-gpu={fields}", "--format=csv,nounits"],
        "query-csv-noheader-nounits.csv": [
            f"--query-gpu={fields}",
            "--format=csv,noheader,nounits",
        ],
    }
    for name, args in captures.items():
        argv = ["nvidia-smi", *args]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            commands.append(f"{' '.join(argv)} -> {exc}")
            continue
        (out / name).write_bytes(done.stdout)
        if done.stderr:
            (out / f"{name}.stderr").write_bytes(done.stderr)
        commands.append(f"{' '.join(argv)} -> exit {done.returncode}, {len(done.stdout)} bytes")
    (out / "commands.txt").write_text("\n".join(commands) + "\n")
    (out / "machine.txt").write_text(
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}\n"
        f"{platform.platform()}\nPython {platform.python_version()}\n"
    )
    (out / "detection.json").write_text(json.dumps(detection(), indent=2, default=str) + "\n")
    return 0


def detection() -> dict[str, object]:
    host = Host()
    report: dict[str, object] = {}
    for name, source in (
        ("nvml", sources.nvml_gpus),
        ("gputil", sources.gputil_gpus),
        ("nvidia-smi", sources.nvidia_smi_gpus),
    ):
        notes: list[str] = []
        started = time.perf_counter()
        gpus = source(host, notes)
        report[name] = {
            "seconds": round(time.perf_counter() - started, 3),
            "gpus": None if gpus is None else [gpu.to_dict() for gpu in gpus],
            "notes": notes,
        }
    started = time.perf_counter()
    report["detect_capabilities"] = detect_capabilities().to_dict()
    report["detect_capabilities_seconds"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    report["detect_gpu_state"] = detect_gpu_state()
    report["detect_gpu_state_seconds"] = round(time.perf_counter() - started, 3)
    return report


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
