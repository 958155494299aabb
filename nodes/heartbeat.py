"""The heartbeat's body, declared as a pydantic model rather than a DRF serializer.

Every node sends one every 30 s, idle or not, so checking it is a fixed cost on each node a hub
serves, and how many idle nodes one hub serves is bounded by its CPU per beat. DRF checks a body
field by field in interpreted Python, and this body has some twenty fields (a status, a load, a
GPU's readings): that check was the largest part of an idle beat's work. pydantic checks the
same declaration in its compiled core, for a small fraction of that. The other bodies stay
serializers: none is sent as often.

What the check means is DRF's, so that an agent sees one API: unknown keys are dropped, text is
trimmed and may not be blank, numbers may come as numeric strings, NaN and infinities are refused;
an error is a 400 naming each field as the serializers' errors do ("load.running",
"gpus[0].index"; core.api.bodies.model_validated). The capabilities, sent only when a node's
hardware changed, are checked by registration's serializer (CapabilitiesIn) in the view.
"""

from typing import Annotated, Any, Literal

from django.core.exceptions import ValidationError as DjangoValidationError
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from core.api.fields import REGION_HELP
from core.regions import region_code
from nodes.serializers import MAX_GPUS, MAX_MB


def _region(value: str) -> str:
    try:
        return region_code(value)
    except DjangoValidationError as exc:
        raise ValueError(" ".join(exc.messages)) from None


def _text(max_length: int) -> Any:
    return Annotated[str, StringConstraints(min_length=1, max_length=max_length)]


def _bounded(kind: type, low: float, high: float) -> Any:
    return Annotated[kind | None, Field(ge=low, le=high)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True, allow_inf_nan=False)


class HeartbeatLoad(_Body):
    # Monitoring figures: bounds generous enough that an odd sensor never fails a heartbeat.
    cpu_pct: _bounded(float, 0, 100_000) = None
    mem_pct: _bounded(float, 0, 1000) = None
    running: _bounded(int, 0, 10_000) = None
    slots: _bounded(int, 0, 10_000) = None
    # Inference (agent.inference): what the node serves now; routing reads the same from its
    # inference poll, which is fresher.
    models_loaded: Annotated[list[_text(100)], Field(max_length=32)] = []
    inference_running: _bounded(int, 0, 10_000) = None


class HeartbeatGpu(_Body):
    index: _bounded(int, 0, 255) = None
    utilization_pct: _bounded(float, 0, 1000) = None
    temperature_c: _bounded(float, -100, 1000) = None
    power_w: _bounded(float, 0, 100_000) = None
    vram_free_mb: _bounded(int, 0, MAX_MB) = None
    throttled: bool | None = None


class Heartbeat(_Body):
    status: Literal["available", "busy", "degraded", "draining"]
    load: HeartbeatLoad = Field(default_factory=HeartbeatLoad)
    gpus: Annotated[list[HeartbeatGpu], Field(max_length=MAX_GPUS)] = []
    leases: Annotated[list[_text(128)], Field(max_length=256)] = []
    capabilities: dict[str, Any] | None = Field(
        None,
        description="optional, when the node's hardware changed: as at registration "
        "(CapabilitiesIn), and checked as there",
    )
    region: Annotated[str, AfterValidator(_region)] | None = Field(
        None,
        description=f"optional: {REGION_HELP}; the node's region as registered, which a "
        "heartbeat cannot move",
    )
