"""Models on the operator's disk: fetched from the hub on first need, checked against their
sha256 before use, kept under a size budget, the least recently used evicted first.

A model is stored as `<sha256>.gguf` (so two names for one file share it); a download in
progress is `<name digest>.part` and resumes from its length after a break. The last use is the
file's modification time (touched on each use), so the order survives a restart.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

_CHUNK = 1024 * 1024


class ModelCacheError(Exception):
    """A model could not be made ready: a bad download, or no room under the budget."""


class Downloader(Protocol):
    def model_download(self, name: str, dest: BinaryIO, *, offset: int = 0) -> str: ...


@dataclass(frozen=True)
class CachedModel:
    sha256: str
    path: Path
    size: int
    last_used: float
    names: tuple[str, ...] = ()


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class ModelCache:
    def __init__(self, root: Path, budget_bytes: int) -> None:
        if budget_bytes <= 0:
            raise ValueError("the model cache needs a budget above zero")
        self.root = root
        self.budget_bytes = budget_bytes
        root.mkdir(parents=True, exist_ok=True)

    def cached(self) -> list[CachedModel]:
        """The models on disk, least recently used first."""
        names = self._names()
        found = []
        for path in self.root.glob("*.gguf"):
            stat = path.stat()
            known = tuple(names.get(path.stem, ()))
            found.append(CachedModel(path.stem, path, stat.st_size, stat.st_mtime, known))
        return sorted(found, key=lambda m: m.last_used)

    def used_bytes(self) -> int:
        return sum(m.size for m in self.cached()) + sum(
            p.stat().st_size for p in self.root.glob("*.part")
        )

    def ensure(self, name: str, hub: Downloader, *, sha256: str = "") -> Path:
        """The path of model `name`'s file, fetched from the hub unless it is here already
        (`sha256`, when the caller knows it, finds it without asking the hub). Marks it used."""
        if sha256 and (self.root / f"{sha256}.gguf").is_file():
            self._remember(sha256, name)
            return self._touch(self.root / f"{sha256}.gguf")
        part = self.root / f"{hashlib.sha256(name.encode()).hexdigest()[:32]}.part"
        for attempt in ("resume", "afresh"):
            offset = part.stat().st_size if part.exists() else 0
            with part.open("ab") as dest:
                stated = hub.model_download(name, dest, offset=offset)
            if sha256 and stated != sha256:
                part.unlink()
                raise ModelCacheError(f"the hub states sha256 {stated} for {name}, not {sha256}")
            if _sha256_of(part) == stated:
                path = self._admit(part, stated)
                self._remember(stated, name)
                return path
            # A part left by another version of the file, or damaged on disk: start over once.
            part.unlink()
            if attempt == "afresh":
                raise ModelCacheError(f"{name}: the file received does not match sha256 {stated}")
        raise AssertionError("unreachable")

    def _admit(self, part: Path, sha256: str) -> Path:
        size = part.stat().st_size
        if size > self.budget_bytes:
            part.unlink()
            raise ModelCacheError(
                f"the model ({size} bytes) is larger than the cache's budget ({self.budget_bytes})"
            )
        self._evict_for(size)
        final = self.root / f"{sha256}.gguf"
        os.replace(part, final)
        return self._touch(final)

    def _evict_for(self, size: int) -> None:
        """Remove the least recently used models until `size` more bytes fit the budget."""
        cached = self.cached()
        used = sum(m.size for m in cached)
        for model in cached:
            if used + size <= self.budget_bytes:
                return
            model.path.unlink(missing_ok=True)
            used -= model.size

    # The names each file was asked for, for the operator's listing (`computepool-agent models`).
    def _names(self) -> dict[str, list[str]]:
        try:
            loaded = json.loads((self.root / "names.json").read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _remember(self, sha256: str, name: str) -> None:
        names = self._names()
        if name in names.get(sha256, []):
            return
        names[sha256] = sorted({*names.get(sha256, []), name})
        present = {path.stem for path in self.root.glob("*.gguf")}
        names = {sha: known for sha, known in names.items() if sha in present}
        temporary = self.root / "names.json.tmp"
        temporary.write_text(json.dumps(names, indent=1, sort_keys=True))
        os.replace(temporary, self.root / "names.json")

    @staticmethod
    def _touch(path: Path) -> Path:
        os.utime(path)
        return path
