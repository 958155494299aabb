"""Seed the GPU tier table: the design's named tiers, generic tiers by VRAM, and cpu.

Generic tiers price a GPU we have no row for by its memory, below the named tiers of that size
(an unknown 24 GB card is not assumed to be a 4090). Admins edit all of them afterwards.
"""

from decimal import Decimal

from django.db import migrations

NAMED = [
    # slug, label, pattern (searched in the normalised name), multiplier
    ("rtx-5090", "GeForce RTX 5090", r"\brtx 5090\b", "3.0"),
    ("rtx-4090", "GeForce RTX 4090", r"\brtx 4090\b", "3.0"),
    ("rtx-3090", "GeForce RTX 3090", r"\brtx 3090\b", "2.5"),
    ("rtx-4070", "GeForce RTX 4070", r"\brtx 4070\b", "2.5"),
    ("rtx-3080", "GeForce RTX 3080", r"\brtx 3080\b", "2.0"),
    ("rtx-3060", "GeForce RTX 3060", r"\brtx 3060\b", "2.0"),
    ("rtx-2070", "GeForce RTX 2070", r"\brtx 2070\b", "2.0"),
    ("gtx-1080ti", "GeForce GTX 1080 Ti", r"\bgtx 1080 ?ti\b", "1.5"),
    ("gtx-1080", "GeForce GTX 1080", r"\bgtx 1080\b(?! ?ti\b)", "1.5"),
    ("gtx-1660", "GeForce GTX 1660", r"\bgtx 1660\b", "1.3"),
]
GENERIC = [
    # slug, label, lower bound of the best GPU's VRAM in MB, multiplier
    ("generic-24gb", "Other GPU, 22 GB or more", 22_000, "2.0"),
    ("generic-16gb", "Other GPU, 15–22 GB", 15_000, "1.6"),
    ("generic-12gb", "Other GPU, 10.5–15 GB", 10_500, "1.4"),
    ("generic-8gb", "Other GPU, 7.5–10.5 GB", 7_500, "1.2"),
    ("generic-4gb", "Other GPU, 3.5–7.5 GB", 3_500, "1.0"),
    ("generic-small", "Other GPU, under 3.5 GB or not reported", 0, "0.9"),
]


def seed(apps, schema_editor):
    GpuTier = apps.get_model("nodes", "GpuTier")
    # Migration 0007 moved the multiplier to the price book; the tests reseed through this
    # function with the current models, which have no multiplier.
    priced = any(field.name == "multiplier" for field in GpuTier._meta.get_fields())
    for rank, (slug, label, pattern, multiplier) in enumerate(NAMED, start=1):
        GpuTier.objects.update_or_create(slug=slug, defaults={
            "label": label, "kind": "named", "pattern": pattern, "mobile": False,
            "rank": rank * 10, **({"multiplier": Decimal(multiplier)} if priced else {}),
        })
    for slug, label, min_vram_mb, multiplier in GENERIC:
        GpuTier.objects.update_or_create(slug=slug, defaults={
            "label": label, "kind": "generic", "min_vram_mb": min_vram_mb,
            "rank": 500, **({"multiplier": Decimal(multiplier)} if priced else {}),
        })
    GpuTier.objects.update_or_create(slug="cpu", defaults={
        "label": "CPU only", "kind": "cpu", "rank": 900,
        **({"multiplier": Decimal("0.8")} if priced else {}),
    })


def unseed(apps, schema_editor):
    slugs = [row[0] for row in NAMED + GENERIC] + ["cpu"]
    apps.get_model("nodes", "GpuTier").objects.filter(slug__in=slugs).delete()


class Migration(migrations.Migration):
    dependencies = [("nodes", "0001_initial")]

    operations = [migrations.RunPython(seed, unseed)]
