"""The host directories behind a job's /in and /out, and the safe reading of what it left."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent.sandbox.base import (
    MIB,
    SANDBOX_GID,
    SANDBOX_UID,
    OutputFile,
    SandboxRefused,
    remove_tree,
)

log = logging.getLogger(__name__)

# Each output is one upload and one row at the hub; thousands of them are a mistake or an attack.
MAX_OUTPUT_FILES = 1000
PREFIX = "computepool-job-"


def workspace_prefix(node: str | None) -> str:
    """The start of the names of a node's work dirs (the trailing dash keeps node 1 from
    matching node 12), so that a restarted agent finds those a killed one left."""
    return f"{PREFIX}{node}-" if node else PREFIX


class OutputRejected(Exception):
    """What the job left in /out cannot be accepted (too much of it, or it changed under us)."""


def check_input_name(name: str) -> PurePosixPath:
    """Input names are relative paths that stay inside /in."""
    path = PurePosixPath(name)
    if (
        not name
        or "\0" in name
        or path.is_absolute()
        or any(part in ("", ".", "..") for part in name.split("/"))
    ):
        raise SandboxRefused(f"bad input file name {name!r}")
    return path


@dataclass
class Workspace:
    root: Path

    @property
    def in_dir(self) -> Path:
        return self.root / "in"

    @property
    def out_dir(self) -> Path:
        return self.root / "out"

    @classmethod
    def create(cls, inputs: dict[str, bytes], *, node: str | None = None) -> Workspace:
        """A fresh directory under the system's temp dir (TMPDIR moves it), named for `node`."""
        names = {name: check_input_name(name) for name in inputs}
        workspace = cls.empty(node=node)
        try:
            workspace._write_inputs(inputs, names)
        except BaseException:
            workspace.remove()
            raise
        return workspace

    @classmethod
    def empty(cls, *, node: str | None = None) -> Workspace:
        """The directories without inputs: a warm container mounts them before its job is
        known (agent.sandbox.warm_pool), and `fill` adds the inputs then."""
        root = Path(tempfile.mkdtemp(prefix=workspace_prefix(node)))
        workspace = cls(root)
        try:
            workspace._layout()
        except BaseException:
            workspace.remove()
            raise
        return workspace

    def fill(self, inputs: dict[str, bytes]) -> None:
        """Write the job's inputs under in/, which must still be empty."""
        names = {name: check_input_name(name) for name in inputs}
        self._write_inputs(inputs, names)

    def _layout(self) -> None:
        # The sandbox user must reach in/ and out/ (bubblewrap opens them as that user); the
        # random name of root keeps other local users from finding them.
        # Modes are set explicitly: the agent may run under a umask that hides files from it.
        self.root.chmod(0o711)
        self.in_dir.mkdir(mode=0o755)
        self.in_dir.chmod(0o755)
        self.out_dir.mkdir()
        if os.geteuid() == 0:
            os.chown(self.out_dir, SANDBOX_UID, SANDBOX_GID)
            self.out_dir.chmod(0o755)
        else:
            self.out_dir.chmod(0o777)

    def _write_inputs(self, inputs: dict[str, bytes], names: dict[str, PurePosixPath]) -> None:
        try:
            for name, content in inputs.items():
                target = self.in_dir.joinpath(*names[name].parts)
                for parent in reversed(target.relative_to(self.in_dir).parents[:-1]):
                    (self.in_dir / parent).mkdir(exist_ok=True)
                    (self.in_dir / parent).chmod(0o755)
                target.write_bytes(content)
                target.chmod(0o644)
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:
            raise SandboxRefused(f"input file names collide: {exc}") from exc

    def output_usage(self) -> tuple[int, int]:
        """(bytes, entries) under out/, without following links; cheap enough to poll."""
        size = count = 0
        for _entry, entry_stat in _walk(self.out_dir):
            count += 1
            if stat.S_ISREG(entry_stat.st_mode):
                size += entry_stat.st_size
            if count > MAX_OUTPUT_FILES:
                break
        return size, count

    def check_output_limit(self, max_output_mb: int) -> None:
        size, count = self.output_usage()
        if size > max_output_mb * MIB:
            raise OutputRejected(
                f"outputs reached {size / MIB:.1f} MiB, over the {max_output_mb} MiB limit"
            )
        if count > MAX_OUTPUT_FILES:
            raise OutputRejected(f"more than {MAX_OUTPUT_FILES} entries under /out")

    def collect(self, max_output_mb: int) -> list[OutputFile]:
        """Hash each regular file under out/; links and special files are skipped, not followed."""
        self.check_output_limit(max_output_mb)
        outputs: list[OutputFile] = []
        for entry, entry_stat in _walk(self.out_dir):
            name = entry.relative_to(self.out_dir).as_posix()
            if stat.S_ISREG(entry_stat.st_mode):
                size, digest = _hash_file(entry)
                outputs.append(OutputFile(name=name, path=entry, size=size, sha256=digest))
            elif not stat.S_ISDIR(entry_stat.st_mode):
                log.warning("output %r is not a regular file; it is not collected", name)
        outputs.sort(key=lambda output: output.name)
        return outputs

    def remove(self) -> None:
        remove_tree(self.root)


def _walk(top: Path) -> Iterator[tuple[Path, os.stat_result]]:
    pending = [top]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                entry_stat = entry.stat(follow_symlinks=False)
                yield Path(entry.path), entry_stat
                if stat.S_ISDIR(entry_stat.st_mode):
                    pending.append(Path(entry.path))


def _hash_file(path: Path) -> tuple[int, str]:
    # O_NOFOLLOW: a file swapped for a link since the walk must not lead out of out/.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OutputRejected(f"output {path.name!r} changed while being read")
        digest = hashlib.sha256()
        size = 0
        while chunk := handle.read(MIB):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()
