"""`live_stack`: a real hub, Celery worker and Celery beat against the test database and Redis.

Each runs as a subprocess in its own process group, with the environment a deployment would
give it (short intervals for tests come from the same variables). The fixture waits for
/healthz, yields a LiveStack, and always kills every process group it started; when a test
fails, the tail of every process's log is attached to the report.

Use it from a test marked `e2e`, `postgres` and `django_db(transaction=True)`: the processes
see only what the test commits.

`private_postgres`, requested before `live_stack`, moves the test's database to a PostgreSQL
cluster of the test's own (tests/e2e/pgcluster.py), which the test may then restart: the live
stack follows the test process's connection there.
"""

import base64
import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

import pytest
import requests

from tests.conftest import VOUCHED_POOL_ENV
from tests.e2e.pgcluster import PrivateCluster, find_bindir, free_port, sweep_orphans

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")

# Intervals short enough for a test to watch a node go silent in seconds.
FAST = {
    "NODE_HEARTBEAT_INTERVAL_S": "1",
    "NODE_HEARTBEAT_GRACE_S": "2",
    "NODE_DEGRADED_AFTER_MISSED": "1",
    "NODE_OFFLINE_AFTER_MISSED": "5",
    "NODE_REAPER_INTERVAL_S": "1",
    "LEDGER_SEAL_INTERVAL_S": "2",
    # Every agent benchmarks its machine when it first connects: a short one, still real.
    "NODE_BENCHMARK_MATMUL_N": "256",
    "NODE_BENCHMARK_STREAM_MB": "16",
    "NODE_BENCHMARK_CPU_MS": "200",
}
# The processes, as a deployment runs them (docker-compose.yml), sized for a test.
# Threads, as deployed: a long-poll claim holds a thread, not a whole worker; and a pool of
# connections, one for each thread (DB_POOL_MAX_SIZE in computepool/settings.py).
HUB = shlex.split(
    "-m gunicorn computepool.wsgi -w 2 -k gthread --threads 8 -e DB_POOL_MAX_SIZE=8"
    " --timeout 60 --graceful-timeout 2"
)
WORKER = shlex.split(
    "-m celery -A computepool worker -l info -P solo --without-gossip --without-mingle "
    "--without-heartbeat"
)
BEAT = shlex.split("-m celery -A computepool beat -l info --max-interval 1")
_CLAIM_KEY = "computepool:live-stack"
# Variables of the test process that must not leak into the stack's.
_SCRUB = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "TEST_DATABASE_NAME", "DEBUG"}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    stack = getattr(item, "funcargs", {}).get("live_stack")
    if report.failed and isinstance(stack, LiveStack):
        report.sections.append(("live stack logs", stack.log_tails()))
    return report


@dataclass
class LiveStack:
    url: str
    env: dict[str, str]
    workdir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        """Start `argv` (with this interpreter's modules) as `name`, in its own process group,
        logging to workdir/<name>.log. A name may be reused once its process is gone."""
        if name in self.procs and self.procs[name].poll() is None:
            raise RuntimeError(f"{name} is still running")
        log = (self.workdir / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, *argv],
            cwd=ROOT,
            env=env or self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def run(self, argv: list[str], *, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a command to completion (a management command, the agent's register)."""
        return subprocess.run(
            [sys.executable, *argv],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def kill(self, name: str, sig: int = signal.SIGKILL, *, timeout: float = 10) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout)

    def stop_all(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is None:
                self.kill(name, signal.SIGTERM, timeout=5)
            # Children (gunicorn's and celery's workers) share the group; make sure of them.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def wait_until(
        self, what: str, probe: Callable[[], T], *, timeout: float = 20, every: float = 0.1
    ) -> T:
        """Poll `probe` until it returns something truthy; fail after `timeout` seconds, naming
        `what`, with every process's log tail."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                last = probe()
            except Exception as exc:  # a probe may hit a process that is still starting
                last = exc
            else:
                if last:
                    return last
            for name, proc in self.procs.items():
                if name in ("hub", "worker", "beat") and proc.poll() is not None:
                    raise AssertionError(
                        f"{name} exited ({proc.returncode}) while waiting for "
                        f"{what}\n{self.log_tails()}"
                    )
            time.sleep(every)
        raise AssertionError(
            f"timed out after {timeout}s waiting for {what} (last: {last!r})\n{self.log_tails()}"
        )

    def log_tails(self, lines: int = 60) -> str:
        out = []
        for log in sorted(self.workdir.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"----- {log.name} (last {len(tail)} lines) -----\n" + "\n".join(tail))
        return "\n".join(out)


def _redis_base() -> str | None:
    url = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL") or ""
    if not url.startswith("redis://"):
        return None
    return url.rsplit("/", 1)[0] if url.count("/") > 2 else url


def _claim_redis_db(base: str) -> int:
    """A Redis database of our own, so this stack's broker queue is its own (a worker of another
    stack on the same Redis would otherwise take our tasks). Claimed with SET NX, so two stacks
    starting together never pick the same one; the fixture empties it when done."""
    import redis

    owner = f"{socket.gethostname()}:{os.getpid()}"
    for number in range(15, 1, -1):
        client = redis.Redis.from_url(f"{base}/{number}")
        if not client.set(_CLAIM_KEY, owner, nx=True, ex=3600):
            continue
        if client.dbsize() == 1:
            return number
        client.delete(_CLAIM_KEY)  # someone else's data is here: not ours to use
    pytest.skip("no free Redis database for the live stack's broker")


def database_url(settings_dict: dict) -> str:
    user = quote(settings_dict.get("USER") or "")
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{quote(password)}@" if password else (f"{user}@" if user else "")
    # A URL's `?host=` (the embedded server's socket directory) lands in OPTIONS.
    options = settings_dict.get("OPTIONS") or {}
    host = settings_dict.get("HOST") or options.get("host") or "127.0.0.1"
    port = settings_dict.get("PORT") or options.get("port") or "5432"
    if host.startswith("/"):  # a Unix socket's directory (the embedded server)
        return f"postgres://{auth}/{settings_dict['NAME']}?host={quote(host)}&port={port}"
    return f"postgres://{auth}{host}:{port}/{settings_dict['NAME']}"


@pytest.fixture
def private_postgres(transactional_db, tmp_path: Path) -> Iterator[PrivateCluster]:
    """The test database, on a cluster of this test's own: created and migrated there (as
    `manage.py migrate` does, seed data included), with the test process's connection pointed at
    it, so that a `live_stack` requested afterwards runs hub, worker and beat on it too. The
    test may stop, crash and restart it (`PrivateCluster.stop/start/restart`) without touching
    the shared server. Afterwards the connection points back at the shared test database and
    the cluster is stopped and removed, whatever happened."""
    from django.core.management import call_command
    from django.db import connection

    bindir = find_bindir()
    if bindir is None:
        message = "no initdb/pg_ctl found (set PG_BINDIR) for a private PostgreSQL cluster"
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    settings = connection.settings_dict
    shared = {key: settings.get(key) for key in ("HOST", "PORT", "OPTIONS")}
    superuser = settings.get("USER") or "postgres"  # trust auth: its password is not asked
    sweep_orphans()
    cluster = PrivateCluster(bindir, tmp_path / "postgres.log", superuser=superuser)
    try:
        started = time.monotonic()
        cluster.create()
        cluster.create_database(settings["NAME"])
        connection.close()
        # Without the shared server's socket options (the embedded one's), which psycopg
        # would prefer to HOST and PORT.
        options = {k: v for k, v in (shared["OPTIONS"] or {}).items() if k not in ("host", "port")}
        settings.update(HOST=cluster.host, PORT=str(cluster.port), OPTIONS=options)
        call_command("migrate", interactive=False, verbosity=0)
        cluster.setup_s = time.monotonic() - started
        yield cluster
    finally:
        connection.close()
        settings.update(shared)
        cluster.destroy()


@pytest.fixture
def live_stack_env() -> dict[str, str]:
    """More environment for the live stack's processes: a test module overrides this fixture
    to turn on what its test needs (a setting's switch), as a deployment would."""
    return {}


@pytest.fixture
def live_stack_process_env() -> dict[str, dict[str, str]]:
    """More environment for one of the live stack's processes ("hub", "worker", "beat"), over
    `live_stack_env`: what a deployment gives one container and not the others."""
    return {}


@pytest.fixture
def live_stack(
    transactional_db,
    tmp_path: Path,
    settings,
    live_stack_env: dict[str, str],
    live_stack_process_env: dict[str, dict[str, str]],
) -> Iterator[LiveStack]:
    from django.db import connection

    from core import keys

    base = _redis_base()
    if base is None:
        pytest.skip("the live stack needs Redis (set CELERY_BROKER_URL=redis://…)")
    try:
        import redis

        redis.Redis.from_url(f"{base}/0", socket_timeout=2).ping()
    except Exception as exc:  # any failure to reach it is a reason to skip, with its message
        pytest.skip(f"Redis at {base} is not reachable: {exc}")
    db = _claim_redis_db(base)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.setdefault("DJANGO_SETTINGS_MODULE", "computepool.settings")
    env.update(FAST)
    # The tests' pool (tests/conftest.py), unless the test's `live_stack_env` says otherwise.
    env.update(VOUCHED_POOL_ENV)
    # One ledger key for the stack and this process: seals its worker signs verify here too.
    ledger_key = base64.b64encode(os.urandom(32)).decode()
    settings.LEDGER_SIGNING_KEY = ledger_key
    keys.forget()
    env["LEDGER_SIGNING_KEY"] = ledger_key
    env.update(
        {
            "DATABASE_URL": database_url(connection.settings_dict),
            "REDIS_URL": f"{base}/{db}",
            "CELERY_BROKER_URL": f"{base}/{db}",
            "COMPUTEPOOL_VAR_DIR": str(tmp_path / "var"),
            "SECRET_KEY": "live-stack-test-key-" + os.urandom(8).hex(),
            "DEBUG": "0",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
            # Every request an agent makes counts against its key; tests beat fast.
            "THROTTLE_PER_KEY": "100000/min",
        }
    )
    env.update(live_stack_env)
    stack = LiveStack(url=f"http://127.0.0.1:{port}", env=env, workdir=tmp_path)
    try:
        setup = stack.run(["manage.py", "setup_periodic_tasks"])
        assert setup.returncode == 0, setup.stderr
        own = {
            name: env | live_stack_process_env.get(name, {}) for name in ("hub", "worker", "beat")
        }
        stack.spawn("hub", [*HUB, "-b", f"127.0.0.1:{port}"], own["hub"])
        stack.spawn("worker", WORKER, own["worker"])
        stack.spawn("beat", [*BEAT, "-s", str(tmp_path / "beat-schedule")], own["beat"])
        stack.wait_until(
            "the hub's /healthz",
            lambda: requests.get(f"{stack.url}/healthz", timeout=2).status_code == 200,
            timeout=30,
        )
        yield stack
    finally:
        keys.forget()
        stack.stop_all()
        # Empty the Redis database we claimed, which also releases the claim.
        try:
            import redis

            redis.Redis.from_url(f"{base}/{db}").flushdb()
        except Exception:  # noqa: S110 - best effort: a leftover queue only costs a number
            pass
