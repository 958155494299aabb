"""What the agent needs of an inference engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class EngineError(Exception):
    """The engine failed; `unfit`: it could not load the model here (out of memory, a file it
    cannot read), so the hub should not offer this node the model again."""

    def __init__(self, message: str, *, unfit: bool = False) -> None:
        super().__init__(message)
        self.unfit = unfit


@dataclass(frozen=True)
class Answer:
    finish_reason: str  # "stop" or "length"
    prompt_tokens: int
    completion_tokens: int


# Called with each batch of new text pieces (one per token), and once with the prompt's size in
# tokens as soon as the engine knows it; returns False to stop generating.
Emit = Callable[[list[str], int | None], bool]


class Engine(Protocol):
    def load(self, model_path: Path, *, context_length: int) -> None: ...

    def generate(self, request: dict[str, Any], emit: Emit) -> Answer: ...

    def close(self) -> None: ...
