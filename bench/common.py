"""What every benchmark shares: its own database, a real hub, a lean HTTP client, seeding, stats.

Each benchmark makes its own database (`bench_computepool_<name>`) as a copy of a template that
is migrated once per set of migrations, so the scripts are independent and never touch the
test databases or the development one. Bulk rows are written with COPY, their values taken
from the models' own defaults so that a new column with a default needs no change here.
"""

import asyncio
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# The server: BENCH_PG, else the test run's DATABASE_URL (an embedded server's socket URL
# too), else the local one. Only its database name is replaced.
PG = (
    os.environ.get("BENCH_PG")
    or os.environ.get("DATABASE_URL")
    or "postgres://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/9")
# Every database a benchmark makes is named PREFIX + its own name (the smoke test uses a prefix of
# its own, so that it never drops a real run's database).
PREFIX = os.environ.get("BENCH_DB_PREFIX", "bench_computepool_")
TEMPLATE = PREFIX + "tpl"
# Per-key throttle budget for the benchmark hubs: the default (600/min) would refuse the load
# one simulated agent puts on purpose. The throttle itself stays on (every request counts), but
# never refuses: at 6000/min a faster hub answered part of a run with cheap 429s.
THROTTLE = os.environ.get("BENCH_THROTTLE", "1000000/min")


def _machine_busy() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def _report_machine(start: tuple[int, int]) -> None:
    busy, total = _machine_busy()
    share = (busy - start[0]) / max(1, total - start[1])
    print(
        f"machine: both cores {100 * share:.0f}% busy on average during this run (everything, "
        f"this benchmark included); load avg now "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def banner(title: str) -> None:
    import atexit

    atexit.register(_report_machine, _machine_busy())
    print(f"\n=== {title} ===")
    print(f"command: {' '.join(shlex.quote(a) for a in [Path(PYTHON).name, *sys.argv])}")
    print(
        f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  cores: {os.cpu_count()}  load avg: "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


# --- databases --------------------------------------------------------------------------------


def admin() -> psycopg.Connection:
    return psycopg.connect(db_url("postgres"), autocommit=True)


def db_url(name: str) -> str:
    return urlunsplit(urlsplit(PG)._replace(path=f"/{name}"))


def _migrations_digest() -> str:
    digest = hashlib.sha256()
    # The SQL files too: a migration that creates a function reads it from its app's sql/.
    for path in sorted([*ROOT.glob("*/migrations/*.py"), *ROOT.glob("*/sql/*.sql")]):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _drop(conn: psycopg.Connection, name: str) -> None:
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name]
    )
    conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def hub_env(dbname: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=db_url(dbname),
        REDIS_URL=REDIS_URL,
        CELERY_BROKER_URL=REDIS_URL,
        SECRET_KEY="bench-secret-key-not-for-production",
        DJANGO_SETTINGS_MODULE="bench.settings",
        THROTTLE_PER_KEY=THROTTLE,
        LOG_LEVEL="WARNING",
        COMPUTEPOOL_VAR_DIR=str(ROOT / "var" / "bench"),
        HUB_SIGNING_KEY="nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


def ensure_template() -> None:
    """Migrate the template database unless it already matches the current migrations."""
    want = _migrations_digest()
    with admin() as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [TEMPLATE],
        ).fetchone()
        if row is not None and row[0] == want:
            return
        _drop(conn, TEMPLATE)
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    subprocess.run(
        [PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=hub_env(TEMPLATE), check=True
    )
    with admin() as conn:
        conn.execute(f"COMMENT ON DATABASE \"{TEMPLATE}\" IS '{want}'")


def create_db(suffix: str) -> str:
    """A fresh, migrated database of our own: bench_computepool_<suffix>."""
    ensure_template()
    name = PREFIX + suffix
    with admin() as conn:
        _drop(conn, name)
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    return name


def drop_db(name: str) -> None:
    assert name.startswith(PREFIX)
    with admin() as conn:
        _drop(conn, name)


def django_setup(dbname: str) -> None:
    """Set up Django in this process against the benchmark's database (in-process figures)."""
    os.environ.update(hub_env(dbname))
    import django

    django.setup()


def vacuum_analyze(dbname: str, *tables: str) -> None:
    with psycopg.connect(db_url(dbname), autocommit=True) as conn:
        for table in tables or ("",):
            conn.execute(f"VACUUM ANALYZE {table}")


# --- the hub ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Hub:
    """A real hub: gunicorn (or uvicorn workers) on a free loopback port, on our database."""

    dbname: str
    workers: int = 4
    threads: int = 8
    worker_class: str = "gthread"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)  # the hub's settings beyond hub_env's

    @property
    def argv(self) -> list[str]:
        argv = [
            PYTHON, "-m", "gunicorn", "computepool.wsgi" if self.worker_class != "uvicorn"
            else "computepool.asgi:application",
            "-b", f"127.0.0.1:{self.port}", "-w", str(self.workers),
            "--timeout", "120", "--keep-alive", "75", "--log-level", "warning",
        ]  # fmt: skip
        # A pool of connections, as the hub is deployed: one for each thread (gthread), or as
        # many for the threads that ASGI runs views on.
        argv += ["-e", f"DB_POOL_MAX_SIZE={self.threads}"]
        if self.worker_class == "gthread":
            argv += ["-k", "gthread", "--threads", str(self.threads)]
        elif self.worker_class == "uvicorn":
            argv += ["-k", "uvicorn.workers.UvicornWorker"]
        return argv

    def describe(self) -> str:
        return " ".join(self.argv[2:])

    def start(self) -> "Hub":
        log = open(ROOT / "var" / f"bench-hub-{self.port}.log", "w")  # noqa: SIM115
        (ROOT / "var").mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            self.argv, cwd=ROOT, env=hub_env(self.dbname, **self.env), stdout=log, stderr=log
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the hub exited; see var/bench-hub-{self.port}.log")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                if len(self.worker_pids()) >= self.workers:
                    time.sleep(1.5)  # the workers import Django after they fork
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("the hub did not start within 60 s")

    def worker_pids(self) -> list[int]:
        if self.proc is None:
            return []
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        with contextlib.suppress(OSError):
            return [int(p) for p in path.read_text().split()]
        return []

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def __enter__(self) -> "Hub":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pid_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds used so far by one process, or None once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds used so far by these processes (those still running)."""
    return sum(cpu for pid in pids if (cpu := _pid_cpu_seconds(pid)) is not None)


def postgres_backend_pids(dbname: str) -> list[int]:
    """The live PostgreSQL backends serving `dbname` (this query's own left out)."""
    with psycopg.connect(db_url(dbname), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [dbname],
        ).fetchall()
    return [pid for (pid,) in rows]


def postgres_cpu_seconds(dbname: str) -> dict[int, float]:
    """CPU seconds so far of each live PostgreSQL backend serving `dbname`: a reading to pass
    to `postgres_cpu_since`. The shared WAL writer and checkpointer also work for the other
    databases on this server, so they are left out: each backend flushes WAL at its own
    commits."""
    readings = {pid: _pid_cpu_seconds(pid) for pid in postgres_backend_pids(dbname)}
    return {pid: cpu for pid, cpu in readings.items() if cpu is not None}


def postgres_cpu_since(dbname: str, before: dict[int, float]) -> float:
    """The CPU seconds the backends serving `dbname` used since the reading `before`: each live
    backend's growth, a backend that started since counted whole. A backend that ended in
    between is not counted at all (its last CPU cannot be read), so this errs low, never
    below zero (subtracting two totals did, when the hub reopened connections)."""
    now = postgres_cpu_seconds(dbname)
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in now.items())


# --- a lean HTTP/1.1 client (keep-alive, asyncio) ---------------------------------------------
# The load generator shares the two cores with the hub and PostgreSQL, so it must cost little:
# a few tens of microseconds per request, against about a millisecond for requests/httpx.


class HttpError(Exception):
    pass


class Conn:
    def __init__(self, port: int, key: str | None = None) -> None:
        self.port = port
        self.key = key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None

    async def request(
        self, method: str, path: str, body: Any = None, key: str | None = None
    ) -> tuple[int, Any]:
        data = b"" if body is None else json.dumps(body).encode()
        auth = key or self.key
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\nContent-Length: {len(data)}\r\n"
            + (f"Authorization: Bearer {auth}\r\n" if auth else "")
            + "\r\n"
        ).encode()
        for attempt in (1, 2):
            reused = self.writer is not None
            if not reused:
                await self._open()
            try:
                self.writer.write(head + data)
                status, payload = await self._response()
                return status, payload
            except (ConnectionError, asyncio.IncompleteReadError, HttpError):
                await self.close()
                # An idle keep-alive connection the server closed: nothing was processed.
                if not reused or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _response(self) -> tuple[int, Any]:
        line = await self.reader.readline()
        if not line:
            raise HttpError("connection closed before a response")
        status = int(line.split()[1])
        length, close = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        raw = await self.reader.readexactly(length) if length else b""
        if close:
            await self.close()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw


async def closed_loop(
    conns: list[Conn],
    one: Callable[[Conn, int], Awaitable[bool]],
    *,
    seconds: float,
    max_requests: int,
) -> tuple[int, int, float, list[float]]:
    """Each connection sends `one(conn, i)` back to back until `seconds` pass or `max_requests`
    are sent. Returns (ok, failed, elapsed seconds, latencies in ms)."""
    latencies: list[float] = []
    counts = [0, 0]
    sent = 0
    start = time.perf_counter()
    deadline = start + seconds

    async def worker(conn: Conn) -> None:
        nonlocal sent
        while time.perf_counter() < deadline and sent < max_requests:
            sent += 1
            t0 = time.perf_counter()
            ok = await one(conn, sent)
            latencies.append((time.perf_counter() - t0) * 1000)
            counts[0 if ok else 1] += 1

    await asyncio.gather(*(worker(c) for c in conns))
    return counts[0], counts[1], time.perf_counter() - start, latencies


# --- statistics -------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def spread(values: list[float]) -> str:
    """median (min–max, n) of repeated figures: how noisy a figure is."""
    if not values:
        return "n/a"
    return (
        f"{statistics.median(values):.3g} (min {min(values):.3g}, max {max(values):.3g}, "
        f"n={len(values)})"
    )


def table(rows: list[list[Any]], header: list[str]) -> None:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if n == 0:
            print("  " + "  ".join("-" * w for w in widths))


# --- seeding ----------------------------------------------------------------------------------


def _copy_value(field: Any, value: Any) -> Any:
    from django.contrib.postgres.fields import ArrayField

    if isinstance(value, list) and isinstance(field, ArrayField):
        # COPY's text form of an array; the values here are plain names and numbers.
        return "{" + ",".join(str(v) for v in value) + "}"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def model_copy(model: Any, rows: Iterable[dict[str, Any]], *, reserve: int | None = None):
    """COPY rows into a model's table: every concrete column, each row's value or else the
    field's default (callable defaults are called once per COPY, not per row).

    With `reserve=n` the ids of n rows are taken from the table's sequence first and written
    explicitly, and the first id is returned; otherwise the number of rows written."""
    from django.db import connection

    # Generated columns are the database's to compute; so is a task's size class (its insert
    # trigger replaces the default written here).
    fields = [f for f in model._meta.concrete_fields if not f.primary_key and not f.generated]
    defaults = {f.attname: f.get_default() for f in fields}
    columns = [connection.ops.quote_name(f.column) for f in fields]
    table = model._meta.db_table
    first = None
    with connection.cursor() as cursor:
        if reserve is not None:
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), "
                "nextval(pg_get_serial_sequence(%s, 'id')) + %s - 1)",
                [table, table, reserve],
            )
            first = cursor.fetchone()[0] - reserve + 1
            columns.insert(0, "id")
        count = 0
        with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                values = [_copy_value(f, row.get(f.attname, defaults[f.attname])) for f in fields]
                if first is not None:
                    if count >= reserve:
                        raise ValueError("more rows than reserved ids")
                    values.insert(0, first + count)
                copy.write_row(values)
                count += 1
    return first if reserve is not None else count


def agent_key(n: int, salt: str = "") -> str:
    return f"cpa_bench{salt}{n:010d}" + hashlib.sha256(f"{salt}{n}".encode()).hexdigest()[:24]


# A node of each kind the claim sees: a 24 GB RTX 4090 box and a CPU-only box.
NODE_KINDS = {
    "rtx-4090": {
        "tier": "rtx-4090", "gpu_count": 1, "gpu_name": "NVIDIA GeForce RTX 4090",
        "gpu_vendor": "nvidia", "gpu_vram_mb": 24564, "compute_capability": 89,
        "driver_version": "550.54.14", "fp16_ok": True, "cpu_cores": 16, "ram_mb": 64000,
        "disk_mb": 500000, "avx2": True, "avx512": True, "sandboxes": ["docker"],
    },
    "cpu": {
        "tier": "cpu", "gpu_count": 0, "gpu_name": "", "gpu_vendor": "", "gpu_vram_mb": None,
        "compute_capability": None, "driver_version": "", "fp16_ok": False, "cpu_cores": 8,
        "ram_mb": 16000, "disk_mb": 200000, "avx2": True, "avx512": False, "sandboxes": ["docker"],
    },
    # A small CPU box (2 cores, 2 GB): most tasks at the head of the queue are too big for it.
    "small-cpu": {
        "tier": "cpu", "gpu_count": 0, "gpu_name": "", "gpu_vendor": "", "gpu_vram_mb": None,
        "compute_capability": None, "driver_version": "", "fp16_ok": False, "cpu_cores": 2,
        "ram_mb": 2048, "disk_mb": 50000, "avx2": True, "avx512": False, "sandboxes": ["docker"],
    },
}  # fmt: skip


def operators(count: int, prefix: str = "op") -> list[int]:
    """Operator users (through the service: roles and their events)."""
    from people.services import user_create

    return [user_create(username=f"{prefix}{i}", roles=["operator"]).pk for i in range(count)]


def seed_nodes(
    count: int,
    *,
    operator_ids: list[int],
    kind: str = "rtx-4090",
    state: str = "online",
    salt: str = "",
    region: str = "IN",
    deadlines_in_s: float = 3600.0,
) -> tuple[list[int], list[str]]:
    """COPY `count` nodes (≤ 1000 per operator, as registration allows); (ids, agent keys)."""
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    from nodes.models import Node
    from people.keys import display_prefix, hash_key

    if count <= 0:
        return [], []
    now = timezone.now()
    due = now + timedelta(seconds=deadlines_in_s)
    keys = [agent_key(i, salt) for i in range(count)]
    spec = NODE_KINDS[kind]

    def owner(i: int) -> int:
        return operator_ids[(i // 1000) % len(operator_ids)]

    def rows() -> Iterator[dict[str, Any]]:
        for i, key in enumerate(keys):
            yield {
                **spec,
                "operator_id": owner(i),
                "name": f"bench-{salt}{i}",
                "region": region,
                "state": state,
                "state_changed_at": now,
                "created_at": now,
                "reliability_at": now,
                "event_version": 1,
                "agent_key_prefix": display_prefix(key),
                "last_heartbeat_at": now,
                "degraded_after": due,
                "offline_after": due,
                "capabilities": {"bench": True},
                # An established fleet: nodes that earned their trust long ago (nodes.trust).
                "verified_results": 1000,
            }

    first = model_copy(Node, rows(), reserve=count)
    keys_copy = "COPY nodes_agentkey (node_id, key_hash) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(keys_copy) as copy:
        for i, key in enumerate(keys):
            copy.write_row((first + i, hash_key(key)))
    owners_copy = "COPY nodes_ownership (node_id, operator_id) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(owners_copy) as copy:
        for i in range(count):
            copy.write_row((first + i, owner(i)))
    return list(range(first, first + count)), keys


def seed_queue(
    count: int,
    *,
    submitter_id: int,
    slices_per_job: int = 100,
    gpu_share: float = 1 / 3,
    price_ceiling: int = 100_000,
) -> None:
    """COPY `count` queued tasks in jobs of `slices_per_job` (claim-only: no credits held).

    A mix the claim has to sort through: a third need a GPU (8-24 GB, sorted first by the
    claim's fit order), priorities 0-3 on a tenth of the jobs, a few tier allow-lists and
    regions.
    """
    from django.utils import timezone

    from jobs.models import Job, Task

    now = timezone.now()
    jobs = (count + slices_per_job - 1) // slices_per_job
    plan = []
    for j in range(jobs):
        gpu = int((j + 1) * gpu_share) > int(j * gpu_share)  # evenly spread
        plan.append(
            {
                "priority": (j % 4) if j % 10 == 0 else 0,
                "min_vram_mb": (8000, 12000, 16000, 24000)[j % 4] if gpu else 0,
                "gpu_count": 1 if gpu else 0,
                "cpu_cores": 1 + j % 4,
                "ram_mb": 512 * (1 + j % 8),
                "region": "IN" if j % 7 == 0 else "",
                "gpu_tiers": ["rtx-4090", "rtx-3090"] if gpu and j % 5 == 0 else [],
            }
        )
    spec = {
        "image": "computepool/busybox:1", "command": [], "script": "true", "interpreter": "sh",
        "env": {}, "inputs": {},
    }  # fmt: skip
    first = model_copy(
        Job,
        (
            {
                **{k: v for k, v in p.items()},
                "submitter_id": submitter_id,
                "name": f"bench-{j}",
                "kind": "script",
                "spec": spec,
                "slices": min(slices_per_job, count - j * slices_per_job),
                "timeout_s": 60,
                "price_ceiling": price_ceiling,
                "request_fingerprint": "0" * 64,
                "created_at": now,
            }
            for j, p in enumerate(plan)
        ),
        reserve=jobs,
    )

    def tasks() -> Iterator[dict[str, Any]]:
        for j, p in enumerate(plan):
            tiers = p["gpu_tiers"]
            allow = list(tiers)
            for index in range(min(slices_per_job, count - j * slices_per_job)):
                yield {
                    "job_id": first + j,
                    "index": index,
                    "priority": p["priority"],
                    "min_vram_mb": p["min_vram_mb"],
                    "cpu_cores": p["cpu_cores"],
                    "ram_mb": p["ram_mb"],
                    "gpu_count": p["gpu_count"],
                    "tier_allow": allow,
                    "region": p["region"],
                    "price_ceiling": price_ceiling,
                    "available_at": now,
                    "created_at": now,
                }

    model_copy(Task, tasks())


def fund(user_id: int, amount: int) -> None:
    import uuid

    from ledger.funding import credits_grant

    credits_grant(
        user_id=user_id,
        amount=amount,
        actor="bench",
        reference="bench",
        idempotency_key=f"bench-{uuid.uuid4().hex}",
    )


def submitter(name: str = "submitter", credits_minor: int = 10**13) -> tuple[int, str]:
    """A funded submitter and a submitter API key: (user id, key)."""
    from people.services import api_key_create, user_create

    user = user_create(username=name, roles=["submitter"])
    fund(user.pk, credits_minor)
    _, key = api_key_create(user=user, role="submitter", name="bench")
    return user.pk, key


JOB_BODY = {
    "name": "bench",
    "kind": "script",
    "script": "true",
    "slices": 1,
    "timeout_s": 60,
    "price_ceiling": 500,
    "max_attempts": 3,
    "requirements": {"cpu_cores": 1, "ram_mb": 256},
}


def submit_jobs(submitter_id: int, count: int, *, slices: int = 1) -> float:
    """Submit jobs through the service (holds, events and all); returns seconds taken."""
    from jobs.serializers import JobIn
    from jobs.submission import job_submit

    body = JobIn(data={**JOB_BODY, "slices": slices})
    body.is_valid(raise_exception=True)
    start = time.perf_counter()
    for _ in range(count):
        job_submit(submitter_id=submitter_id, data=body.validated_data)
    return time.perf_counter() - start


def close_django_connections() -> None:
    from django.db import connections

    connections.close_all()


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)


# --- profiles ---------------------------------------------------------------------------------

HEARTBEAT_BODY = {
    "status": "available",
    "load": {"cpu_pct": 3.5, "mem_pct": 21.0, "running": 0, "slots": 1},
    "gpus": [
        {"index": 0, "utilization_pct": 2.0, "temperature_c": 41.0, "power_w": 22.5,
         "vram_free_mb": 24000, "throttled": False}
    ],
    "leases": [],
}  # fmt: skip


def perf_start(pids: list[int], seconds: int, out: Path) -> subprocess.Popen | None:
    """Sample `pids` (PostgreSQL's backends) with Linux perf for `seconds`: where the database
    spends its CPU, by function. Needs perf and the right to trace those processes (root)."""
    if not pids or shutil.which("perf") is None:
        print("  (perf is not installed: no PostgreSQL profile)")
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    targets = ",".join(map(str, pids))
    return subprocess.Popen(
        ["perf", "record", "-F", "999", "-o", str(out), "-p", targets, "--", "sleep", str(seconds)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def perf_summary(data: Path, top: int = 30) -> list[str]:
    """The functions with the largest self share of a perf recording."""
    if not data.exists():
        return ["  (no samples)"]
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--stdio", "--sort", "dso,symbol"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    rows = [line.rstrip() for line in report.splitlines() if line.strip() and "%" in line]
    return [f"  {row.strip()}" for row in rows if not row.lstrip().startswith("#")][:top]


def pyspy_start(pids: list[int], seconds: int, out_dir: Path) -> list[subprocess.Popen]:
    """Sample the hub's workers with py-spy (collapsed stacks) for `seconds`."""
    exe = Path(PYTHON).parent / "py-spy"
    if not exe.exists():
        print("  (py-spy is not installed in the venv: no profile)")
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                str(exe),
                "record",
                "--nonblocking",
                "--gil",
                "--format",
                "raw",
                "--rate",
                "200",
                "-d",
                str(seconds),
                "-p",
                str(pid),
                "-o",
                str(out_dir / f"{pid}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in pids
    ]


def pyspy_summary(out_dir: Path, *, top: int = 25, within: str | None = None) -> list[str]:
    """Inclusive share of samples per function (file:function), from py-spy's collapsed stacks.

    With `within`, only stacks that pass through a frame containing that text count, and the
    shares are of those stacks (e.g. within="CompleteApi.post")."""
    inclusive: dict[str, int] = {}
    total = 0
    for path in out_dir.glob("*.txt"):
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            frames = stack.split(";")
            if within and not any(within in f for f in frames):
                continue
            n = int(count)
            total += n
            seen = set()
            for frame in frames:
                name = frame.split(" (", 1)[0]
                where = frame.split(" (", 1)[1].rsplit(":", 1)[0] if " (" in frame else ""
                key = f"{name} ({Path(where).parent.name}/{Path(where).name})" if where else name
                if key not in seen:
                    seen.add(key)
                    inclusive[key] = inclusive.get(key, 0) + n
    if not total:
        return ["  (no samples)"]
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]
    return [f"  {100 * n / total:5.1f}%  {name}" for name, n in ranked] + [f"  ({total} samples)"]
