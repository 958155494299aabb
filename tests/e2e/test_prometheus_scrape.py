"""A real Prometheus scrapes the live stack as the monitoring profile does, and every query of
the Grafana dashboard runs against the series it stored.

Debian's `prometheus` package gives the binary and promtool; the test skips without them,
unless REQUIRE_PROMETHEUS=1 (CI sets it, `.ci/run` installs the package), where it fails.
The scrape configuration is deploy/monitoring/prometheus.yml itself, with each job's target
moved to the local process that plays it and a one-second interval.
"""

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from people.services import user_create
from tests.core.scraping import documented, samples
from tests.e2e.conftest import LiveStack
from tests.e2e.pgcluster import free_port
from tests.jobs.conftest import CREDITS, fund, submit_job
from tests.nodes.conftest import register_node

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
BOARD = MONITORING / "grafana" / "dashboards" / "computepool.json"
_HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")
# What Grafana puts in place of its own variables before it sends a query.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "6h",
    "$interval": "15s",
}
# What the node's one heartbeat reports of its GPU.
GPU_STATE = {"index": 0, "temperature_c": 61, "utilization_pct": 87}


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        message = f"no {name} on PATH: apt-get install -y prometheus"
        if os.environ.get("REQUIRE_PROMETHEUS") == "1":
            pytest.fail(f"REQUIRE_PROMETHEUS=1 but {message}")
        pytest.skip(message)
    return found


def grafana_expr(expr: str, board: dict) -> str:
    """`expr` as Grafana sends it: its variables and the board's template variables (their
    current value) written out."""
    values = dict(GRAFANA_VARIABLES)
    for variable in board.get("templating", {}).get("list", []):
        current = variable.get("current", {}).get("value", ".*")
        values[f"${variable['name']}"] = "|".join(current) if isinstance(current, list) else current
    for name in sorted(values, key=len, reverse=True):  # longest first: `$job` not in `$jobs`
        expr = expr.replace(f"${{{name[1:]}}}", values[name]).replace(name, values[name])
    assert "$" not in expr, f"a variable this test does not know: {expr}"
    return expr


def dashboard_queries() -> dict[tuple[str, str], str]:
    """(panel title, refId) -> the query Grafana would send."""
    board = json.loads(BOARD.read_text())
    return {
        (panel["title"], target["refId"]): grafana_expr(target["expr"], board)
        for panel in board["panels"]
        for target in panel.get("targets", [])
    }


class Prometheus:
    def __init__(self, binary: str, config: dict, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def api(self, path: str, **params: str) -> object:
        answer = requests.get(f"{self.url}/api/v1/{path}", params=params, timeout=10).json()
        assert answer["status"] == "success", (path, params, answer)
        return answer["data"]

    def query(self, expr: str) -> list[dict]:
        """An instant query's vector (the dashboard's are all vectors)."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        return data["result"]

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def scrape_config(targets: dict[str, str]) -> dict:
    """deploy/monitoring/prometheus.yml with each job scraping `targets[job]`, every second."""
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", scrape_timeout="1s", evaluation_interval="1s")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(targets), "give every job of the profile a local process"
    for name, job in jobs.items():
        job["static_configs"] = [{"targets": [targets[name]]}]
    return config


@pytest.fixture
def worker_ports() -> dict[str, int]:
    return {"worker": free_port(), "beat": free_port()}


@pytest.fixture
def live_stack_env() -> dict[str, str]:
    return {
        "METRICS_CACHE_S": "1",
        # One heartbeat keeps the node online for the whole test; the reapers still run each
        # second, so their figures have samples.
        "NODE_HEARTBEAT_INTERVAL_S": "300",
    }


@pytest.fixture
def live_stack_process_env(tmp_path: Path, worker_ports: dict[str, int]) -> dict[str, dict]:
    # A multiprocess directory each, as docker-compose.yml gives each container a tmpfs: each
    # process shows only what it counted, and the dashboard's sums add them up.
    return {
        "hub": {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics-hub")},
        "worker": {
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics-worker"),
            "WORKER_METRICS_PORT": str(worker_ports["worker"]),
        },
        "beat": {
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics-beat"),
            "BEAT_METRICS_PORT": str(worker_ports["beat"]),
        },
    }


@pytest.fixture
def prometheus_binary() -> str:
    return _tool("prometheus")


@pytest.fixture
def prometheus(
    prometheus_binary: str, live_stack: LiveStack, worker_ports, tmp_path: Path
) -> Iterator[Prometheus]:
    relay_port = free_port()
    live_stack.spawn(
        "relay",
        ["-m", "uvicorn", "computepool.asgi:application", "--host", "127.0.0.1", "--port",
         str(relay_port)],
        live_stack.env | {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics-relay")},
    )  # fmt: skip
    targets = {
        "hub": live_stack.url.removeprefix("http://"),
        "relay": f"127.0.0.1:{relay_port}",
        **{name: f"127.0.0.1:{port}" for name, port in worker_ports.items()},
    }
    server = Prometheus(prometheus_binary, scrape_config(targets), tmp_path)
    try:
        live_stack.wait_until(
            "every target up in Prometheus",
            lambda: (
                {
                    target["labels"]["job"]
                    for target in server.api("targets")["activeTargets"]
                    if target["health"] == "up"
                }
                == set(targets)
            ),
            timeout=90,
            every=0.5,
        )
        yield server
    finally:
        server.stop()


def _documented_series() -> set[str]:
    """The series names docs/metrics.md's families are exposed as."""
    names = set()
    for family, (kind, _) in documented().items():
        names |= {family + s for s in _HISTOGRAM_SERIES} if kind == "histogram" else {family}
    return names


def _run_slices(url: str, key: str, count: int) -> None:
    """Claim `count` slices and complete each, over HTTP, as an agent does, each after 50 ms of
    "work": the hub bills from the claim to the report at the node's price per second (about
    one minor unit per 10 ms here), and an attempt reported within a few ms costs nothing and
    posts no settlement entry, which the money panels below count."""
    agent = {"Authorization": f"Bearer {key}"}
    for _ in range(count):
        lease = requests.post(f"{url}/api/v1/agent/claim", json={}, headers=agent, timeout=30)
        assert lease.status_code == 200, lease.text
        time.sleep(0.05)
        done = requests.post(
            f"{url}/api/v1/agent/attempts/{lease.json()['attempt_id']}/complete",
            json={"lease_token": lease.json()["lease_token"], "exit_code": 0},
            headers=agent,
            timeout=30,
        )
        assert done.status_code == 200, done.text


def _positive(server: Prometheus, expr: str, **labels: str) -> bool:
    return any(
        labels.items() <= row["metric"].items() and float(row["value"][1]) > 0
        for row in server.query(expr)
    )


def test_the_monitoring_profile_config_is_valid():
    promtool = _tool("promtool")
    checked = subprocess.run(
        [promtool, "check", "config", str(MONITORING / "prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert not list(MONITORING.rglob("*rules*")), "check the rules with promtool check rules"


def test_grafana_variables_are_written_out():
    board = {"templating": {"list": [{"name": "job", "current": {"value": ["hub", "relay"]}}]}}
    assert (
        grafana_expr('rate(x{job=~"$job"}[$__rate_interval]) / ${__interval}', board)
        == 'rate(x{job=~"hub|relay"}[1m]) / 15s'
    )


@pytest.mark.e2e
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_prometheus_stores_every_documented_series_and_runs_every_dashboard_query(
    prometheus: Prometheus, live_stack: LiveStack
):
    queries = dashboard_queries()
    alice = user_create(username="alice", roles=["submitter"])
    bob = user_create(username="bob", roles=["operator"])
    fund(alice, 10_000 * CREDITS)
    _, key = register_node(bob)
    heartbeat = requests.post(
        f"{live_stack.url}/api/v1/agent/heartbeat",
        json={"status": "available", "gpus": [GPU_STATE]},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert heartbeat.status_code == 200, heartbeat.text

    # A first job makes the labelled counters' series; Prometheus must see them before the
    # second, or `rate` and `increase` have no earlier sample to count from.
    submit_job(alice.pk, 2)
    _run_slices(live_stack.url, key, 2)
    live_stack.wait_until(
        "the first job's series in Prometheus",
        lambda: prometheus.query('computepool_jobs_finished_total{job="hub", state="succeeded"}'),
        timeout=30,
    )
    submit_job(alice.pk, 3)
    live_stack.wait_until(
        "the queue's depth on the dashboard",
        lambda: _positive(prometheus, queries[("Queued tasks by size class", "A")]),
        timeout=30,
    )
    _run_slices(live_stack.url, key, 3)

    # The key panels show what happened.
    for panel, labels in [
        ("Jobs finished per hour", {"state": "succeeded"}),
        ("Attempts ended per second", {"outcome": "succeeded"}),
        ("Claims per second", {"result": "leased"}),
        ("Claim latency", {}),
        ("Dispatch latency (claimable → leased)", {}),
        ("Ledger entries per second", {"kind": "settlement"}),
        ("Settled per hour: platform fee and operators' share", {"account_kind": "earnings"}),
        ("Celery tasks per second", {}),
        ("Beat sends per minute", {}),
    ]:
        live_stack.wait_until(
            f"{panel} on the dashboard",
            lambda panel=panel, labels=labels: _positive(
                prometheus, queries[(panel, "A")], **labels
            ),
            timeout=60,
        )
    # Summed over every scraped process, as the panels sum them, each claim, attempt and job
    # counts once: no process shows another's counters.
    for expr, count in [
        ('sum(computepool_claims_total{result="leased"})', 5),
        ("sum(computepool_claim_seconds_count)", 5),
        ('sum(computepool_attempts_total{outcome="succeeded"})', 5),
        ('sum(computepool_jobs_finished_total{state="succeeded"})', 2),
    ]:
        live_stack.wait_until(
            f"{expr} == {count}",
            lambda expr=expr, count=count: (
                [float(row["value"][1]) for row in prometheus.query(expr)] == [count]
            ),
            timeout=30,
        )
    assert _positive(prometheus, queries[("GPU temperature by tier", "A")], stat="max")
    assert prometheus.query(queries[("Live tasks by state", "A")])
    assert prometheus.query(queries[("Nodes by state", "A")])

    # Every query of every panel parses and evaluates (`api` asserts "success"); a quantile of
    # a histogram with samples is a number.
    for (panel, ref), expr in queries.items():
        for row in prometheus.query(expr):
            if panel.startswith(("Claim latency", "Dispatch latency")):
                assert not math.isnan(float(row["value"][1])), (panel, ref, row)

    # Every process's exposition passes promtool's lint (names, suffixes, help); every
    # documented series a process exposes reached Prometheus, and nothing undocumented did.
    promtool = _tool("promtool")
    exposed = set()
    for target in prometheus.api("targets")["activeTargets"]:
        answer = requests.get(target["scrapeUrl"], timeout=30)
        lint = subprocess.run(
            [promtool, "check", "metrics"], input=answer.content, capture_output=True, check=False
        )
        assert lint.returncode == 0, (target["labels"]["job"], lint.stdout + lint.stderr)
        exposed |= {name for name, _ in samples(answer.text)}
    expected = exposed & _documented_series()

    def stored() -> set[str] | None:
        names = set(prometheus.api("label/__name__/values"))
        return names if expected <= names else None

    names = live_stack.wait_until("every exposed series in Prometheus", stored, timeout=30)
    assert {n for n in names if n.startswith("computepool_")} <= _documented_series()
    floor = {n for n, (kind, _) in documented().items() if kind == "gauge"}
    floor |= {"computepool_claim_seconds_bucket", "computepool_dispatch_seconds_bucket"}
    floor |= {"computepool_jobs_finished_total", "computepool_celery_tasks_total"}
    assert floor <= names, floor - names
