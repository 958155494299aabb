"""Pay for what was measured: from a node's benchmark figures (or an admin's confirmation) to
the columns that pricing and routing read.

What a node's GPU is called decides nothing on its own. A node is paid and routed as:
- the best tier whose range its last passed benchmark meets (nodes.tiers.Tier.met_by), with the
  GPU columns (count, VRAM, compute capability) the benchmark found; or else
- the tier an admin confirmed, for a GPU the benchmark cannot measure (AMD, Apple); or else
- cpu, with no GPU: until its first benchmark passes, nothing about its GPU has been shown.
"""

from typing import Any

from nodes.capabilities import (
    NormalisedCapabilities,
    fp16_capable,
    parse_compute_capability,
)
from nodes.tiers import TierTable

# A benchmark finds a little less memory allocatable than the card reports (the driver keeps
# some; a desktop holds some): within this share, the reported figure stands.
VRAM_MEASURED_SHARE = 0.9
# A claim "far above" what was measured: the measurement reaches less than this share of the
# bottom of the claimed tier's range, or finds no GPU at all where one was named.
FAR_BELOW_SHARE = 0.5


def figures_of(report: dict[str, Any]) -> dict[str, Any]:
    """The figures a checked report states, in the shape nodes and quotes show them."""
    gpus = []
    for gpu in report.get("gpus") or []:
        if "fp32" not in gpu or "error" in gpu:
            continue
        gpus.append(
            {
                "name": gpu.get("name", ""),
                "compute_capability": gpu.get("compute_capability", ""),
                "fp32_tflops": gpu["fp32"]["tflops"],
                "fp16_tflops": (gpu.get("fp16") or {}).get("tflops"),
                "bandwidth_gb_per_s": (gpu.get("bandwidth") or {}).get("gb_per_s"),
                "vram_mb": (gpu.get("vram_allocatable") or {}).get("mb", 0),
            }
        )
    gpus.sort(key=lambda g: g["fp32_tflops"], reverse=True)
    return {
        "cpu_gflops": (report.get("cpu") or {}).get("gflops"),
        "memory_gb_per_s": (report.get("memory") or {}).get("gb_per_s"),
        "gpus": gpus,
    }


def best_gpu(figures: dict[str, Any]) -> dict[str, Any] | None:
    return (figures.get("gpus") or [None])[0]


def headline_tflops(figures: dict[str, Any]) -> float | None:
    """The node's one figure for cost per TFLOP-hour: its best GPU's float32 TFLOPS, or on a
    machine without one its CPU's double-precision GFLOPS / 1000; None before a benchmark."""
    gpu = best_gpu(figures)
    if gpu is not None:
        return gpu["fp32_tflops"]
    gflops = figures.get("cpu_gflops")
    return gflops / 1000 if gflops else None


def measured_tier(figures: dict[str, Any], tiers: TierTable) -> str:
    gpu = best_gpu(figures)
    if gpu is None:
        return tiers.cpu.slug
    return tiers.best_measured(gpu["fp32_tflops"], gpu["vram_mb"]).slug


def far_below_claim(
    caps: NormalisedCapabilities, figures: dict[str, Any], tiers: TierTable
) -> bool:
    """Whether the GPU the node names is far above what its benchmark found: a recorded event,
    and a failure against its reliability. Only NVIDIA GPUs are measured, so only their names
    are held to it."""
    claimed = tiers.by_slug.get(caps.tier)
    if claimed is None or claimed.slug == tiers.cpu.slug or caps.gpu_vendor != "nvidia":
        return False
    gpu = best_gpu(figures)
    if gpu is None:
        return True
    low = claimed.min_fp32_tflops
    return low is not None and gpu["fp32_tflops"] < float(low) * FAR_BELOW_SHARE


def routed(
    caps: NormalisedCapabilities,
    *,
    measured: dict[str, Any],
    confirmed_tier: str,
    tiers: TierTable,
) -> dict[str, Any]:
    """The node's columns from what it reported, what was measured and what an admin confirmed."""
    fields = caps.fields()
    fields["claimed_tier"] = caps.tier
    gpu = best_gpu(measured)
    if gpu is not None:
        cc = parse_compute_capability(gpu["compute_capability"])
        reported = caps.gpu_vram_mb or 0
        measured_vram = gpu["vram_mb"]
        fields.update(
            tier=measured_tier(measured, tiers),
            gpu_count=len(measured["gpus"]),
            gpu_vram_mb=reported
            if measured_vram >= reported * VRAM_MEASURED_SHARE
            else measured_vram,
            compute_capability=cc,
            fp16_ok=fp16_capable(cc),
        )
    elif confirmed_tier and caps.gpu_count:
        fields["tier"] = confirmed_tier
    else:
        fields.update(
            tier=tiers.cpu.slug, gpu_count=0, gpu_vram_mb=0, compute_capability=None, fp16_ok=False
        )
    return fields
