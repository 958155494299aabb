"""The nodes' event types, all on the stream `node:<id>`.

Every event that moves a node's state carries `from` and `to`, so the history reads as a list of
flips and the projection replays state from `to` alone.
"""

from ledger.registry import INT, NON_NEGATIVE_INT, NULLABLE_INT, STR, register

STATE = {
    "type": "string",
    "enum": ["online", "degraded", "offline", "draining", "quarantined", "retired"],
}
FLIP = {"from": STATE, "to": STATE}

register(
    "NodeRegistered",
    properties={
        "node_id": INT,
        "operator_id": INT,
        "name": STR,
        "region": STR,
        "price_floor": NON_NEGATIVE_INT,
        "state": STATE,
        "tier": STR,
        "gpu_name": STR,
        "gpu_vram_mb": NULLABLE_INT,
        "compute_capability": NULLABLE_INT,
        "driver_version": STR,
        "key_prefix": STR,
    },
    description="An operator registered a node; its agent key was issued.",
)
register(
    "NodeRenamed",
    properties={"name": STR, "previous": STR},
    description="The operator renamed the node.",
)
register(
    "NodePriceFloorSet",
    properties={"price_floor": NON_NEGATIVE_INT, "previous": NON_NEGATIVE_INT},
    description="The operator set the lowest price per second (minor units) the node accepts.",
)
register(
    "NodeStateChanged",
    properties={**FLIP, "reason": STR},
    description="Liveness: a heartbeat, a missed heartbeat, or the agent draining.",
)
register(
    "NodeQuarantined",
    properties={**FLIP, "rule": STR, "reason": STR},
    description="The node was disqualified; `reason` is what the operator sees.",
)
register(
    "NodeQuarantineLifted",
    properties={**FLIP},
    description="An admin lifted the quarantine; the next heartbeat brings the node online.",
)
register(
    "NodePaused",
    properties={**FLIP},
    description="The operator paused the node: it finishes what it runs and takes no new work.",
)
register(
    "NodeResumed",
    properties={**FLIP},
    description="The operator resumed the node; its next heartbeat brings it back online.",
)
register(
    "NodeRetired",
    properties={**FLIP},
    description="The operator retired the node; its agent key is revoked.",
)
register(
    "NodeCapabilitiesChanged",
    properties={
        "tier": STR,
        "previous_tier": STR,
        "gpu_name": STR,
        "gpu_vram_mb": NULLABLE_INT,
        "compute_capability": NULLABLE_INT,
        "driver_version": STR,
        "cpu_cores": NULLABLE_INT,
        "ram_mb": NULLABLE_INT,
    },
    description="The agent reported different hardware.",
)
register(
    "NodeThermalThrottled",
    properties={"gpus": {"type": "array", "items": NULLABLE_INT}, "recent": NON_NEGATIVE_INT},
    description="A thermal-throttle episode began; `recent` counts episodes in the window.",
)
register(
    "NodeCooledDown",
    properties={"until": STR, "consecutive_failures": NON_NEGATIVE_INT},
    description="Failures in a row: the node takes no work until `until`.",
)

register(
    "BenchmarkIssued",
    properties={"node_id": INT, "reason": STR, "seed": STR},
    description="The hub issued a hardware benchmark (stream benchmark:<id>): a new node, new "
    "hardware, a periodic or a retried one.",
)
register(
    "BenchmarkEnded",
    properties={
        "node_id": INT,
        "state": {"type": "string", "enum": ["passed", "failed", "expired", "superseded"]},
        "tier": STR,
        "figures": {"type": "object"},
        "problems": {"type": "array", "items": STR},
    },
    description="A benchmark ended; `tier` is what its figures support (blank unless passed).",
)
register(
    "NodeTierMeasured",
    properties={"benchmark_id": INT, "tier": STR, "previous_tier": STR},
    description="A benchmark moved what the node is paid and routed as (its tier, its GPUs).",
)
register(
    "NodeTierMismatch",
    properties={
        "benchmark_id": INT,
        "claimed_tier": STR,
        "claimed_gpu": STR,
        "measured_tier": STR,
        "measured_fp32_tflops": {"type": ["number", "null"]},
    },
    description="The GPU the node names is far above what its benchmark measured.",
)
register(
    "NodeVouched",
    properties={"verified_results": INT, "previous": INT, "reason": STR},
    description="An admin vouched for the node: it counts as having earned its trust.",
)
register(
    "NodeTierConfirmed",
    properties={"tier": STR, "previous_tier": STR, "reason": STR},
    description="An admin confirmed the tier of a GPU the benchmark cannot measure.",
)
