"""Seed each named tier's benchmark range from its maker's float32 figure.

The figure is the boost-clock FP32 throughput on NVIDIA's spec sheet for the reference card, as
the TechPowerUp GPU Database lists it (https://www.techpowerup.com/gpu-specs/). The range is 0.7
to 1.4 times it: chained multiply-adds on every core come close to a spec sheet's figure on a
card at its boost clock but never quite reach it (loop overhead), a hot or power-limited card
falls further short, and a factory-overclocked one goes beyond it. `min_vram_mb` is the smallest memory the card ships
with, less what drivers keep. Generic tiers keep an open range: their VRAM decides them.

Nodes registered before benchmarks existed keep their tier, now also their claimed tier, until
the beat's first pass benchmarks them: one that passes is priced by its figures, one whose agent
cannot run it (or does not report in time) drops to cpu.
"""

from decimal import Decimal

from django.db import migrations, models

SOURCE = "NVIDIA spec sheet, FP32 at boost clock, via the TechPowerUp GPU Database"
LOW, HIGH = Decimal("0.7"), Decimal("1.4")
FIGURES = {
    # slug: (spec FP32 TFLOPS, smallest VRAM in MB)
    "rtx-5090": ("104.80", 30_000),
    "rtx-4090": ("82.58", 22_000),
    "rtx-3090": ("35.58", 22_000),
    "rtx-4070": ("29.15", 11_000),
    "rtx-3080": ("29.77", 9_500),
    "rtx-3060": ("12.74", 7_500),
    "rtx-2070": ("7.46", 7_500),
    "gtx-1080ti": ("11.34", 10_500),
    "gtx-1080": ("8.87", 7_500),
    "gtx-1660": ("5.03", 5_500),
}


def seed(apps, schema_editor):
    GpuTier = apps.get_model("nodes", "GpuTier")
    for slug, (figure, vram) in FIGURES.items():
        spec = Decimal(figure)
        GpuTier.objects.filter(slug=slug).update(
            spec_fp32_tflops=spec,
            spec_source=SOURCE,
            min_fp32_tflops=(spec * LOW).quantize(Decimal("0.01")),
            max_fp32_tflops=(spec * HIGH).quantize(Decimal("0.01")),
            min_vram_mb=vram,
        )


def claimed_from_tier(apps, schema_editor):
    Node = apps.get_model("nodes", "Node")
    Node.objects.update(claimed_tier=models.F("tier"))


def unseed(apps, schema_editor):
    apps.get_model("nodes", "GpuTier").objects.filter(slug__in=FIGURES).update(
        spec_fp32_tflops=None,
        spec_source="",
        min_fp32_tflops=None,
        max_fp32_tflops=None,
        min_vram_mb=None,
    )


class Migration(migrations.Migration):
    dependencies = [("nodes", "0011_benchmarks")]
    operations = [
        migrations.RunPython(seed, unseed),
        migrations.RunPython(claimed_from_tier, migrations.RunPython.noop),
    ]
