import pytest
from django.core.exceptions import ValidationError

from ledger.pricing import rules_at
from nodes.models import GpuTier
from nodes.tiers import TierTable
from tests.nodes.conftest import gpu, register_node

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("name", "vram_mb", "tier"),
    [
        ("NVIDIA GeForce RTX 5090", 32607, "rtx-5090"),
        ("NVIDIA GeForce RTX 4090", 24564, "rtx-4090"),
        ("NVIDIA GeForce RTX 3090 Ti", 24564, "rtx-3090"),
        ("NVIDIA GeForce RTX 4070 SUPER", 12282, "rtx-4070"),
        ("NVIDIA GeForce RTX 3080", 10240, "rtx-3080"),
        ("NVIDIA GeForce RTX 3060", 12288, "rtx-3060"),
        ("NVIDIA GeForce RTX 2070 SUPER", 8192, "rtx-2070"),
        ("GeForce GTX 1080 Ti", 11264, "gtx-1080ti"),
        ("NVIDIA GeForce GTX 1080Ti", 11264, "gtx-1080ti"),
        ("NVIDIA GeForce GTX 1080", 8192, "gtx-1080"),
        ("NVIDIA GeForce GTX 1660 SUPER", 6144, "gtx-1660"),
    ],
)
def test_it_maps_names_as_the_tools_print_them_to_named_tiers(name, vram_mb, tier):
    assert TierTable.load().for_gpu(name, vram_mb).slug == tier


@pytest.mark.parametrize(
    ("name", "vram_mb", "tier"),
    [
        # Laptop parts are not the desktop card: they get the generic tier of their VRAM.
        ("NVIDIA GeForce RTX 3060 Laptop GPU", 6144, "generic-4gb"),
        ("NVIDIA GeForce RTX 2070 with Max-Q Design", 8192, "generic-8gb"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 16376, "generic-16gb"),
        # Unknown models, by VRAM.
        ("NVIDIA A100-SXM4-80GB", 81920, "generic-24gb"),
        ("AMD Radeon RX 7900 XTX", 24560, "generic-24gb"),
        ("NVIDIA RTX A4000", 16376, "generic-16gb"),
        ("NVIDIA GeForce RTX 4060", 8188, "generic-8gb"),
        ("NVIDIA GeForce GT 1030", 2048, "generic-small"),
        ("Apple M2 Max", None, "generic-small"),
        (None, None, "generic-small"),
    ],
)
def test_it_gives_mobile_and_unknown_gpus_a_generic_tier_by_vram(name, vram_mb, tier):
    assert TierTable.load().for_gpu(name, vram_mb).slug == tier


def test_every_seeded_tier_has_a_multiplier_in_the_price_book():
    """The book is where a tier's multiplier lives; a tier it does not name cannot be priced."""
    assert set(GpuTier.objects.values_list("slug", flat=True)) <= set(rules_at().tiers)


def test_it_puts_a_node_without_a_gpu_in_the_cpu_tier(bob):
    node, _ = register_node(bob, gpus=[])
    assert (node.tier, node.gpu_count, node.gpu_vram_mb, node.fp16_ok) == ("cpu", 0, 0, False)


def test_it_describes_a_node_by_its_best_gpu(bob):
    node, _ = register_node(
        bob,
        gpus=[
            gpu("NVIDIA GeForce RTX 3060", 12288, "8.6", index=0),
            gpu("NVIDIA GeForce RTX 4090", 24564, "8.9", index=1),
            gpu("NVIDIA GeForce GTX 1080", 8192, "6.1", index=2),
        ],
    )
    assert (
        node.tier,
        node.gpu_count,
        node.gpu_name,
        node.gpu_vram_mb,
        node.compute_capability,
    ) == ("rtx-4090", 3, "NVIDIA GeForce RTX 4090", 24564, 89)


def test_it_applies_an_admins_new_tier_to_the_next_registration(bob):
    GpuTier.objects.create(
        slug="rtx-4060",
        label="RTX 4060",
        pattern=r"\brtx 4060\b",
        rank=5,
    )
    GpuTier.objects.create(
        slug="rtx-3060-laptop",
        label="RTX 3060 Laptop",
        pattern=r"\brtx 3060\b",
        mobile=True,
    )
    desktop, _ = register_node(bob, gpus=[gpu("NVIDIA GeForce RTX 4060", 8188)])
    laptop, _ = register_node(bob, gpus=[gpu("NVIDIA GeForce RTX 3060 Laptop GPU", 6144)])
    assert (desktop.claimed_tier, laptop.claimed_tier) == ("rtx-4060", "rtx-3060-laptop")
    # Without a benchmark range, a new named tier is not something a measurement can reach.
    assert "rtx-4060" not in (desktop.tier, laptop.tier)


def test_it_refuses_a_pattern_that_is_not_a_regular_expression():
    tier = GpuTier(slug="broken", label="x", pattern=r"rtx (40")
    with pytest.raises(ValidationError, match="pattern"):
        tier.full_clean()


def test_it_skips_a_bad_pattern_saved_around_the_form(bob):
    GpuTier.objects.create(slug="broken", label="x", pattern=r"rtx (40", rank=1)
    node, _ = register_node(bob)
    assert node.tier == "rtx-4090"
