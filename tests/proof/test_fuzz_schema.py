"""Schemathesis against the OpenAPI schema at /api/v1/schema: every operation, per credential,
with data that fits the schema and data that does not; no answer may be a 5xx.

Positive cases aim at the world's real objects (its job, node, attempt, cashout, export), so
they pass the 404 and reach the code behind it; negative cases keep schemathesis's own ids.
Each call runs in a savepoint that is rolled back, as a request in its own transaction would
be. Every 5xx is collected (operation, status, a curl to reproduce) and reported together.

    PROOF_FUZZ_EXAMPLES=200 PROOF_FUZZ_SEED=7 pytest tests/proof/test_fuzz_schema.py
"""

import math
import os
from typing import Any

import pytest
import schemathesis
from django.db import transaction
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from tests.proof.conftest import World

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("PROOF_FUZZ_EXAMPLES", "6"))
SEED = int(os.environ.get("PROOF_FUZZ_SEED", "20260101"))
CREDENTIALS = {
    "submitter": "alice",
    "operator": "bob",
    "agent": "bob_agent",
    "finance": "carol",
}


def _real_ids(world: World) -> dict[str, Any]:
    return {
        "job_id": world.job.pk,
        "node_id": world.node.pk,
        "attempt_id": world.attempt_id,
        "artifact_id": world.artifact_id,
        "cashout_id": world.cashout_requested.pk,
        "export_id": world.export.pk,
        "key_id": world.spare_key.pk,
    }


def _no_long_poll(case) -> None:
    """A claim may wait up to 30 s for work: that is the long-poll, not a fault. Fuzzed claims
    ask for no wait, so the run stays short (and the test's transaction keeps its connection)."""
    if case.operation.path.endswith("/agent/claim") and isinstance(case.body, dict):
        try:
            wait = float(case.body.get("wait", 0))
        except (TypeError, ValueError):
            return
        if math.isfinite(wait) and 0 < wait <= 30:
            case.body["wait"] = 0


@pytest.fixture(scope="module")
def schema(world):
    """The schema, served by the WSGI application itself. Calls go through the real WSGI
    handler, which closes a connection whose autocommit is off at every request's start and
    end; as Django's test client does, keep that off while the test's transaction is open."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from computepool.wsgi import application

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/v1/schema?format=json", application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def fuzz(strategy, *, auth: dict[str, str], label: str, failures: list[str]) -> int:
    """Call every generated case; collect (not raise) server errors. Returns the call count."""
    calls = 0

    @seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],  # a 5xx is collected, not shrunk
    )
    @given(case=strategy)
    def run(case) -> None:
        nonlocal calls
        _no_long_poll(case)
        with transaction.atomic():
            response = case.call(headers=auth)
            transaction.set_rollback(True)
        calls += 1
        try:
            case.validate_response(response, checks=[not_a_server_error], headers=auth)
        except Exception as exc:  # schemathesis's FailureGroup: its text has the curl
            failures.append(f"{label}: {str(exc)[:1500]}")

    run()
    return calls


@pytest.mark.parametrize("credential", list(CREDENTIALS))
def test_no_input_makes_any_endpoint_answer_5xx(world: World, schema, credential):
    auth = {"Authorization": f"Bearer {world.keys[CREDENTIALS[credential]]}"}
    real = _real_ids(world)
    failures: list[str] = []
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        ids = {p.name: real[p.name] for p in operation.path_parameters if p.name in real}
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fixed = ids if mode is GenerationMode.POSITIVE else None
            calls += fuzz(
                operation.as_strategy(generation_mode=mode, path_parameters=fixed),
                auth=auth,
                label=f"{operation.label} [{mode}]",
                failures=failures,
            )
    assert calls > 0
    assert not failures, f"{len(failures)} server errors as {credential}:\n" + "\n".join(failures)
