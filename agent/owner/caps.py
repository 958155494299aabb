"""The owner's shares as the hub sees them: the capabilities the agent reports are cut to what
the pool may use, so the hub, which gates every task on them, never hands this machine a task
that needs more cores, RAM or GPU memory than the owner gives."""

from __future__ import annotations

import copy
import math
from typing import Any

from agent.owner.rules import OwnerRules


def capabilities_capped(capabilities: dict[str, Any], rules: OwnerRules) -> dict[str, Any]:
    capped = copy.deepcopy(capabilities)
    cpu = capped.get("cpu") or {}
    for key in ("logical_cores", "physical_cores"):
        if isinstance(cpu.get(key), int):
            cpu[key] = max(1, math.floor(cpu[key] * rules.max_cpu_pct / 100))
    if rules.max_ram_gb and isinstance(capped.get("ram_mb"), int):
        capped["ram_mb"] = min(capped["ram_mb"], int(rules.max_ram_gb * 1024))
    for gpu in capped.get("gpus") or []:
        if isinstance(gpu.get("vram_total_mb"), int):
            gpu["vram_total_mb"] = math.floor(gpu["vram_total_mb"] * rules.max_gpu_mem_pct / 100)
    return capped


def models_vram_cap(configured_mb: int, capped: dict[str, Any], rules: OwnerRules) -> int:
    """The GPU memory models may take (0: no cap): the operator's `models_vram_mb`, within the
    owner's share of the largest GPU (`capped` are the capabilities as cut above)."""
    shares = [gpu.get("vram_total_mb") for gpu in capped.get("gpus") or []]
    shares = [mb for mb in shares if isinstance(mb, int)]
    if rules.max_gpu_mem_pct >= 100 or not shares:
        return configured_mb
    return min(configured_mb, max(shares)) if configured_mb else max(shares)
