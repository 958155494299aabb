"""Registering models, and which of them the pool can serve now.

A node can hold a model when it is online and has room for it with headroom to spare
(INFERENCE_HEADROOM_MB, 512 by default): on its GPU, VRAM ≥ the model's need + headroom; or, for
a model offered on CPUs, memory ≥ its need + headroom.
"""

import hashlib
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet, Value
from django.db.models.lookups import GreaterThan
from django.utils import timezone

from core.errors import DomainError
from inference.models import InferenceModel
from ledger.models_pricing import PriceBook, PriceRule, RuleKind
from ledger.pricing import price_book_copy, rules_at
from nodes.models import Node, NodeState

_CHUNK = 1024 * 1024


class ModelFileRejected(DomainError):
    code = "model_file_rejected"
    http_status = 400


def file_digest(stream: IO[bytes]) -> tuple[str, int]:
    """The sha256 (hex) and size of a file read once, in chunks (GGUF files run to gigabytes)."""
    digest, size = hashlib.sha256(), 0
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def served_path(relative: str) -> Path:
    """The file a catalog `path` names, which must lie under INFERENCE_MODELS_DIR."""
    root = Path(settings.INFERENCE_MODELS_DIR).resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise ModelFileRejected(f"{relative!r} is outside the models directory")
    if not target.is_file():
        raise ModelFileRejected(f"no file {relative!r} under the models directory")
    return target


def model_fingerprint(model: InferenceModel, *, expected_sha256: str = "") -> None:
    """Set `sha256` and `size_bytes` from the model's file; a sha256 the admin gave must match."""
    if model.file:
        model.file.open("rb")
        try:
            sha256, size = file_digest(model.file)
        finally:
            model.file.seek(0)
    else:
        with served_path(model.path).open("rb") as stream:
            sha256, size = file_digest(stream)
    if expected_sha256 and expected_sha256.lower() != sha256:
        raise ModelFileRejected(
            f"the file's sha256 is {sha256}, not the {expected_sha256.lower()} given"
        )
    if size == 0:
        raise ModelFileRejected("the model file is empty")
    model.sha256, model.size_bytes = sha256, size


def model_register(model: InferenceModel, *, expected_sha256: str = "") -> InferenceModel:
    """Save a new or changed catalog entry with its file's sha256 and size (its fields are
    checked first: nothing is read from a path that is not a valid one)."""
    model.full_clean(exclude=["sha256", "size_bytes"])
    model_fingerprint(model, expected_sha256=expected_sha256)
    with transaction.atomic():
        model.save()
    return model


def token_prices_publish(prices: dict[str, tuple[int, int]], *, name: str = "") -> PriceBook:
    """A new version of the book in force with these models' token prices ({model: (per
    million input tokens, per million output tokens)}, whole minor units), in force from now.
    As an admin does it: books in force are never edited, so the copy is drafted ahead, its
    rules added and checked, then moved to now."""
    now = timezone.now()
    with transaction.atomic():
        in_force = PriceBook.objects.get(pk=rules_at(now).version)
        book = price_book_copy(source=in_force, effective_from=now + timedelta(days=365), name=name)
        for model, (per_in, per_out) in prices.items():
            for kind, value in ((RuleKind.TOKEN_IN, per_in), (RuleKind.TOKEN_OUT, per_out)):
                rule = PriceRule(book=book, kind=kind, key=model, value=value)
                rule.full_clean()
                rule.save()
        book.effective_from = now - timedelta(seconds=1)
        book.save()
    return book


def _holds(vram_mb: Any, ram_mb: Any) -> Q:
    """Nodes that can hold a model needing `vram_mb` on a GPU or `ram_mb` on a CPU (0: not
    there): values, or a model's columns from an outer query."""
    headroom = settings.INFERENCE_HEADROOM_MB
    on_gpu = Q(GreaterThan(vram_mb, 0), gpu_vram_mb__gte=vram_mb + headroom)
    on_cpu = Q(GreaterThan(ram_mb, 0), ram_mb__gte=ram_mb + headroom)
    return Q(state=NodeState.ONLINE) & (on_gpu | on_cpu)


def capable_nodes(model: InferenceModel) -> QuerySet[Node]:
    """The online nodes that can hold `model` now."""
    return Node.objects.filter(_holds(Value(model.vram_mb), Value(model.ram_mb)))


def servable_models() -> QuerySet[InferenceModel]:
    """Enabled models that the price book in force prices (input and output tokens) and that
    at least one online node can hold now."""
    holder = Node.objects.filter(_holds(OuterRef("vram_mb"), OuterRef("ram_mb")))
    priced = rules_at().priced_models()
    return InferenceModel.objects.filter(Exists(holder), enabled=True, name__in=priced)
