"""docker-compose.yml: the services exist and run the commands the design names."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def load() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_it_defines_the_stack():
    services = load()["services"]
    assert {"postgres", "redis", "hub", "worker", "beat"} <= set(services)


def test_the_processes_run_the_right_commands():
    services = load()["services"]
    assert services["hub"]["command"][:2] == ["gunicorn", "computepool.wsgi"]
    relay = services["relay"]["command"]
    assert relay[:2] == ["gunicorn", "computepool.asgi:application"]
    assert "uvicorn.workers.UvicornWorker" in relay
    assert services["worker"]["command"][:4] == ["celery", "-A", "computepool", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "computepool", "beat"]
    assert "migrate" in " ".join(services["migrate"]["command"])
    assert "setup_periodic_tasks" in " ".join(services["migrate"]["command"])


def test_the_hub_processes_share_one_environment_on_postgres_and_redis():
    services = load()["services"]
    for name in ("hub", "relay", "worker", "beat", "migrate"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://"), name
        assert env["CELERY_BROKER_URL"].startswith("redis://"), name
        # One key of each kind for every container: each would otherwise make its own.
        assert env["HUB_SIGNING_KEY"].startswith("${HUB_SIGNING_KEY:?"), name
        assert env["LEDGER_SIGNING_KEY"].startswith("${LEDGER_SIGNING_KEY:?"), name
        assert services[name]["build"] == ".", name
    assert (ROOT / "Dockerfile").is_file()


def test_beat_runs_exactly_once():
    assert load()["services"]["beat"]["deploy"]["replicas"] == 1


def test_the_serving_processes_pool_their_connections_one_per_thread():
    services = load()["services"]
    hub = services["hub"]["command"]
    threads = hub[hub.index("--threads") + 1]
    assert hub[hub.index("-e") + 1] == f"DB_POOL_MAX_SIZE={threads}"
    relay = services["relay"]["command"]
    assert relay[relay.index("-e") + 1].startswith("DB_POOL_MAX_SIZE=")
    # Celery's prefork children keep a connection each: a pool opened before a fork is not theirs.
    for name in ("worker", "beat"):
        assert "DB_POOL_MAX_SIZE" not in services[name]["environment"], name
        assert "DB_POOL_MAX_SIZE" not in " ".join(services[name]["command"]), name
