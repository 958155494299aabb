"""GPU name → tier, from the admin-editable GpuTier table; each tier's multiplier from the price
book in force (ledger), which is where pricing reads it too.

Names arrive as the tools print them ("NVIDIA GeForce RTX 4090", "GeForce GTX 1080 Ti",
"NVIDIA GeForce RTX 3060 Laptop GPU"); they are normalised (lowercase, runs of anything but
letters and digits → one space) before the tier patterns are searched in them.
"""

import logging
import re
from dataclasses import dataclass
from decimal import Decimal

from ledger.pricing import NoRulesInForce, rules_at
from nodes.models import GpuTier, TierKind

log = logging.getLogger(__name__)

CPU_TIER = "cpu"
_MOBILE = re.compile(r"\b(laptop|mobile|max q|notebook)\b")


def normalise_gpu_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", name.lower()).strip()


def is_mobile(normalised_name: str) -> bool:
    return _MOBILE.search(normalised_name) is not None


@dataclass(frozen=True)
class Tier:
    slug: str
    multiplier: Decimal
    kind: str
    pattern: re.Pattern[str] | None = None
    mobile: bool = False
    min_vram_mb: int | None = None
    # The float32 range a benchmark of this GPU falls in; None bounds are open.
    min_fp32_tflops: Decimal | None = None
    max_fp32_tflops: Decimal | None = None

    def met_by(self, fp32_tflops: float, vram_mb: int) -> bool:
        """Whether a GPU measured at these figures is at least this tier's GPU."""
        if self.kind == TierKind.CPU:
            return True
        low, high = self.min_fp32_tflops, self.max_fp32_tflops
        if self.kind == TierKind.NAMED and low is None:
            return False  # a named tier without a range is only ever confirmed by an admin
        return (
            vram_mb >= (self.min_vram_mb or 0)
            and (low is None or fp32_tflops >= low)
            and (high is None or fp32_tflops <= high)
        )


class TierTable:
    """A snapshot of the tier table and the multipliers in force, then matching in memory."""

    def __init__(self, tiers: list[Tier]) -> None:
        self.named = [t for t in tiers if t.kind == TierKind.NAMED and t.pattern is not None]
        # Largest bucket first, so the first bucket the VRAM reaches is the best it fits.
        self.generic = sorted(
            (t for t in tiers if t.kind == TierKind.GENERIC),
            key=lambda t: t.min_vram_mb or 0,
            reverse=True,
        )
        cpu = [t for t in tiers if t.kind == TierKind.CPU]
        # With the cpu row deleted by hand, nodes still get a slug; pricing will find no row.
        self.cpu = cpu[0] if cpu else Tier(CPU_TIER, Decimal(0), TierKind.CPU)
        self.all = [*tiers] if cpu else [*tiers, self.cpu]
        self.by_slug = {t.slug: t for t in self.all}

    @classmethod
    def load(cls) -> "TierTable":
        try:
            multipliers = rules_at().tiers
        except NoRulesInForce:
            # No book yet: tiers are still matched; a node's best GPU is then its largest.
            multipliers = {}
        tiers = []
        for row in GpuTier.objects.order_by("rank", "slug"):
            pattern = None
            if row.kind == TierKind.NAMED:
                try:
                    pattern = re.compile(row.pattern)
                except re.error:
                    # The admin form refuses a bad pattern; one saved around it must not break
                    # every registration, so that tier is skipped and the problem logged.
                    log.warning("GPU tier %s has an invalid pattern %r", row.slug, row.pattern)
                    continue
            multiplier = multipliers.get(row.slug, Decimal(0))
            tiers.append(
                Tier(
                    row.slug,
                    multiplier,
                    row.kind,
                    pattern,
                    row.mobile,
                    row.min_vram_mb,
                    row.min_fp32_tflops,
                    row.max_fp32_tflops,
                )
            )
        return cls(tiers)

    def for_gpu(self, name: str | None, vram_mb: int | None) -> Tier:
        normalised = normalise_gpu_name(name or "")
        mobile = is_mobile(normalised)
        if normalised:
            for tier in self.named:
                if tier.mobile == mobile and tier.pattern.search(normalised):
                    return tier
        for tier in self.generic:
            if (vram_mb or 0) >= (tier.min_vram_mb or 0):
                return tier
        return self.cpu

    def best_measured(self, fp32_tflops: float, vram_mb: int) -> Tier:
        """The best tier (highest multiplier, then rank) whose range a GPU measured at these
        figures meets; the cpu tier when it meets none."""
        met = [t for t in self.all if t.kind != TierKind.CPU and t.met_by(fp32_tflops, vram_mb)]
        # self.all is in rank order, so max() keeps the best-ranked of equal multipliers.
        return max(met, key=lambda t: t.multiplier, default=self.cpu)
