"""What a benchmark's seed decides, and the values an honest run must report for it.

The hub picks a fresh seed for every benchmark it issues. The seed chooses the inputs (the
matrices the CPU multiplies, the values the GPU kernels start from, the pattern written over the
GPU's memory), and the report must carry values that depend on those inputs: a report made for
another seed, on another machine, does not check. Every value is an exact integer, whatever the
hardware, its rounding or its summation order, so the hub checks them with this module and
nothing else. Pure Python: the hub imports it without numpy.

What the seed cannot prove is how long the work took: timings are the agent's. docs/nodes.md
says what bounds a lying agent (replication, reliability, the hub's own clock).
"""

from __future__ import annotations

import hashlib
from typing import Any

from agent.benchmark.ptx import CHAINS, FMA_PER_ITERATION, ROUNDS

MASK64 = (1 << 64) - 1
FP32_LANES = 1024
FP16_LANES = 64
MATRIX_VALUES = 5  # entries are -2 … 2: every product and sum stays exact in float64
PROBES = 16


def seed_int(seed: str) -> int:
    """The hub's seed is 32 hex digits; everything below derives from its integer."""
    return int(seed, 16)


def _derive(seed: str, label: str) -> int:
    digest = hashlib.sha256(f"{seed}:{label}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def mix64(key: int) -> int:
    """splitmix64's finaliser: the same integers in Python and in numpy's uint64 arithmetic."""
    z = (key + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


# -- CPU ---------------------------------------------------------------------------------------


def matrix_salt(seed: str) -> int:
    return _derive(seed, "matrix")


def matrix_entry(salt: int, which: int, n: int, i: int, j: int) -> int:
    """Entry (i, j) of matrix `which` (0 = A, 1 = B), in -2 … 2."""
    key = (salt + which * n * n + i * n + j) & MASK64
    return mix64(key) % MATRIX_VALUES - 2


def probe_cells(seed: str, n: int) -> list[tuple[int, int]]:
    """The cells of C = A·B the report must state."""
    base = _derive(seed, "probes")
    return [(mix64(base + 2 * k) % n, mix64(base + 2 * k + 1) % n) for k in range(PROBES)]


def matmul_cell(seed: str, n: int, i: int, j: int) -> int:
    salt = matrix_salt(seed)
    return sum(matrix_entry(salt, 0, n, i, k) * matrix_entry(salt, 1, n, k, j) for k in range(n))


def stream_salt(seed: str) -> int:
    """The memory test's array holds (index · STREAM_STEP + salt) mod 2^64."""
    return _derive(seed, "stream")


STREAM_STEP = 0x9E3779B97F4A7C15


def stream_probe(seed: str, words: int) -> int:
    """The sum mod 2^64 of the copied array's words at the probe positions."""
    salt = stream_salt(seed)
    return (
        sum((pos * STREAM_STEP + salt) & MASK64 for pos in stream_positions(seed, words)) & MASK64
    )


def stream_positions(seed: str, words: int) -> list[int]:
    base = _derive(seed, "stream-probes")
    return [mix64(base + k) % words for k in range(PROBES)]


# -- GPU ---------------------------------------------------------------------------------------


def fp32_params(seed: str) -> tuple[int, int]:
    """(lane xor, increment b) of the float32 kernel."""
    value = _derive(seed, "fp32")
    return value % FP32_LANES, 1 + (value >> 10) % 3


def fp16_params(seed: str) -> tuple[int, int]:
    value = _derive(seed, "fp16")
    return value % FP16_LANES, 1 + (value >> 6) % 3


def vram_pattern(seed: str) -> int:
    """The 32-bit word written over every allocated byte; never 0, so a fresh page fails."""
    return (_derive(seed, "vram") & 0xFFFFFFFF) | 1


def fp32_iterations_limit() -> int:
    """The most loop iterations for which every chain stays an exact float32 integer."""
    largest_b = 3
    return ((1 << 24) // CHAINS - FP32_LANES) // (ROUNDS * largest_b)


def _start_sum(threads: int, xor: int, lanes: int) -> int:
    """Σ (idx ^ xor) mod lanes over idx < threads, in at most `lanes` steps: xor with a value
    below `lanes` permutes each whole block of `lanes` indices."""
    blocks, rest = divmod(threads, lanes)
    return blocks * lanes * (lanes - 1) // 2 + sum(j ^ xor for j in range(rest))


def fp32_expected(seed: str, threads: int, iterations: int) -> int:
    """The sum over threads of what each stores: its eight chains, each x0 + length·b."""
    xor, b = fp32_params(seed)
    length = iterations * ROUNDS
    return CHAINS * (_start_sum(threads, xor, FP32_LANES) + threads * length * b)


def fp16_expected(seed: str, threads: int) -> int:
    """Each thread's chains come back to x0 in both lanes: 2 · CHAINS · x0 per thread."""
    xor, _ = fp16_params(seed)
    return 2 * CHAINS * _start_sum(threads, xor, FP16_LANES)


def flops_fp32(threads: int, iterations: int) -> int:
    return threads * iterations * FMA_PER_ITERATION * 2


def flops_fp16(threads: int, iterations: int) -> int:
    """Two lanes per instruction, two operations per lane."""
    return threads * iterations * FMA_PER_ITERATION * 4


# -- checking a report -------------------------------------------------------------------------


def report_problems(report: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """What in `report` disagrees with what `spec`'s seed demands; empty when it all checks."""
    seed, problems = spec["seed"], []
    if report.get("seed") != seed:
        problems.append("the report is for another seed")
    cpu = report.get("cpu")
    if cpu:
        n = spec["cpu"]["matmul_n"]
        expected = [matmul_cell(seed, n, i, j) for i, j in probe_cells(seed, n)]
        if cpu.get("n") != n or cpu.get("probes") != expected:
            problems.append("cpu: the matrix product's probes are wrong")
    memory = report.get("memory")
    if memory:
        words = spec["cpu"]["stream_mb"] * (1 << 20) // 8
        if memory.get("mb") != spec["cpu"]["stream_mb"] or memory.get("probe") != stream_probe(
            seed, words
        ):
            problems.append("memory: the copied array's probe is wrong")
    iterations = spec["gpu"]["iterations"]
    for gpu in report.get("gpus") or []:
        name = f"gpu {gpu.get('index')}"
        fp32 = gpu.get("fp32")
        if fp32 and fp32.get("proof") != fp32_expected(seed, fp32.get("threads", 0), iterations):
            problems.append(f"{name}: the float32 kernel's sum is wrong")
        fp16 = gpu.get("fp16")
        if fp16 and fp16.get("proof") != fp16_expected(seed, fp16.get("threads", 0)):
            problems.append(f"{name}: the float16 kernel's sum is wrong")
        vram = gpu.get("vram_allocatable")
        if vram and vram.get("verified_blocks") != vram.get("blocks"):
            problems.append(f"{name}: memory it allocated did not hold the seed's pattern")
    return problems
