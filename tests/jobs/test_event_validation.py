"""The events a task writes are checked by the compiled validators, not the slow path."""

import pytest

from ledger import registry
from ledger.models import Event
from tests.jobs.conftest import claim, complete, job_body, online_node


@pytest.mark.django_db
def test_the_events_of_a_task_take_the_compiled_path(submitter, bob):
    submitter.post("/api/v1/jobs/", job_body(), format="json")
    _, agent = online_node(bob)
    assert complete(agent, claim(agent).json()).status_code == 200
    written = list(Event.objects.values_list("type", "payload"))
    assert {"TaskClaimed", "AttemptSucceeded", "AttemptSettled", "CreditsHeld"} <= {
        kind for kind, _ in written
    }
    for kind, payload in written:
        registry.get(kind).fast(payload)  # raises if it would have fallen back
