"""Hardware benchmarks: issued by the hub, run by the agent in its sandbox, checked here.

A benchmark is a signed spec with a seed the hub picks (agent.benchmark). The agent takes the
one due (`benchmark_take`), runs it, and reports (`benchmark_report`). The report passes when
every value its seed demands checks (agent.benchmark.proofs) and its timing fits in the time
the hub itself saw go by; the node's measured figures, its tier and its GPU columns then follow
from it (nodes.measured). A report that fails, or none before the deadline, leaves the node
measured as nothing (cpu) and counts against its reliability.

Each benchmark's life is its own stream, `benchmark:<id>`: BenchmarkIssued, then BenchmarkEnded.
The node's stream records what changes the node: NodeTierMeasured when its tier or GPU columns
move, NodeTierMismatch when the GPU it names is far above what was measured. Each event is
written in the transaction that makes its change.
"""

import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agent.benchmark import SUITE, proofs
from agent.benchmark.proofs import report_problems
from ledger.services import event_append
from nodes.capabilities import normalise
from nodes.errors import NodeStateConflict
from nodes.measured import far_below_claim, figures_of, measured_tier, routed
from nodes.models import BenchmarkState, Node, NodeBenchmark, NodeState
from nodes.services.cas import append_node_events, cas_update
from nodes.services.reliability import node_record_outcome
from nodes.signing import sign
from nodes.tiers import TierTable

# The agent's clock and the hub's differ by the requests in between; a report may claim up to
# this much more time than the hub saw between handing the spec out and receiving the report.
CLOCK_SLACK_S = 5.0
# Bounds on what a report may state, so that checking it costs the hub little.
MAX_GPUS = 16
MAX_THREADS = 1 << 24
# The node's columns that measurement decides (nodes.measured.routed).
_ROUTED = ("tier", "claimed_tier", "gpu_count", "gpu_vram_mb", "compute_capability", "fp16_ok")


class BenchmarkNotDue(NodeStateConflict):
    """The node has no such benchmark waiting for its report."""

    code = "benchmark_not_due"


def _spec(node: Node, seed: str, now: datetime) -> dict[str, Any]:
    return {
        "suite": SUITE,
        "node_id": node.pk,
        "seed": seed,
        "cpu": {
            "matmul_n": settings.NODE_BENCHMARK_MATMUL_N,
            "min_seconds": settings.NODE_BENCHMARK_CPU_MS / 1000,
            "stream_mb": settings.NODE_BENCHMARK_STREAM_MB,
        },
        "gpu": {"iterations": settings.NODE_BENCHMARK_GPU_ITERATIONS},
        "issued_at": now.isoformat(),
    }


def benchmark_issue(
    *, node: Node, reason: str, actor: str, now: datetime | None = None
) -> NodeBenchmark:
    """Issue a benchmark to the node, superseding one still waiting. Call it inside the
    transaction that caused it (registration, a hardware change) or on its own."""
    now = now or timezone.now()
    with transaction.atomic():
        waiting = NodeBenchmark.objects.select_for_update().filter(
            node=node, state=BenchmarkState.ISSUED
        )
        for old in waiting:
            old.state, old.finished_at = BenchmarkState.SUPERSEDED, now
            old.save(update_fields=["state", "finished_at"])
            _ended(old, actor=actor)
        spec = _spec(node, secrets.token_hex(16), now)
        benchmark = NodeBenchmark.objects.create(
            node=node,
            reason=reason,
            spec=spec,
            signature=sign(spec),
            issued_at=now,
            deadline=now + timedelta(seconds=settings.NODE_BENCHMARK_DEADLINE_S),
        )
        cas_update(
            node_id=node.pk, expect_state=None, sets={"benchmark_due": benchmark.pk}, events=0
        )
        event_append(
            stream=benchmark.stream,
            type="BenchmarkIssued",
            payload={"node_id": node.pk, "reason": reason, "seed": spec["seed"]},
            actor=actor,
            expected_version=0,
        )
        node.benchmark_due_id = benchmark.pk
    return benchmark


def _ended(benchmark: NodeBenchmark, *, actor: str) -> None:
    event_append(
        stream=benchmark.stream,
        type="BenchmarkEnded",
        payload={
            "node_id": benchmark.node_id,
            "state": benchmark.state,
            "tier": benchmark.tier,
            "figures": benchmark.figures,
            "problems": benchmark.problems[:20],
        },
        actor=actor,
        expected_version=1,
    )


def benchmark_take(*, node: Node, now: datetime | None = None) -> NodeBenchmark | None:
    """The benchmark waiting for this node, marked taken (the hub's clock starts here)."""
    now = now or timezone.now()
    benchmark = NodeBenchmark.objects.filter(
        pk=node.benchmark_due_id, node=node, state=BenchmarkState.ISSUED, deadline__gt=now
    ).first()
    if benchmark is None:
        return None
    if benchmark.taken_at is None:
        NodeBenchmark.objects.filter(pk=benchmark.pk, taken_at__isnull=True).update(taken_at=now)
        benchmark.taken_at = now
    return benchmark


def _number(value: Any, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= high


# Each figure a report states, where it is, and a bound no hardware of this decade passes.
_FIGURES = (
    (("cpu", "gflops"), 1e6),
    (("memory", "gb_per_s"), 1e5),
)
_GPU_FIGURES = (
    (("fp32", "tflops"), 1e4),
    (("fp32", "ms"), 1e6),
    (("fp16", "tflops"), 1e4),
    (("bandwidth", "gb_per_s"), 1e5),
    (("vram_allocatable", "mb"), 1e8),
)


def _shape(report: dict[str, Any]) -> list[str]:
    """What in the report is not the shape `python -m agent.benchmark` prints."""
    problems = (
        [f"the CPU benchmark did not run: {report['cpu_error']}"] if "cpu_error" in report else []
    )
    for (part, key), high in _FIGURES:
        section = report.get(part)
        if not isinstance(section, dict) or not _number(section.get(key), high):
            problems.append(f"{part}.{key} is missing or not a plausible number")
    gpus = report.get("gpus")
    if not isinstance(gpus, list) or len(gpus) > MAX_GPUS:
        return [*problems, f"gpus must be a list of at most {MAX_GPUS}"]
    for gpu in gpus:
        if not isinstance(gpu, dict):
            problems.append("a gpu entry is not an object")
            continue
        if "error" in gpu:
            continue  # a GPU the driver refused to measure: reported, not counted
        for (part, key), high in _GPU_FIGURES:
            section = gpu.get(part)
            if part == "fp16" and section is None:
                continue  # GPUs before compute capability 5.3 have no packed half precision
            if not isinstance(section, dict) or not _number(section.get(key), high):
                problems.append(f"gpu {gpu.get('index')}: {part}.{key} is not plausible")
        for part in ("fp32", "fp16"):
            threads = (gpu.get(part) or {}).get("threads", 0)
            if not isinstance(threads, int) or not 0 <= threads <= MAX_THREADS:
                problems.append(f"gpu {gpu.get('index')}: {part} thread count out of range")
    return problems


def _consistency(report: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """Each GPU's stated TFLOPS must be the work the spec asked for over the time it states."""
    problems = []
    iterations = spec["gpu"]["iterations"]
    for gpu in report["gpus"]:
        if "error" in gpu:
            continue
        for part, flops in (("fp32", proofs.flops_fp32), ("fp16", proofs.flops_fp16)):
            section = gpu.get(part)
            if section is None or not section["ms"]:
                continue
            computed = flops(section["threads"], iterations) / (section["ms"] / 1000) / 1e12
            if abs(computed - section["tflops"]) > 0.02 * computed + 0.01:
                problems.append(
                    f"gpu {gpu.get('index')}: {part} states {section['tflops']} TFLOPS, its work "
                    f"and time make {computed:.3f}"
                )
    return problems


def _plausibility(report: dict[str, Any], seen_s: float) -> list[str]:
    problems = _shape(report)
    elapsed = report.get("elapsed_s")
    if not isinstance(elapsed, int | float) or elapsed < 0:
        problems.append("no elapsed time")
    elif elapsed > seen_s + CLOCK_SLACK_S:
        problems.append(
            f"the report took {elapsed:.1f} s by its own clock, {seen_s:.1f} s by the hub's"
        )
    return problems


def benchmark_report(
    *, node: Node, benchmark_id: int, report: dict[str, Any], now: datetime | None = None
) -> NodeBenchmark:
    """Check the agent's report and apply it; the benchmark comes back passed or failed."""
    now = now or timezone.now()
    tiers = TierTable.load()
    with transaction.atomic():
        benchmark = (
            NodeBenchmark.objects.select_for_update()
            .filter(pk=benchmark_id, node=node, state=BenchmarkState.ISSUED)
            .first()
        )
        if benchmark is None or benchmark.taken_at is None:
            raise BenchmarkNotDue(f"node {node.pk} has no benchmark {benchmark_id} running")
        seen_s = (now - benchmark.taken_at).total_seconds()
        if report.get("error"):
            problems = [f"the agent could not run it: {str(report['error'])[:300]}"]
        else:
            problems = _plausibility(report, seen_s)
        if not problems:
            problems = _consistency(report, benchmark.spec) + report_problems(
                report, benchmark.spec
            )
        passed = not problems
        figures = figures_of(report) if passed else {}
        _finish(
            node,
            benchmark,
            passed=passed,
            figures=figures,
            problems=problems,
            report=report,
            tiers=tiers,
            now=now,
        )
    return benchmark


def _finish(
    node: Node,
    benchmark: NodeBenchmark,
    *,
    passed: bool,
    figures: dict[str, Any],
    problems: list[str],
    report: dict[str, Any] | None,
    tiers: TierTable,
    now: datetime,
) -> None:
    """Record the outcome on the benchmark and the node, with its events, in the caller's
    transaction; a failure or a claim far above the measurement costs reliability."""
    node.refresh_from_db()
    caps = normalise(node.capabilities, tiers)
    state = (
        BenchmarkState.PASSED
        if passed
        else (BenchmarkState.FAILED if report is not None else BenchmarkState.EXPIRED)
    )
    measured = dict(figures, benchmark_id=benchmark.pk, at=now.isoformat()) if passed else {}
    fields = routed(caps, measured=measured, confirmed_tier=node.confirmed_tier, tiers=tiers)
    sets = {
        "measured": measured,
        "benchmarked_at": now if passed else node.benchmarked_at,
        "benchmark_due": None if node.benchmark_due_id == benchmark.pk else node.benchmark_due_id,
        **{name: fields[name] for name in _ROUTED},
    }
    mismatch = passed and far_below_claim(caps, figures, tiers)
    events: list[tuple[str, dict[str, Any]]] = []
    if any(getattr(node, name) != fields[name] for name in _ROUTED):
        events.append(
            (
                "NodeTierMeasured",
                {"benchmark_id": benchmark.pk, "tier": fields["tier"], "previous_tier": node.tier},
            )
        )
    if mismatch:
        best = (figures.get("gpus") or [{}])[0]
        events.append(
            (
                "NodeTierMismatch",
                {
                    "benchmark_id": benchmark.pk,
                    "claimed_tier": caps.tier,
                    "claimed_gpu": caps.gpu_name,
                    "measured_tier": measured_tier(figures, tiers),
                    "measured_fp32_tflops": best.get("fp32_tflops"),
                },
            )
        )
    version = cas_update(node_id=node.pk, expect_state=None, sets=sets, events=len(events))
    if events:
        append_node_events(node_id=node.pk, version=version, actor="system", events=events)
    benchmark.state, benchmark.finished_at, benchmark.report = state, now, report
    benchmark.figures, benchmark.problems = figures, problems
    benchmark.tier = fields["tier"] if passed else ""
    benchmark.save(update_fields=["state", "finished_at", "report", "figures", "problems", "tier"])
    _ended(benchmark, actor="system")
    if not passed or mismatch:
        node_record_outcome(node_id=node.pk, success=False, actor="system", now=now)


def benchmarks_expire(*, now: datetime | None = None, limit: int = 500) -> int:
    """End the benchmarks whose deadline passed without a report."""
    now = now or timezone.now()
    tiers = TierTable.load()
    expired = 0
    due = NodeBenchmark.objects.filter(state=BenchmarkState.ISSUED, deadline__lte=now)
    for benchmark_id in list(due.values_list("pk", flat=True)[:limit]):
        with transaction.atomic():
            benchmark = (
                NodeBenchmark.objects.select_for_update(skip_locked=True)
                .filter(pk=benchmark_id, state=BenchmarkState.ISSUED)
                .select_related("node")
                .first()
            )
            if benchmark is None:
                continue
            _finish(
                benchmark.node,
                benchmark,
                passed=False,
                figures={},
                problems=["no report before the deadline"],
                report=None,
                tiers=tiers,
                now=now,
            )
            expired += 1
    return expired


def benchmarks_issue_due(*, now: datetime | None = None, limit: int = 500) -> int:
    """Issue benchmarks to online nodes that are due one: never passed one and not tried for
    NODE_BENCHMARK_RETRY_S, or last passed longer ago than NODE_BENCHMARK_INTERVAL_H."""
    now = now or timezone.now()
    stale = now - timedelta(hours=settings.NODE_BENCHMARK_INTERVAL_H)
    retry = now - timedelta(seconds=settings.NODE_BENCHMARK_RETRY_S)
    recent = NodeBenchmark.objects.filter(issued_at__gt=retry).values("node_id")
    due = (
        Node.objects.filter(state=NodeState.ONLINE, benchmark_due__isnull=True)
        .filter(Q(benchmarked_at__isnull=True) | Q(benchmarked_at__lt=stale))
        .exclude(pk__in=recent)
        .order_by("benchmarked_at", "pk")
    )
    issued = 0
    for node in due[:limit]:
        benchmark_issue(
            node=node,
            reason="periodic" if node.benchmarked_at else "retry",
            actor="system",
            now=now,
        )
        issued += 1
    return issued


def benchmarks_pass(*, now: datetime | None = None) -> dict[str, int]:
    """The beat's pass: expire, then issue."""
    return {"expired": benchmarks_expire(now=now), "issued": benchmarks_issue_due(now=now)}


def node_tier_confirm(*, node: Node, tier: str, actor: str, reason: str) -> None:
    """An admin vouches for the tier of a GPU the benchmark cannot measure (AMD, Apple): the
    node is paid and routed as `tier` until a benchmark measures its GPU. An empty `tier`
    withdraws the confirmation."""
    tiers = TierTable.load()
    if tier and tier not in tiers.by_slug:
        raise ValueError(f"no tier {tier!r}")
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node.pk)
        caps = normalise(node.capabilities, tiers)
        fields = routed(caps, measured=node.measured, confirmed_tier=tier, tiers=tiers)
        sets = {"confirmed_tier": tier, **{name: fields[name] for name in _ROUTED}}
        version = cas_update(node_id=node.pk, expect_state=None, sets=sets, events=1)
        append_node_events(
            node_id=node.pk,
            version=version,
            actor=actor,
            events=[
                (
                    "NodeTierConfirmed",
                    {"tier": fields["tier"], "previous_tier": node.tier, "reason": reason},
                )
            ],
        )
