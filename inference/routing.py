"""Which nodes a request may go to, in order: a first choice and its fallbacks, fixed up front.

Capability first, and availability pessimistically: a node is a candidate only if it can hold
the model (inference.catalog), is polling for inference work now (its state in Redis has not
expired), is not draining, serves models at all, has not failed to load this very model on its
present hardware, and its price is within the caller's ceiling. Then: nodes with the model
already loaded, then the more reliable, then the cheaper. Slots are taken when the request is
sent (inference.relay.slot_take), so a full node is passed over then, not here.
"""

from dataclasses import dataclass

from inference import relay
from inference.catalog import capable_nodes
from inference.models import InferenceModel
from ledger.pricing import Rules

MAX_CANDIDATES = 4


@dataclass(frozen=True)
class Candidate:
    node_id: int
    operator_id: int
    key_hash: str  # the node's agent key's: its pushes must carry that key
    slots: int
    rate_in: int
    rate_out: int
    tier: str
    region: str
    loaded: bool
    reliability: float


def unfit_marker(model: InferenceModel, *, gpu_vram_mb: int | None, ram_mb: int | None) -> str:
    """What a failed load is remembered by: the model's file and the node's memory. A new file
    or a change of hardware gives the node another chance."""
    return f"{model.sha256}:{gpu_vram_mb or 0}:{ram_mb or 0}"


def candidates(
    model: InferenceModel, rules: Rules, *, max_output_price: int | None = None
) -> list[Candidate]:
    nodes = list(
        capable_nodes(model)
        .filter(key_revoked_at__isnull=True)
        .values_list(
            "id",
            "operator_id",
            "agent_key__key_hash",
            "tier",
            "region",
            "reliability",
            "gpu_vram_mb",
            "ram_mb",
        )
    )
    ids = [row[0] for row in nodes]
    states = relay.node_states(ids)
    unfit = relay.unfit_of(ids)
    found = []
    for node_id, operator_id, key_hash, tier, region, reliability, vram, ram in nodes:
        state = states.get(node_id)
        if state is None or state.get("status") == "draining":
            continue
        marker = unfit_marker(model, gpu_vram_mb=vram, ram_mb=ram)
        if unfit[node_id].get(model.name) == marker:
            continue
        rate_in, rate_out = rules.token_rates(model=model.name, tier=tier, region=region)
        if max_output_price is not None and rate_out > max_output_price:
            continue
        found.append(
            Candidate(
                node_id=node_id,
                operator_id=operator_id,
                key_hash=key_hash,
                slots=max(1, int(state.get("slots", 1))),
                rate_in=rate_in,
                rate_out=rate_out,
                tier=tier,
                region=region,
                loaded=model.name in state.get("models_loaded", []),
                reliability=reliability,
            )
        )
    found.sort(key=lambda c: (not c.loaded, -c.reliability, c.rate_out, c.rate_in, c.node_id))
    return found[:MAX_CANDIDATES]
