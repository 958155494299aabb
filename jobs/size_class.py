"""Size classes: the queue bucketed by how many cores and how much RAM a task needs, and
whether it needs a GPU.

The claim walks the queue in its order (priority, then fit, then age) and checks every hard
gate on each task it passes. A node that fits little of the queue's head, a small CPU node
behind a run of bigger work, walks past all of it on every claim: O(queue). Bucketing the
queue by size bounds that walk. A task's class is its cores and its RAM each rounded up to a
power of two, GPU_FLAG · [needs a GPU] + ⌈log2 cores⌉ · 32 + ⌈log2 ⌈RAM / 512 MB⌉⌉; a node can
only ever fit tasks whose classes are at most its own in both dimensions (rounding up is
monotonic), of the kinds it has hardware for, so a small node claims from the heads of those
few buckets (`jobs.claim`) and never reads the rest.

Two dimensions, not one, for what a node does not read: with a single class (the larger of the
two) a 16-core, 2 GB node would read every task of up to 8 GB among its classes and pass over
the ones above 2 GB one by one again. And tasks that need a GPU have classes of their own
(`GPU_FLAG` added), which a node without one never reads: the queue's order puts those asking
for VRAM first within each priority (fit: more VRAM first), so a CPU node's classes would begin
with every GPU task of its size, and its claim would walk past all of them on every call,
a cost that grows with the GPU work queued. The walk left is inside the node's own top
classes: a 3-core node shares its cores class with 4-core
tasks, and reads past those.

The database sets a task's class when the task is inserted (a trigger, `size_class_sql`;
migration jobs 0007), whoever inserts it, ORM or COPY. Not a generated column: PostgreSQL
parsed a generated column's expression for every `UPDATE` of a task (a claim, a completion, a
requeue) though its inputs, the task's requirements, never change after submission, so every
hot write paid for an expression that cannot change. Not a `BEFORE UPDATE` trigger either:
PostgreSQL locks and fetches the row for any such trigger, whatever its column list.
"""

CORES_TOP = 10  # 513 cores or more share the top class
RAM_UNIT_MB = 512
RAM_TOP = 16  # above 512 MB · 2^15 (16 TB) share the top class
_RAM_SHIFT = 32  # the cores class's place: classes are cores · 32 + RAM
GPU_FLAG = 512  # above every cores and RAM class: the classes of tasks that need a GPU
# A node with more classes of one kind (CPU, GPU) than this claims through the queue's own
# index: it fits most of the head anyway, and each class is one more index probe (and up to
# jobs.claim.CANDIDATES more rows read) per claim. A node with a GPU reads both kinds.
BUCKETED_MAX = 16


def _log2_up(n: int, top: int) -> int:
    return min((max(n, 1) - 1).bit_length(), top)


def task_size_class(cpu_cores: int, ram_mb: int, gpu_count: int) -> int:
    """The class of a task needing `cpu_cores`, `ram_mb` and `gpu_count` GPUs (what the column
    computes)."""
    ram_units = -(-max(ram_mb, 0) // RAM_UNIT_MB)
    gpu = GPU_FLAG if gpu_count > 0 else 0
    return gpu + _log2_up(cpu_cores, CORES_TOP) * _RAM_SHIFT + _log2_up(ram_units, RAM_TOP)


def node_size_classes(cpu_cores: int, ram_mb: int, gpu_count: int) -> list[int] | None:
    """Every class holding a task a node with `cpu_cores`, `ram_mb` and `gpu_count` GPUs could
    fit, or None when there are more than BUCKETED_MAX of one kind (a big node claims through
    the queue's index)."""
    cores, ram = divmod(task_size_class(cpu_cores, ram_mb, 0), _RAM_SHIFT)
    if (cores + 1) * (ram + 1) > BUCKETED_MAX:
        return None
    cpu = [c * _RAM_SHIFT + r for c in range(cores + 1) for r in range(ram + 1)]
    return cpu + [GPU_FLAG + k for k in cpu] if gpu_count > 0 else cpu


def _ladder(column: str, unit: int, top: int) -> str:
    # ⌈log2 ⌈value / unit⌉⌉ in integer steps, so no float rounds a power of two up a class:
    # 0 up to one unit, k up to 2^k units, `top` beyond.
    steps = " ".join(f"WHEN {column} <= {unit << k} THEN {k}" for k in range(top))
    return f"CASE {steps} ELSE {top} END"


def size_class_sql(row: str = "") -> str:
    """`task_size_class` in SQL, over the columns of `row` ("NEW." in a trigger)."""
    gpu = f"CASE WHEN {row}gpu_count > 0 THEN {GPU_FLAG} ELSE 0 END"
    cores = _ladder(f"{row}cpu_cores", 1, CORES_TOP)
    ram = _ladder(f"{row}ram_mb", RAM_UNIT_MB, RAM_TOP)
    return f"({gpu} + ({cores}) * {_RAM_SHIFT} + {ram})"


def size_class_name(size_class: int) -> str:
    """A class as people read it: kind, then the most cores and RAM its tasks need
    (`cpu-4c-8g`: a CPU task of 3 or 4 cores and 4 to 8 GB)."""
    kind = "gpu" if size_class >= GPU_FLAG else "cpu"
    cores, ram = divmod(size_class % GPU_FLAG, _RAM_SHIFT)
    ram_mb = RAM_UNIT_MB << ram
    ram_text = f"{ram_mb // 1024}g" if ram_mb >= 1024 else f"{ram_mb}m"
    return f"{kind}-{1 << cores}c-{ram_text}"
