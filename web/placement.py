"""Why a queued job is not placed yet: a short answer from what exists now.

The claim is the rule (jobs/sql/task_gates.sql); this only reads the same gates back over the
nodes that could take work, to tell a waiting submitter which one stops them: no node meets the
requirements, every price is above the ceiling, or a retry waiting out its backoff.
"""

from django.utils import timezone

from jobs import billing
from jobs.models import Job, Task, TaskState
from ledger.display import credits_per_s
from nodes.models import CLAIMABLE_STATES, Node


def _meets(node: Node, job: Job) -> bool:
    """The job's hard gates against the node as the claim reads it (jobs.node_profile)."""
    return (
        job.min_vram_mb <= (node.gpu_vram_mb or 0)
        and job.cpu_cores <= (node.cpu_cores or 1)
        and job.ram_mb <= (node.ram_mb or 0)
        and job.disk_mb <= (node.disk_mb or 0)
        and job.gpu_count <= node.gpu_count
        and job.min_compute_capability <= (node.compute_capability or 0)
        and (not job.region or job.region == (node.region or ""))
        and (not job.gpu_tiers or node.tier in job.gpu_tiers)
    )


def placement_reasons(job: Job) -> list[str]:
    """Why the job's queued tasks wait; empty when nothing stops them (a node will claim)."""
    queued = Task.objects.filter(job=job, state=TaskState.QUEUED)
    if job.cancel_requested_at or not queued.exists():
        return []
    reasons = []
    now = timezone.now()
    backoff = queued.filter(available_at__gt=now).order_by("available_at").first()
    if backoff is not None:
        seconds = max(1, int((backoff.available_at - now).total_seconds()))
        reasons.append(
            f"A task is waiting out a retry backoff after a failed or lost attempt "
            f"({seconds} s more); the nodes that lost it are passed over for a while."
        )
    nodes = [n for n in Node.objects.filter(state__in=CLAIMABLE_STATES) if not n.cooling_down(now)]
    fitting = [n for n in nodes if _meets(n, job)]
    if not nodes:
        reasons.append("No node is online to take work right now.")
    elif not fitting:
        reasons.append(
            f"No online node meets the job's requirements ({len(nodes)} online: "
            "check cores, RAM, disk, GPUs, VRAM, tiers and region)."
        )
    else:
        prices = [billing.node_price(n).per_s for n in fitting]
        if min(prices) > job.price_ceiling:
            reasons.append(
                f"The price ceiling is below every price: the cheapest node that meets the "
                f"requirements asks {credits_per_s(min(prices))}, the job pays at most "
                f"{credits_per_s(job.price_ceiling)}."
            )
    return reasons
