"""Trust is earned: the one rule of which nodes the hub trusts.

A node is trusted once its reliability (nodes.services.reliability) is at least
JOB_TRUSTED_RELIABILITY and JOB_TRUST_AFTER_VERIFIED of its results have agreed with the result
of another operator's node (jobs.verification). A new node has neither: it starts untrusted,
takes only low-risk or verified work, and its results are spot-checked until it has earned it.
The claim's statement checks the same line against the node's row (jobs/sql/claim_node.sql).
"""

from django.conf import settings
from django.db import transaction

from nodes.models import Node


def trusted(reliability: float, verified_results: int) -> bool:
    return (
        reliability >= settings.JOB_TRUSTED_RELIABILITY
        and verified_results >= settings.JOB_TRUST_AFTER_VERIFIED
    )


def node_trusted(node: Node) -> bool:
    return trusted(node.reliability, node.verified_results)


def spot_check_share(reliability: float, verified_results: int) -> float:
    """The share of a node's results the hub replicates on a trusted node, as BOINC's adaptive
    replication does: all of an untrusted node's (JOB_SPOTCHECK_MAX_PCT), then falling as its
    reliability rises (1 − reliability), never below JOB_SPOTCHECK_MIN_PCT nor above the max."""
    most = settings.JOB_SPOTCHECK_MAX_PCT / 100
    if not trusted(reliability, verified_results):
        return most
    return min(most, max(settings.JOB_SPOTCHECK_MIN_PCT / 100, 1.0 - reliability))


def node_vouch(*, node: Node, actor: str, reason: str) -> bool:
    """An admin vouches for a node: it counts as having the verified results trust needs. For a
    pool's first machines, which no trusted node of another operator can check yet (a new
    pool, one operator's own fleet). Recorded as NodeVouched; False when it had them already."""
    from nodes.services.cas import append_node_events, cas_update

    needed = settings.JOB_TRUST_AFTER_VERIFIED
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node.pk)
        if node.verified_results >= needed:
            return False
        version = cas_update(
            node_id=node.pk, expect_state=None, sets={"verified_results": needed}, events=1
        )
        append_node_events(
            node_id=node.pk,
            version=version,
            actor=actor,
            events=[
                (
                    "NodeVouched",
                    {
                        "verified_results": needed,
                        "previous": node.verified_results,
                        "reason": reason,
                    },
                )
            ],
        )
    return True
