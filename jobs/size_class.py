"""Size classes: the queue bucketed by how many cores and how much RAM a task needs.

The claim walks the queue in its order (priority, then fit, then age) and checks every hard
gate on each task it passes. A node that fits little of the queue's head, a small CPU node
behind a run of bigger work, walks past all of it on every claim: O(queue). Bucketing the
queue by size bounds that walk. A task's class is its cores and its RAM each rounded up to a
power of two, ⌈log2 cores⌉ · 32 + ⌈log2 ⌈RAM / 512 MB⌉⌉; a node can only ever fit tasks whose
classes are at most its own in both dimensions (rounding up is monotonic), so a small node
claims from the heads of those few buckets (`jobs.claim`) and never reads the rest.

Two dimensions, not one, for what a node does not read: with a single class (the larger of the
two) a 16-core, 2 GB node would read every task of up to 8 GB among its classes and pass over
the ones above 2 GB one by one again. The walk left is inside the node's own top classes: a
3-core node shares its cores class with 4-core tasks, and reads past those.
"""

from django.db.models import Case, Value, When
from django.db.models.expressions import Combinable

CORES_TOP = 10  # 513 cores or more share the top class
RAM_UNIT_MB = 512
RAM_TOP = 16  # above 512 MB · 2^15 (16 TB) share the top class
_RAM_SHIFT = 32  # the cores class's place: classes are cores · 32 + RAM
# A node with more classes than this claims through the queue's own index: it fits most of the
# head anyway, and each class is one more index probe (and up to jobs.claim.CANDIDATES more
# rows read) per claim.
BUCKETED_MAX = 16


def _log2_up(n: int, top: int) -> int:
    return min((max(n, 1) - 1).bit_length(), top)


def task_size_class(cpu_cores: int, ram_mb: int) -> int:
    """The class of a task needing `cpu_cores` and `ram_mb` (what the column computes)."""
    ram_units = -(-max(ram_mb, 0) // RAM_UNIT_MB)
    return _log2_up(cpu_cores, CORES_TOP) * _RAM_SHIFT + _log2_up(ram_units, RAM_TOP)


def node_size_classes(cpu_cores: int, ram_mb: int) -> list[int] | None:
    """Every class holding a task a node with `cpu_cores` and `ram_mb` could fit, or None when
    there are more than BUCKETED_MAX of them (a big node claims through the queue's index)."""
    top = task_size_class(cpu_cores, ram_mb)
    cores, ram = divmod(top, _RAM_SHIFT)
    if (cores + 1) * (ram + 1) > BUCKETED_MAX:
        return None
    return [c * _RAM_SHIFT + r for c in range(cores + 1) for r in range(ram + 1)]


def _ladder(field: str, unit: int, top: int) -> Case:
    # ⌈log2 ⌈value / unit⌉⌉ without a logarithm (SQLite has none): 0 up to one unit, k up to
    # 2^k units, `top` beyond.
    return Case(
        *[When(**{f"{field}__lte": unit << k}, then=Value(k)) for k in range(top)],
        default=Value(top),
    )


def size_class_expression() -> Combinable:
    """The stored generated column's expression: `task_size_class` in SQL."""
    return _ladder("cpu_cores", 1, CORES_TOP) * _RAM_SHIFT + _ladder("ram_mb", RAM_UNIT_MB, RAM_TOP)
