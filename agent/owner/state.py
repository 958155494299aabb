"""What the owner's commands and the running agent share through the agent's state directory:
the pause flag (`computepool-agent pause` writes it, the daemon reads it each tick) and the
daemon's last verdict (the daemon writes it, `status` reads it)."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PAUSED_FILE = "paused"
STATUS_FILE = "owner-status.json"


@dataclass(frozen=True)
class OwnerStatus:
    ok: bool
    reason: str
    idle_source: str
    suspended: int  # attempts held suspended right now
    updated_at: float  # time.time() of the daemon's last tick
    pid: int


class StateDir:
    def __init__(self, path: Path) -> None:
        self.path = path

    def pause(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / PAUSED_FILE).write_text(f"{time.time():.0f}\n", encoding="utf-8")

    def resume(self) -> bool:
        """False if it was not paused."""
        try:
            (self.path / PAUSED_FILE).unlink()
        except FileNotFoundError:
            return False
        return True

    def paused(self) -> bool:
        return (self.path / PAUSED_FILE).exists()

    def write_status(self, status: OwnerStatus) -> None:
        # Atomic: `status` may read it at any moment.
        self.path.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".owner-", dir=self.path)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(status), handle)
        os.replace(tmp, self.path / STATUS_FILE)

    def read_status(self) -> OwnerStatus | None:
        try:
            data: dict[str, Any] = json.loads((self.path / STATUS_FILE).read_text("utf-8"))
            return OwnerStatus(**data)
        except (OSError, ValueError, TypeError):
            return None
