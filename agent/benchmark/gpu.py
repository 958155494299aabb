"""Measure each NVIDIA GPU through the driver alone: float32 and float16 arithmetic, memory
bandwidth, and how much memory can really be allocated.

Each kernel runs on every multiprocessor (BLOCKS_PER_SM blocks of THREADS each), so a launch
takes about as long on a laptop GPU as on a data-centre one; the median of REPEATS timed
launches is reported, after one untimed launch that warms the clocks.
"""

from __future__ import annotations

import ctypes
import statistics
import struct
from array import array
from typing import Any

from agent.benchmark import proofs, ptx
from agent.benchmark.cuda import CUDA_ERROR_OUT_OF_MEMORY, Context, CudaError, Device, Driver

THREADS = 256
BLOCKS_PER_SM = 8
REPEATS = 5
MB = 1 << 20
COPY_BYTES_MAX = 1 << 30
ALLOC_CHUNK_START = 1 << 30
ALLOC_CHUNK_MIN = 64 * MB


def _median_ms(ctx: Context, run: Any) -> float:
    run()  # warm-up: clocks up, caches filled
    ctx.synchronize()
    times = []
    for _ in range(REPEATS):
        with ctx.timed() as elapsed:
            run()
        times.append(elapsed[0])
    return statistics.median(times)


def _sum_floats(raw: bytes) -> int:
    values = array("f")
    values.frombytes(raw)
    return sum(int(value) for value in values)


def _half(value: float) -> int:
    return struct.unpack("<H", struct.pack("<e", value))[0]


def _fma_kernel(
    ctx: Context, device: Device, ptx_text: str, name: str, args: list[Any], flops: int
) -> dict[str, Any]:
    """Launch a chain-of-FMAs kernel over every multiprocessor; its rate and the sum of what
    its threads stored (the proof). `args` follows the kernel's output pointer."""
    grid = device.multiprocessors * BLOCKS_PER_SM
    threads = grid * THREADS
    module = ctx.load_ptx(ptx_text)
    out = ctx.alloc(threads * 4)
    try:
        kernel = ctx.function(module, name)
        launch_args = [ctypes.c_uint64(out), *args]
        ms = _median_ms(ctx, lambda: ctx.launch(kernel, grid, THREADS, launch_args))
        proof = _sum_floats(ctx.copy_to_host(out, threads * 4))
    finally:
        ctx.free(out)
        ctx.unload(module)
    work = flops(threads)
    return {
        "tflops": round(work / (ms / 1000) / 1e12, 3),
        "ms": round(ms, 3),
        "threads": threads,
        "proof": proof,
    }


def fp32(ctx: Context, device: Device, seed: str, iterations: int) -> dict[str, Any]:
    xor, b = proofs.fp32_params(seed)
    args = [
        ctypes.c_float(1.0),
        ctypes.c_float(float(b)),
        ctypes.c_uint32(xor),
        ctypes.c_uint32(iterations),
    ]
    return _fma_kernel(
        ctx,
        device,
        ptx.fp32_ptx(),
        ptx.FP32_KERNEL,
        args,
        lambda threads: proofs.flops_fp32(threads, iterations),
    )


def fp16(ctx: Context, device: Device, seed: str, iterations: int) -> dict[str, Any]:
    xor, b = proofs.fp16_params(seed)
    one, plus, minus = _half(1.0), _half(float(b)), _half(-float(b))
    args = [
        ctypes.c_uint32(one | one << 16),
        ctypes.c_uint32(plus | plus << 16),
        ctypes.c_uint32(minus | minus << 16),
        ctypes.c_uint32(xor),
        ctypes.c_uint32(iterations),
    ]
    return _fma_kernel(
        ctx,
        device,
        ptx.fp16_ptx(),
        ptx.FP16_KERNEL,
        args,
        lambda threads: proofs.flops_fp16(threads, iterations),
    )


def bandwidth(ctx: Context, seed: str) -> dict[str, Any]:
    """Device-to-device copies: each byte is read once and written once."""
    free, _ = ctx.memory_info()
    size = min(COPY_BYTES_MAX, free // 4) // 4 * 4
    pattern = proofs.vram_pattern(seed)
    src, dst = ctx.alloc(size), ctx.alloc(size)
    try:
        ctx.memset32(src, pattern, size // 4)
        ms = _median_ms(ctx, lambda: ctx.copy_device(dst, src, size))
        (copied,) = struct.unpack("<I", ctx.copy_to_host(dst + size - 4, 4))
    finally:
        ctx.free(src)
        ctx.free(dst)
    if copied != pattern:
        raise CudaError("cuMemcpyDtoD_v2 (the copy did not arrive)", 0, "wrong data")
    return {"gb_per_s": round(2 * size / (ms / 1000) / 1e9, 1), "bytes": size, "ms": round(ms, 3)}


def allocatable(ctx: Context, seed: str) -> dict[str, Any]:
    """Allocate until the driver refuses, write the seed's pattern over all of it, read a word
    back from every block, and free it all. Plain device allocations: never managed memory."""
    pattern = proofs.vram_pattern(seed)
    blocks: list[tuple[int, int]] = []
    chunk = ALLOC_CHUNK_START
    try:
        while chunk >= ALLOC_CHUNK_MIN:
            try:
                blocks.append((ctx.alloc(chunk), chunk))
            except CudaError as exc:
                if exc.code != CUDA_ERROR_OUT_OF_MEMORY:
                    raise
                chunk //= 2
        for pointer, size in blocks:
            ctx.memset32(pointer, pattern, size // 4)
        ctx.synchronize()
        checked = 0
        for pointer, size in blocks:
            (word,) = struct.unpack("<I", ctx.copy_to_host(pointer + size - 4, 4))
            checked += word == pattern
    finally:
        for pointer, _ in blocks:
            ctx.free(pointer)
    total = sum(size for _, size in blocks)
    return {"mb": total // MB, "blocks": len(blocks), "verified_blocks": checked}


def measure(seed: str, iterations: int, driver: Driver | None = None) -> list[dict[str, Any]]:
    """One entry per GPU the driver sees. Raises NoDriver where there is none."""
    driver = driver or Driver()
    report = []
    for ordinal in range(driver.device_count()):
        device = driver.device(ordinal)
        major, minor = device.compute_capability
        entry: dict[str, Any] = {
            "index": ordinal,
            "name": device.name,
            "compute_capability": f"{major}.{minor}",
            "multiprocessors": device.multiprocessors,
            "clock_mhz": device.clock_khz // 1000,
            "vram_total_mb": device.total_bytes // MB,
        }
        with driver.context(ordinal) as ctx:
            try:
                entry["fp32"] = fp32(ctx, device, seed, iterations)
                # Packed half-precision arithmetic exists from compute capability 5.3.
                if (major, minor) >= (5, 3):
                    entry["fp16"] = fp16(ctx, device, seed, iterations)
                entry["bandwidth"] = bandwidth(ctx, seed)
                entry["vram_allocatable"] = allocatable(ctx, seed)
            except CudaError as exc:
                entry["error"] = str(exc)
        report.append(entry)
    return report
