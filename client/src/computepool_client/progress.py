"""A one-line progress bar on stderr, redrawn in place; no dependency."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 24
# Redraw at most this often: a fast download would otherwise spend its time on the terminal.
MIN_REDRAW_S = 0.1


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class Bar:
    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self._drawn = 0.0
        self._width = 0
        self._pending: tuple[float, str] | None = None

    def update(self, fraction: float, text: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn < MIN_REDRAW_S:
            self._pending = (fraction, text)  # drawn by the next update, or by close
            return
        self._drawn = now
        self._pending = None
        fraction = min(1.0, max(0.0, fraction))
        filled = round(WIDTH * fraction)
        line = f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {fraction:4.0%} {text}"
        # Blank out what a longer previous line left behind.
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def close(self) -> None:
        if self._pending is not None:
            self.update(*self._pending, force=True)
        if self.enabled and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0
