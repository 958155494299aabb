"""Measure the CPU: double-precision matrix multiply (GFLOPS) and memory copy bandwidth.

numpy's matrix multiply runs the machine's BLAS on every core the sandbox grants, which is what
a job would get. The matrices hold small integers, so C = A·B is exact in float64 whatever the
BLAS's order of summation, and the cells the seed picks can be checked by the hub in pure Python.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from typing import Any

from agent.benchmark import proofs


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # the benchmark image and the agent's requirements carry it
        raise RuntimeError("numpy is not installed: the CPU benchmark needs it") from exc
    return numpy


def _mix64(np: Any, keys: Any) -> Any:
    """proofs.mix64 over an array of uint64 keys (wrapping arithmetic, as in Python & MASK64)."""
    z = keys + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def matrix(np: Any, salt: int, which: int, n: int) -> Any:
    """Matrix `which` of the seed, as proofs.matrix_entry defines each entry."""
    keys = np.arange(n * n, dtype=np.uint64) + np.uint64((salt + which * n * n) & proofs.MASK64)
    values = (_mix64(np, keys) % np.uint64(proofs.MATRIX_VALUES)).astype(np.int64) - 2
    return values.astype(np.float64).reshape(n, n)


def matmul(seed: str, n: int, min_seconds: float) -> dict[str, Any]:
    np = _numpy()
    salt = proofs.matrix_salt(seed)
    a, b = matrix(np, salt, 0, n), matrix(np, salt, 1, n)
    c = a @ b  # warm-up: threads started, pages touched
    runs: list[float] = []
    started = time.perf_counter()
    while not runs or time.perf_counter() - started < min_seconds:
        t0 = time.perf_counter()
        c = a @ b
        runs.append(time.perf_counter() - t0)
    best = min(runs)
    cells = proofs.probe_cells(seed, n)
    return {
        "gflops": round(2 * n**3 / best / 1e9, 2),
        "n": n,
        "runs": len(runs),
        "probes": [int(c[i, j]) for i, j in cells],
    }


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def stream_copy(seed: str, mb: int, repeats: int = 20) -> dict[str, Any]:
    """STREAM's copy on every core: each byte read once and written once. One core alone
    cannot draw the memory's bandwidth, so the array is cut into one slice per core, each
    copied by its own thread (numpy releases the interpreter's lock while it copies)."""
    np = _numpy()
    words = mb * (1 << 20) // 8
    src = np.arange(words, dtype=np.uint64) * np.uint64(proofs.STREAM_STEP)
    src += np.uint64(proofs.stream_salt(seed))
    dst = np.empty_like(src)
    threads = _cores()
    cuts = [words * k // threads for k in range(threads + 1)]
    slices = [(dst[a:b], src[a:b]) for a, b in pairwise(cuts)]
    runs = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for attempt in range(repeats + 1):  # the first touches the pages and is not counted
            t0 = time.perf_counter()
            list(pool.map(lambda pair: np.copyto(*pair), slices))
            if attempt:
                runs.append(time.perf_counter() - t0)
    best = min(runs)
    positions = proofs.stream_positions(seed, words)
    probe = int(sum(int(dst[pos]) for pos in positions) & proofs.MASK64)
    return {
        "gb_per_s": round(2 * words * 8 / best / 1e9, 2),
        "mb": mb,
        "threads": threads,
        "probe": probe,
    }
