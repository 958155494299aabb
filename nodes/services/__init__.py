"""Every write to nodes: one module per concept, all importable from here."""

from nodes.services.benchmarks import (
    BenchmarkNotDue,
    benchmark_issue,
    benchmark_report,
    benchmark_take,
    benchmarks_pass,
    node_tier_confirm,
)
from nodes.services.lifecycle import (
    node_capabilities_update,
    node_pause,
    node_register,
    node_resume,
    node_retire,
    node_update,
)
from nodes.services.liveness import HeartbeatReply, ReapResult, node_heartbeat, nodes_reap
from nodes.services.quarantine import (
    Rule,
    driver_blocks_enforce,
    node_quarantine,
    node_quarantine_lift,
)
from nodes.services.reliability import (
    Outcome,
    node_record_outcome,
    nodes_reliability_decay,
    outcome_params,
)

__all__ = [
    "BenchmarkNotDue",
    "HeartbeatReply",
    "Outcome",
    "ReapResult",
    "Rule",
    "benchmark_issue",
    "benchmark_report",
    "benchmark_take",
    "benchmarks_pass",
    "driver_blocks_enforce",
    "node_capabilities_update",
    "node_heartbeat",
    "node_pause",
    "node_quarantine",
    "node_quarantine_lift",
    "node_record_outcome",
    "node_register",
    "node_resume",
    "node_retire",
    "node_tier_confirm",
    "node_update",
    "nodes_reap",
    "nodes_reliability_decay",
    "outcome_params",
]
