"""Containers started before their job arrives, so that a job does not wait for one to start.

A warm container is made as a job's own would be (the same limits, mounts, user and no network:
agent.sandbox.docker_sandbox), with an idle process in place of the job. A job takes one of its
shape (image, runtime, limits), runs its command in it and the container is removed when the
job ends: a warm container is never given to a second job, and the reset between two jobs is a
new container, started in the background while the job runs.

Shapes are learned from the jobs themselves: a job that finds no warm container of its shape
starts its own, as without a pool, and asks for one for the next job of that shape. Only the
shapes used last are kept warm (MAX_SHAPES), `size` containers each.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from docker.models.containers import Container

from agent.sandbox.base import RunRequest
from agent.sandbox.workspace import Workspace

log = logging.getLogger(__name__)

# The warm container's first process until it is removed: it holds the container up, doing
# nothing. The image must have `sleep` (busybox's and coreutils' both take "infinity").
IDLE_COMMAND = ["sleep", "infinity"]
# A job's limits are the container's, so each combination is a shape of its own; few are in use
# at a time on one machine, and each kept warm is a container sitting idle.
MAX_SHAPES = 4
# How long a job waits for a container of its shape that is being started, rather than start
# one of its own beside it: two starts at once on a busy engine each take longer than one.
STARTING_WAIT_S = 10.0


@dataclass(frozen=True)
class Shape:
    """What a container is made with before its job is known: all but the command, the job's
    environment and its inputs, which come with the job."""

    image: str
    runtime: str | None
    memory_mb: int
    cpus: float
    pids: int
    work_mb: int

    @classmethod
    def of(cls, req: RunRequest, runtime: str | None) -> Shape:
        return cls(req.image, runtime, req.memory_mb, req.cpus, req.pids, req.work_mb)

    def idle_request(self) -> RunRequest:
        """The request a warm container of this shape is made from: the job's limits, with
        one process more for the idle one."""
        return RunRequest(
            image=self.image,
            command=IDLE_COMMAND,
            env={},
            inputs={},
            timeout_s=1.0,  # never watched: the job's own timeout is
            memory_mb=self.memory_mb,
            cpus=self.cpus,
            pids=self.pids + 1,
            work_mb=self.work_mb,
        )


@dataclass
class WarmContainer(Workspace):
    """A started container and the work dir mounted in it: one job's, once taken."""

    container: Container


class WarmPool:
    """Idle containers by shape, refilled by one background thread. `start` makes one (in that
    thread, or in the caller's for `prestart`); `discard` removes one that no job will take."""

    def __init__(
        self,
        *,
        size: int,
        start: Callable[[Shape], WarmContainer],
        discard: Callable[[WarmContainer], None],
    ) -> None:
        if size < 1:
            raise ValueError("a warm pool holds at least one container per shape")
        self._size = size
        self._start = start
        self._discard = discard
        self._lock = threading.Lock()
        # Notified whenever a container has been started (or failed to be), or the pool closed.
        self._changed = threading.Condition(self._lock)
        # The shapes in the order they were last asked for, the latest last.
        self._idle: OrderedDict[Shape, list[WarmContainer]] = OrderedDict()
        self._starting: dict[Shape, int] = {}
        self._asked_at: dict[Shape, float] = {}  # time.monotonic() of the last start asked for
        # Shapes whose container could not be started (an image without `sleep`, say): their
        # jobs start their own containers until the agent restarts.
        self._refused: set[Shape] = set()
        self._wanted: queue.SimpleQueue[Shape | None] = queue.SimpleQueue()
        self._filler: threading.Thread | None = None
        self._closed = False
        self.served = 0

    def take(self, shape: Shape) -> WarmContainer | None:
        """A warm container of `shape`, now the caller's alone, or None; either way another of
        that shape is started for the next job."""
        with self._changed:
            if self._closed or shape in self._refused:
                return None
            self._idle.setdefault(shape, [])
            self._idle.move_to_end(shape)
            # Counted from when it was asked for: a start that hangs delays one job, not each.
            asked = self._asked_at.get(shape, 0.0)
            self._changed.wait_for(
                lambda: self._idle.get(shape) or not self._starting.get(shape) or self._closed,
                timeout=max(0.0, asked + STARTING_WAIT_S - time.monotonic()),
            )
            if self._closed:
                return None
            ready = self._idle.setdefault(shape, [])
            warm = ready.pop(0) if ready else None
            if warm is not None:
                self.served += 1
            evicted = self._evict()
            self._want(shape)
        for old in evicted:
            self._discard(old)
        return warm

    def prestart(self, shape: Shape) -> None:
        """Start a container of `shape` now, in this thread, for the next job of that shape."""
        warm = self._start(shape)
        with self._lock:
            keep = not self._closed
            if keep:
                self._idle.setdefault(shape, []).append(warm)
                self._idle.move_to_end(shape)
            evicted = self._evict()
        for old in [*evicted, *([] if keep else [warm])]:
            self._discard(old)

    def idle(self, shape: Shape) -> int:
        with self._lock:
            return len(self._idle.get(shape, []))

    def close(self) -> None:
        """Remove every idle container; what is being started is removed once it is."""
        with self._changed:
            self._closed = True
            idle = [warm for ready in self._idle.values() for warm in ready]
            self._idle.clear()
            self._changed.notify_all()
        self._wanted.put(None)
        for warm in idle:
            self._discard(warm)
        if self._filler is not None:
            self._filler.join()

    def _evict(self) -> list[WarmContainer]:
        """The least recently used shapes beyond MAX_SHAPES, their containers to discard."""
        evicted = []
        while len(self._idle) > MAX_SHAPES:
            _, ready = self._idle.popitem(last=False)
            evicted.extend(ready)
        return evicted

    def _want(self, shape: Shape) -> None:
        starting = self._starting.get(shape, 0)
        if shape in self._refused or len(self._idle[shape]) + starting >= self._size:
            return
        self._starting[shape] = starting + 1
        self._asked_at[shape] = time.monotonic()
        self._wanted.put(shape)
        if self._filler is None:
            self._filler = threading.Thread(target=self._fill, name="warm-pool", daemon=True)
            self._filler.start()

    def _fill(self) -> None:
        while (shape := self._wanted.get()) is not None:
            try:
                warm = self._start(shape)
            except Exception as exc:
                # Whatever the engine said, the job of this shape still runs: in a container
                # of its own, started when it comes.
                log.warning(
                    "could not pre-start a container for %s (%s); its jobs start their own",
                    shape.image,
                    exc,
                )
                with self._changed:
                    self._starting[shape] -= 1
                    self._refused.add(shape)
                    self._changed.notify_all()
                continue
            with self._changed:
                self._starting[shape] -= 1
                keep = not self._closed and shape in self._idle
                if keep:
                    self._idle[shape].append(warm)
                self._changed.notify_all()
            if not keep:
                self._discard(warm)
