"""The monitoring profile: Prometheus scrapes every process the stack runs, Grafana is
provisioned with the dashboard, and the dashboard asks only for documented metrics."""

import importlib.util
import json
import re
from pathlib import Path

import yaml

from tests.core.scraping import documented
from tests.test_compose import load

ROOT = Path(__file__).resolve().parent.parent
MONITORING = ROOT / "deploy" / "monitoring"
_SERIES = ("_bucket", "_sum", "_count")


def _builder():
    spec = importlib.util.spec_from_file_location("dashboard", MONITORING / "dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exprs() -> list[str]:
    board = json.loads((MONITORING / "grafana" / "dashboards" / "computepool.json").read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def _family(series: str) -> str:
    for suffix in _SERIES:
        if series.endswith(suffix) and series.removesuffix(suffix) in documented():
            return series.removesuffix(suffix)
    return series


def test_the_dashboard_file_is_what_its_builder_writes():
    path = MONITORING / "grafana" / "dashboards" / "computepool.json"
    assert path.read_text() == _builder().rendered(), "run python deploy/monitoring/dashboard.py"


def test_the_dashboard_asks_only_for_documented_metrics_and_shows_each_of_them():
    docs = documented()
    used = {_family(name) for expr in _exprs() for name in re.findall(r"computepool_\w+", expr)}
    assert used - set(docs) == set()
    assert set(docs) - used == set()


def test_each_query_is_balanced_and_reads_database_gauges_from_the_hub_alone():
    gauges = {name for name, (kind, _) in documented().items() if kind == "gauge"}
    for expr in _exprs():
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), expr
        for name in re.findall(r"computepool_\w+", expr):
            if name in gauges:
                assert re.search(rf'{name}\{{job="hub"', expr), expr


def test_prometheus_scrapes_every_process_on_the_ports_compose_gives_them():
    services = load()["services"]
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    targets = {
        job["job_name"]: target
        for job in config["scrape_configs"]
        for group in job["static_configs"]
        for target in group["targets"]
    }
    assert targets == {
        "hub": "hub:8000",
        "relay": "relay:8001",
        "worker": f"worker:{services['worker']['environment']['WORKER_METRICS_PORT']}",
        "beat": f"beat:{services['beat']['environment']['BEAT_METRICS_PORT']}",
    }
    assert "8000" in services["hub"]["command"][3] and "8001" in services["relay"]["command"][3]
    for name in ("hub", "relay"):
        assert name in services[name]["environment"]["ALLOWED_HOSTS"]


def test_every_process_counts_in_a_fresh_multiprocess_directory():
    services = load()["services"]
    for name in ("migrate", "hub", "relay", "worker", "beat"):
        directory = services[name]["environment"]["PROMETHEUS_MULTIPROC_DIR"]
        assert directory in services[name]["tmpfs"], name


def test_the_monitoring_profile_mounts_files_that_exist():
    services = load()["services"]
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"]
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            assert (ROOT / source).exists(), volume
    datasource = yaml.safe_load(
        (MONITORING / "grafana/provisioning/datasources/prometheus.yml").read_text()
    )["datasources"][0]
    assert datasource["uid"] == _builder().DATASOURCE["uid"]
    assert datasource["url"] == "http://prometheus:9090"
