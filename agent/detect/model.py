"""What detection found, as dataclasses that serialise to the capabilities JSON.

Every value the tools did not report is ``None`` (JSON null): detection never guesses. The hub
reads these fields as hard gates (VRAM, cores, compute capability), so a made-up number would
let a node claim work it cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

GPU_SOURCES = ("nvml", "gputil", "nvidia-smi", "rocm-smi", "system_profiler", "none")


@dataclass
class GPU:
    index: int | None
    name: str | None
    vendor: str | None
    uuid: str | None = None
    vram_total_mb: int | None = None
    vram_free_mb: int | None = None
    compute_capability: str | None = None
    driver_version: str | None = None
    utilization_pct: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    source: str | None = None
    # Per-heartbeat state only: not part of the capabilities the node registers with.
    throttled: bool | None = None
    # Apple Silicon and integrated GPUs share system RAM: there is no VRAM figure to report.
    unified_memory: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "vendor": self.vendor,
            "uuid": self.uuid,
            "vram_total_mb": self.vram_total_mb,
            "vram_free_mb": self.vram_free_mb,
            "compute_capability": self.compute_capability,
            "driver_version": self.driver_version,
            "utilization_pct": self.utilization_pct,
            "temperature_c": self.temperature_c,
            "power_w": self.power_w,
            "source": self.source,
        }

    def state_dict(self) -> dict[str, Any]:
        """The cheap sample a heartbeat carries."""
        return {
            "index": self.index,
            "utilization_pct": self.utilization_pct,
            "temperature_c": self.temperature_c,
            "power_w": self.power_w,
            "vram_free_mb": self.vram_free_mb,
            "throttled": self.throttled,
        }


@dataclass
class CPU:
    model: str | None = None
    arch: str | None = None
    physical_cores: int | None = None
    logical_cores: int | None = None
    avx: bool | None = None
    avx2: bool | None = None
    avx512: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "arch": self.arch,
            "physical_cores": self.physical_cores,
            "logical_cores": self.logical_cores,
            "avx": self.avx,
            "avx2": self.avx2,
            "avx512": self.avx512,
        }

    def merged_with(self, other: CPU) -> CPU:
        """Fill this CPU's unknown fields from ``other``; known values win."""
        return CPU(
            model=self.model if self.model is not None else other.model,
            arch=self.arch if self.arch is not None else other.arch,
            physical_cores=_first(self.physical_cores, other.physical_cores),
            logical_cores=_first(self.logical_cores, other.logical_cores),
            avx=_first(self.avx, other.avx),
            avx2=_first(self.avx2, other.avx2),
            avx512=_first(self.avx512, other.avx512),
        )


@dataclass
class OSInfo:
    system: str | None = None
    release: str | None = None
    machine: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "release": self.release, "machine": self.machine}


@dataclass
class Capabilities:
    gpus: list[GPU]
    cpu: CPU
    ram_mb: int | None
    disk_free_mb: int | None
    os: OSInfo
    sandboxes: list[str]
    gpu_source: str
    notes: list[str] = field(default_factory=list)
    agent_version: str | None = None

    def __post_init__(self) -> None:
        if self.gpu_source not in GPU_SOURCES:
            raise ValueError(f"unknown gpu_source {self.gpu_source!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": [gpu.to_dict() for gpu in self.gpus],
            "cpu": self.cpu.to_dict(),
            "ram_mb": self.ram_mb,
            "disk_free_mb": self.disk_free_mb,
            "os": self.os.to_dict(),
            "sandboxes": list(self.sandboxes),
            "detection": {"gpu_source": self.gpu_source, "notes": list(self.notes)},
            "agent_version": self.agent_version,
        }


def _first(value: T | None, fallback: T | None) -> T | None:
    return value if value is not None else fallback
