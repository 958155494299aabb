"""The capabilities an agent reports, reduced to the columns that jobs gate on.

Input is the validated capabilities JSON (nodes.serializers.CapabilitiesIn). A node with several
GPUs is described by its best one: the highest tier multiplier, then the most VRAM.
"""

import re
from dataclasses import asdict, dataclass
from typing import Any

from nodes.tiers import TierTable

# Half-precision work needs tensor cores: NVIDIA compute capability 7.0 (Volta) and later.
FP16_MIN_COMPUTE_CAPABILITY = 70


def fp16_capable(compute_capability: int | None) -> bool:
    return compute_capability is not None and compute_capability >= FP16_MIN_COMPUTE_CAPABILITY


_CC = re.compile(r"^(\d{1,2})\.(\d)$")


def parse_compute_capability(value: str | None) -> int | None:
    """'8.9' → 89, '12.0' → 120; anything else → None (unknown, never guessed)."""
    if not value:
        return None
    match = _CC.match(value.strip())
    if match is None:
        return None
    return int(match.group(1)) * 10 + int(match.group(2))


@dataclass(frozen=True)
class NormalisedCapabilities:
    tier: str
    gpu_count: int
    gpu_name: str
    gpu_vendor: str
    gpu_vram_mb: int | None
    compute_capability: int | None
    driver_version: str
    fp16_ok: bool
    cpu_cores: int | None
    ram_mb: int | None
    disk_mb: int | None
    avx2: bool
    avx512: bool
    sandboxes: list[str]
    agent_version: str
    capabilities: dict[str, Any]

    def fields(self) -> dict[str, Any]:
        """The Node columns, by name."""
        return asdict(self)


def normalise(capabilities: dict[str, Any], tiers: TierTable) -> NormalisedCapabilities:
    gpus = capabilities.get("gpus") or []
    best = None
    best_key: tuple = ()
    best_tier = tiers.cpu
    for gpu in gpus:
        tier = tiers.for_gpu(gpu.get("name"), gpu.get("vram_total_mb"))
        key = (tier.multiplier, gpu.get("vram_total_mb") or 0)
        if best is None or key > best_key:
            best, best_key, best_tier = gpu, key, tier
    cpu = capabilities.get("cpu") or {}
    cc = parse_compute_capability(best.get("compute_capability")) if best else None
    return NormalisedCapabilities(
        tier=best_tier.slug,
        gpu_count=len(gpus),
        gpu_name=(best.get("name") or "") if best else "",
        gpu_vendor=(best.get("vendor") or "") if best else "",
        # No GPU: zero VRAM (known). A GPU whose VRAM was not reported: unknown (None).
        gpu_vram_mb=best.get("vram_total_mb") if best else 0,
        compute_capability=cc,
        driver_version=(best.get("driver_version") or "") if best else "",
        fp16_ok=fp16_capable(cc),
        # Logical cores: what a container's CPU limit counts.
        cpu_cores=cpu.get("logical_cores") or cpu.get("physical_cores"),
        ram_mb=capabilities.get("ram_mb"),
        disk_mb=capabilities.get("disk_free_mb"),
        avx2=bool(cpu.get("avx2")),
        avx512=bool(cpu.get("avx512")),
        sandboxes=list(capabilities.get("sandboxes") or []),
        agent_version=capabilities.get("agent_version") or "",
        capabilities=capabilities,
    )
