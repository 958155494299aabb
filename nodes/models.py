"""Nodes, the GPU tier table and the driver blocklist.

A node's state moves only through nodes.services, by compare-and-set, each move appending its
event to the stream `node:<id>` in the same transaction. `event_version` is that stream's
version: every writer bumps it in the UPDATE that changes the row, so a set-based transition
learns each node's next version from UPDATE … RETURNING instead of querying the log.
"""

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.regions import CODE_PATTERN, region_validator

# A new node's reliability prior: Beta(1, 1), mean 0.5 and the weight of two outcomes, so a
# handful of successes moves it and nobody starts out trusted (see docs/nodes.md).
PRIOR_ALPHA = 1.0
PRIOR_BETA = 1.0


class NodeState(models.TextChoices):
    ONLINE = "online"
    DEGRADED = "degraded"
    OFFLINE = "offline"
    DRAINING = "draining"
    QUARANTINED = "quarantined"
    RETIRED = "retired"


# States whose heartbeat deadlines the reaper watches.
LIVE_STATES = (NodeState.ONLINE, NodeState.DEGRADED, NodeState.DRAINING)
# States in which a node may take new work. Degraded is a missed heartbeat, not a verdict:
# the claim itself is proof of life. Draining, offline, quarantined and retired nodes get none.
CLAIMABLE_STATES = (NodeState.ONLINE, NodeState.DEGRADED)


class Node(models.Model):
    operator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="nodes", db_index=False
    )
    name = models.CharField(max_length=100)
    region = models.CharField(
        max_length=2,
        blank=True,
        validators=[region_validator],
        help_text="ISO 3166-1 alpha-2 (core.regions), or blank",
    )
    state = models.CharField(max_length=16, choices=NodeState.choices, default=NodeState.OFFLINE)
    state_changed_at = models.DateTimeField(default=timezone.now)
    # The version of the stream node:<id>: bumped in the same UPDATE as every change it records.
    event_version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    # The lowest price the operator accepts, in credit minor units per second: the node's price
    # is max(the market's spot price for its region and tier, this floor).
    price_floor = models.PositiveIntegerField(default=0)

    # The agent key's display prefix and its revocation; its hash is in AgentKey (see there why).
    agent_key_prefix = models.CharField(max_length=16)
    key_revoked_at = models.DateTimeField(null=True, blank=True)

    # Capabilities, normalised from what the agent reported. NULL means "not reported": a
    # requirement compared with NULL never passes, so a node never gets work it may not fit.
    tier = models.CharField(max_length=32, default="cpu")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    gpu_name = models.CharField(max_length=200, blank=True)
    gpu_vendor = models.CharField(max_length=32, blank=True)
    gpu_vram_mb = models.PositiveIntegerField(null=True, blank=True)
    compute_capability = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="major × 10 + minor: 89 for 8.9"
    )
    driver_version = models.CharField(max_length=64, blank=True)
    fp16_ok = models.BooleanField(default=False)
    cpu_cores = models.PositiveSmallIntegerField(null=True, blank=True)
    ram_mb = models.PositiveIntegerField(null=True, blank=True)
    disk_mb = models.PositiveIntegerField(null=True, blank=True)
    avx2 = models.BooleanField(default=False)
    avx512 = models.BooleanField(default=False)
    sandboxes = models.JSONField(default=list, blank=True)
    agent_version = models.CharField(max_length=32, blank=True)
    capabilities = models.JSONField(default=dict, blank=True)

    # Liveness, written by heartbeats (which are not events: too many, nothing to replay).
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    degraded_after = models.DateTimeField(null=True, blank=True)
    offline_after = models.DateTimeField(null=True, blank=True)
    load = models.JSONField(default=dict, blank=True)
    gpu_state = models.JSONField(default=list, blank=True)
    throttled = models.BooleanField(default=False)
    # Start times (ISO) of recent thermal-throttle episodes, pruned to the window.
    thermal_events = models.JSONField(default=list, blank=True)

    # Earned reliability: Beta(alpha, beta) with decaying evidence; `reliability` is its mean.
    rel_alpha = models.FloatField(default=PRIOR_ALPHA)
    rel_beta = models.FloatField(default=PRIOR_BETA)
    reliability = models.FloatField(default=PRIOR_ALPHA / (PRIOR_ALPHA + PRIOR_BETA))
    reliability_at = models.DateTimeField(default=timezone.now)
    consecutive_failures = models.PositiveSmallIntegerField(default=0)
    # Results of this node that agreed with another operator's (jobs.verification): trust is
    # earned by these (nodes.trust), not given on day one.
    verified_results = models.PositiveIntegerField(default=0, db_default=0)
    cooldown_until = models.DateTimeField(null=True, blank=True)

    # Measured hardware (nodes.benchmarks). `tier` above is what the node is paid and routed as:
    # the best tier its last passed benchmark supports, or the tier an admin confirmed for a
    # GPU the benchmark cannot measure, else cpu. `claimed_tier` is what its GPU's name says.
    claimed_tier = models.CharField(max_length=32, default="cpu")
    confirmed_tier = models.CharField(max_length=32, blank=True)
    measured = models.JSONField(default=dict, blank=True)
    benchmarked_at = models.DateTimeField(null=True, blank=True)
    # The benchmark issued and not yet reported: heartbeats tell the agent from this column,
    # which they read with the node anyway. Indexed only where set (node_benchmark_due, below),
    # not by the foreign key's own index.
    benchmark_due = models.ForeignKey(
        "NodeBenchmark",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )

    # The operator paused the node from the hub (nodes.services.node_pause): it drains, takes no
    # new work and its heartbeats keep it draining, whatever its agent reports, until resumed.
    paused_at = models.DateTimeField(null=True, blank=True)

    quarantine_rule = models.CharField(max_length=32, blank=True)
    quarantine_reason = models.CharField(max_length=500, blank=True)
    quarantined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # No index on the operator here: the operator's node list reads Ownership's (see there).
        indexes = [
            # The reaper, online → degraded: WHERE state = 'online' AND degraded_after < now.
            models.Index(
                fields=["degraded_after"],
                name="node_degraded_due",
                condition=Q(state=NodeState.ONLINE),
            ),
            # The reaper, → offline: WHERE state = <live state> AND offline_after < now.
            models.Index(
                fields=["offline_after"],
                name="node_offline_due",
                condition=Q(state__in=LIVE_STATES),
            ),
            # Supply per market, for repricing and for "can any online node run this job?":
            # WHERE state = 'online' AND region = ? AND tier IN (…). Partial on online, so
            # nodes leaving service cost the reaper no insert into it.
            models.Index(
                fields=["region", "tier"],
                name="node_online_market",
                condition=Q(state=NodeState.ONLINE),
            ),
            # GPU fit: WHERE state = 'online' AND gpu_vram_mb >= ? AND compute_capability >= ?.
            models.Index(
                fields=["gpu_vram_mb", "compute_capability"],
                name="node_online_gpu_fit",
                condition=Q(state=NodeState.ONLINE),
            ),
            # CPU fit: WHERE state = 'online' AND cpu_cores >= ? AND ram_mb >= ?.
            models.Index(
                fields=["cpu_cores", "ram_mb"],
                name="node_online_cpu_fit",
                condition=Q(state=NodeState.ONLINE),
            ),
            # The benchmark's row → its node (SET NULL when a benchmark row goes). Partial: a
            # node's state change cannot be a HOT update (the state is in the indexes' conditions
            # above), so each one adds an entry to every index whose condition the new row meets;
            # indexed whole, nearly every node's NULL went in on every move, all onto the index's
            # last page, where the reaper's parallel batches queued for it (a fifth of a reap).
            models.Index(
                fields=["benchmark_due"],
                name="node_benchmark_due",
                condition=Q(benchmark_due__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(rel_alpha__gt=0) & Q(rel_beta__gt=0), name="node_reliability_positive"
            ),
            # The shape of a region; the list of real ones is core.regions' (checked on the way in).
            models.CheckConstraint(
                condition=Q(region="") | Q(region__regex=CODE_PATTERN), name="node_region_code"
            ),
        ]

    def __str__(self) -> str:
        return f"node {self.pk} ({self.name})"

    @property
    def stream(self) -> str:
        return f"node:{self.pk}"

    @property
    def throttle_id(self) -> str:
        # The API's per-key throttle budgets each credential; an agent key's budget is its node.
        return f"n{self.pk}"

    @property
    def actor(self) -> str:
        return f"node:{self.pk}"

    def cooling_down(self, now=None) -> bool:
        return self.cooldown_until is not None and self.cooldown_until > (now or timezone.now())


class AgentKey(models.Model):
    """A node's agent key, as its sha256 (the plaintext is never stored).

    A table of its own so that the unique index on the hash is written when a key is issued,
    not every time the node's row is: a heartbeat and every state change rewrite that row, and
    never in place (HOT), as `state` and the deadlines are in its indexes, so each rewrite
    enters the new row version into every index of the table: one index fewer there makes
    every heartbeat and every pass of the reaper cheaper.
    """

    node = models.OneToOneField(
        Node, on_delete=models.CASCADE, primary_key=True, related_name="agent_key"
    )
    # sha256 of a 256-bit random key (people.keys). Unique by a constraint rather than
    # unique=True, which on PostgreSQL adds a second (LIKE) index.
    key_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            # Authentication: WHERE key_hash = ? (one row, one index probe), then the node by id.
            models.UniqueConstraint(fields=["key_hash"], name="agent_key_hash"),
        ]

    def __str__(self) -> str:
        return f"agent key of node {self.node_id}"


class Ownership(models.Model):
    """Which operator owns a node: what the operator's list of nodes and the registration cap
    read, by operator.

    The node's row carries its operator too, and every read of a node has it at hand; the index
    by operator is kept here, on a row written once, for the reason AgentKey has a table: every
    heartbeat and state change rewrites the node's row, never in place, and each rewrite enters
    the new row version into every index of `nodes_node`. A node's operator never changes;
    `verify_ledger` checks that every node has this row, naming the operator the node's row
    and its NodeRegistered event name.
    """

    node = models.OneToOneField(
        Node, on_delete=models.CASCADE, primary_key=True, related_name="ownership"
    )
    operator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", db_index=False
    )

    class Meta:
        indexes = [
            # The operator's node list: WHERE operator_id = ? ORDER BY node_id DESC.
            models.Index(fields=["operator", "-node"], name="ownership_operator_node"),
        ]

    def __str__(self) -> str:
        return f"node {self.node_id} of operator {self.operator_id}"


class TierKind(models.TextChoices):
    NAMED = "named", "a GPU model, matched by name"
    GENERIC = "generic", "an unknown GPU, by its VRAM"
    CPU = "cpu", "no GPU"


class GpuTier(models.Model):
    """GPU name → tier. Admin-editable; seeded by migration. A tier's price multiplier is not
    here but in the price book (ledger.PriceRule), versioned with the rest of the rules.

    A named tier's `pattern` is a regular expression searched in the normalised GPU name
    (lowercase, punctuation → spaces: "nvidia geforce rtx 4090"). Named tiers are tried in
    `rank` order; a name that matches none gets the generic tier of the largest `min_vram_mb`
    its VRAM reaches. Mobile GPUs ("Laptop GPU", "Max-Q") only match tiers marked mobile: at a
    fraction of the desktop card's power they are not that card.
    """

    slug = models.SlugField(max_length=32, unique=True)
    label = models.CharField(max_length=100)
    kind = models.CharField(max_length=8, choices=TierKind.choices, default=TierKind.NAMED)
    pattern = models.CharField(max_length=200, blank=True)
    mobile = models.BooleanField(default=False)
    min_vram_mb = models.PositiveIntegerField(null=True, blank=True)
    # The range a benchmark of this GPU falls in (float32 TFLOPS); a blank top is open. Seeded
    # from the maker's spec sheet (spec_fp32_tflops, spec_source): 0.7 to 1.4 times its figure.
    # A named tier with no bottom is never given by measurement, only by an admin's confirmation.
    min_fp32_tflops = models.DecimalField(max_digits=7, decimal_places=2, null=True, blank=True)
    max_fp32_tflops = models.DecimalField(max_digits=7, decimal_places=2, null=True, blank=True)
    spec_fp32_tflops = models.DecimalField(max_digits=7, decimal_places=2, null=True, blank=True)
    spec_source = models.CharField(max_length=300, blank=True)
    rank = models.PositiveSmallIntegerField(default=100)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("rank", "slug")

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        if self.kind == TierKind.NAMED:
            if not self.pattern:
                raise ValidationError({"pattern": "A named tier needs a pattern."})
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValidationError({"pattern": f"Not a regular expression: {exc}"}) from None
        if self.kind == TierKind.GENERIC and self.min_vram_mb is None:
            raise ValidationError({"min_vram_mb": "A generic tier needs a VRAM lower bound."})
        low, high = self.min_fp32_tflops, self.max_fp32_tflops
        if low is not None and high is not None and low > high:
            raise ValidationError({"max_fp32_tflops": "The range's top is below its bottom."})


class DriverBlock(models.Model):
    """A GPU driver version nodes must not run jobs on (a known-bad release)."""

    vendor = models.CharField(max_length=32, blank=True, help_text="blank: any vendor")
    pattern = models.CharField(
        max_length=64, help_text="driver version, * and ? as wildcards: 535.54.*"
    )
    reason = models.CharField(max_length=300)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["vendor", "pattern"], name="driverblock_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.vendor or 'any'} {self.pattern}"


class BenchmarkState(models.TextChoices):
    ISSUED = "issued"
    PASSED = "passed"
    FAILED = "failed"  # the report did not check, or the agent could not run it
    EXPIRED = "expired"  # no report before the deadline
    SUPERSEDED = "superseded"  # a newer benchmark was issued first


class NodeBenchmark(models.Model):
    """One benchmark the hub issued to a node: its signed spec with a fresh seed, and what came
    back. Issued on registration, when the reported hardware changes, and periodically."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="benchmarks")
    reason = models.CharField(max_length=16)  # new | hardware | periodic | admin
    spec = models.JSONField()
    signature = models.CharField(max_length=100)
    state = models.CharField(
        max_length=16, choices=BenchmarkState.choices, default=BenchmarkState.ISSUED
    )
    issued_at = models.DateTimeField(default=timezone.now)
    taken_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    report = models.JSONField(null=True, blank=True)
    figures = models.JSONField(default=dict, blank=True)
    problems = models.JSONField(default=list, blank=True)
    tier = models.CharField(max_length=32, blank=True)  # the tier the figures support

    class Meta:
        indexes = [
            models.Index(fields=["node", "-id"], name="benchmark_node_recent"),
            # The beat's expiry pass: WHERE state = 'issued' AND deadline < now.
            models.Index(
                fields=["deadline"],
                name="benchmark_issued_deadline",
                condition=Q(state="issued"),
            ),
        ]

    def __str__(self) -> str:
        return f"benchmark {self.pk} of node {self.node_id} ({self.state})"

    @property
    def stream(self) -> str:
        return f"benchmark:{self.pk}"
