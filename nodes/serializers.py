"""Shapes in and out of the nodes API. Validation only: no logic beyond the shape of a value.

Sizes are capped everywhere (lists, strings, numbers), so a capabilities report is at most a few
tens of kilobytes however it is crafted. Unknown keys are dropped.
"""

import re

from django.conf import settings
from rest_framework import serializers

from core.api.fields import REGION_HELP, RegionField
from ledger.models import Event
from ledger.pricing import NoRulesInForce, spot_price_get
from ledger.quotes import cost_per_tflop_hour, node_price
from nodes.measured import headline_tflops
from nodes.models import Node
from nodes.trust import node_trusted

MAX_GPUS = 16
MAX_MB = 2**31 - 1  # the columns' range: 2 PB
MAX_PRICE_FLOOR = 10**9


def _nullable(field_class: type[serializers.Field], **kwargs) -> serializers.Field:
    return field_class(required=False, allow_null=True, default=None, **kwargs)


def _text(max_length: int) -> serializers.Field:
    return _nullable(serializers.CharField, max_length=max_length, allow_blank=True)


class GpuIn(serializers.Serializer):
    index = _nullable(serializers.IntegerField, min_value=0, max_value=255)
    name = _text(200)
    vendor = _text(32)
    uuid = _text(100)
    vram_total_mb = _nullable(serializers.IntegerField, min_value=0, max_value=MAX_MB)
    vram_free_mb = _nullable(serializers.IntegerField, min_value=0, max_value=MAX_MB)
    compute_capability = _nullable(serializers.RegexField, regex=r"^\d{1,2}\.\d$")
    driver_version = _text(64)
    utilization_pct = _nullable(serializers.FloatField, min_value=0, max_value=1000)
    temperature_c = _nullable(serializers.FloatField, min_value=-100, max_value=1000)
    power_w = _nullable(serializers.FloatField, min_value=0, max_value=100_000)
    source = _text(32)


class CpuIn(serializers.Serializer):
    model = _text(200)
    arch = _text(32)
    physical_cores = _nullable(serializers.IntegerField, min_value=1, max_value=32767)
    logical_cores = _nullable(serializers.IntegerField, min_value=1, max_value=32767)
    avx = _nullable(serializers.BooleanField)
    avx2 = _nullable(serializers.BooleanField)
    avx512 = _nullable(serializers.BooleanField)


class OsIn(serializers.Serializer):
    system = _text(64)
    release = _text(128)
    machine = _text(64)


class DetectionIn(serializers.Serializer):
    gpu_source = _text(32)
    notes = serializers.ListField(
        child=serializers.CharField(max_length=500, allow_blank=True),
        max_length=50,
        required=False,
        default=list,
    )


class CapabilitiesIn(serializers.Serializer):
    gpus = GpuIn(many=True, max_length=MAX_GPUS, required=False, default=list)
    cpu = CpuIn(required=False, allow_null=True, default=None)
    ram_mb = _nullable(serializers.IntegerField, min_value=0, max_value=MAX_MB)
    disk_free_mb = _nullable(serializers.IntegerField, min_value=0, max_value=MAX_MB)
    os = OsIn(required=False, allow_null=True, default=None)
    sandboxes = serializers.ListField(
        child=serializers.CharField(max_length=32), max_length=8, required=False, default=list
    )
    detection = DetectionIn(required=False, allow_null=True, default=None)
    agent_version = _text(32)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _no_control_characters(value: str) -> None:
    if _CONTROL.search(value):
        raise serializers.ValidationError("Control characters are not allowed.")


class NodeRegisterIn(serializers.Serializer):
    name = serializers.CharField(max_length=100, validators=[_no_control_characters])
    region = RegionField(
        required=False,
        allow_null=True,
        allow_blank=True,
        default="",
        help_text=f"{REGION_HELP}; blank if unknown",
    )
    price_floor = serializers.IntegerField(
        required=False,
        default=0,
        min_value=0,
        max_value=MAX_PRICE_FLOOR,
        help_text="lowest price accepted, credit minor units per second",
    )
    capabilities = CapabilitiesIn()

    def validate_region(self, value: str | None) -> str:
        return value or ""


class NodeUpdateIn(serializers.Serializer):
    name = serializers.CharField(
        max_length=100, required=False, validators=[_no_control_characters]
    )
    price_floor = serializers.IntegerField(required=False, min_value=0, max_value=MAX_PRICE_FLOOR)

    def validate(self, attrs: dict) -> dict:
        if not attrs:
            raise serializers.ValidationError("Give a name or a price_floor to change.")
        return attrs


class NodeOut(serializers.ModelSerializer):
    reliability = serializers.SerializerMethodField()
    trusted = serializers.SerializerMethodField(
        help_text="Trust earned (docs/nodes.md): enough reliability and verified results."
    )
    measured_tflops = serializers.SerializerMethodField(
        help_text="Its best GPU's measured float32 TFLOPS (no GPU: CPU GFLOPS / 1000)."
    )
    price_per_s_minor = serializers.SerializerMethodField(
        help_text="What it is paid per second now: its market's spot price or its floor."
    )
    cost_per_tflop_hour_minor = serializers.SerializerMethodField(
        help_text="An hour at its price over its measured TFLOPS; null before a benchmark."
    )

    class Meta:
        model = Node
        fields = (
            "id",
            "name",
            "state",
            "state_changed_at",
            "paused_at",
            "region",
            "tier",
            "claimed_tier",
            "confirmed_tier",
            "measured",
            "benchmarked_at",
            "measured_tflops",
            "price_per_s_minor",
            "cost_per_tflop_hour_minor",
            "price_floor",
            "reliability",
            "verified_results",
            "trusted",
            "gpu_count",
            "gpu_name",
            "gpu_vendor",
            "gpu_vram_mb",
            "compute_capability",
            "driver_version",
            "fp16_ok",
            "cpu_cores",
            "ram_mb",
            "disk_mb",
            "avx2",
            "avx512",
            "sandboxes",
            "agent_version",
            "last_heartbeat_at",
            "load",
            "gpu_state",
            "cooldown_until",
            "quarantine_rule",
            "quarantine_reason",
            "quarantined_at",
            "agent_key_prefix",
            "key_revoked_at",
            "created_at",
        )

    def get_reliability(self, node: Node) -> float:
        return round(node.reliability, 3)

    def get_trusted(self, node: Node) -> bool:
        return node_trusted(node)

    def get_measured_tflops(self, node: Node) -> float | None:
        return headline_tflops(node.measured)

    def get_price_per_s_minor(self, node: Node) -> int | None:
        # One spot price per market in a page of nodes, not one per node.
        spots = self.context.setdefault("spots", {})
        key = (node.region, node.tier)
        if key not in spots:
            try:
                spots[key] = spot_price_get(region=node.region, tier=node.tier)
            except NoRulesInForce:
                spots[key] = None
        spot = spots[key]
        return (
            None
            if spot is None
            else node_price(spot_per_s_minor=spot, floor_per_s_minor=node.price_floor)
        )

    def get_cost_per_tflop_hour_minor(self, node: Node) -> int | None:
        price = self.get_price_per_s_minor(node)
        tflops = headline_tflops(node.measured)
        return (
            None if price is None else cost_per_tflop_hour(price_per_s_minor=price, tflops=tflops)
        )


class NodeRegisteredOut(serializers.Serializer):
    node = NodeOut()
    agent_key = serializers.CharField(help_text="The node's key. Shown once; store it now.")
    hub_public_key = serializers.CharField(help_text="Ed25519, base64: verifies task specs.")
    heartbeat_interval_s = serializers.IntegerField()


class NodeEventOut(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ("version", "type", "payload", "actor", "recorded_at")


class HeartbeatOut(serializers.Serializer):
    poll_interval_s = serializers.IntegerField()
    drain = serializers.BooleanField()
    leases = serializers.DictField(child=serializers.CharField())
    cancel = serializers.ListField(child=serializers.CharField())
    state = serializers.CharField()
    benchmark = serializers.BooleanField(
        help_text="A hardware benchmark is waiting: GET /api/v1/agent/benchmark."
    )


class AgentMeOut(serializers.ModelSerializer):
    reliability = serializers.SerializerMethodField()
    heartbeat_interval_s = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = (
            "id",
            "name",
            "state",
            "tier",
            "reliability",
            "region",
            "capabilities",
            "quarantine_reason",
            "cooldown_until",
            "heartbeat_interval_s",
            "load",
        )

    def get_reliability(self, node: Node) -> float:
        return round(node.reliability, 3)

    def get_trusted(self, node: Node) -> bool:
        return node_trusted(node)

    def get_heartbeat_interval_s(self, node: Node) -> int:
        return settings.NODE_HEARTBEAT_INTERVAL_S


class AgentEarningsQuery(serializers.Serializer):
    # Minutes east of UTC of the agent's machine, so that "today" starts at its midnight.
    utc_offset_min = serializers.IntegerField(min_value=-14 * 60, max_value=14 * 60, default=0)


class AgentEarningsOut(serializers.Serializer):
    since = serializers.DateTimeField()
    today_minor = serializers.IntegerField()
    total_minor = serializers.IntegerField()
    balance_minor = serializers.IntegerField()
    cashout_pending_minor = serializers.IntegerField()
    today = serializers.CharField()
    total = serializers.CharField()
    balance = serializers.CharField()
    cashout_pending = serializers.CharField()
