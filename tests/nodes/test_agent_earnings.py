"""An agent's view of its owner's earnings (what `computepool-agent status` shows)."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from tests.conftest import client_with_key
from tests.ledger.economy_helpers import earn, request_cashout
from tests.nodes.conftest import register_node
from tests.proof.conftest import min_cashout_minor

pytestmark = pytest.mark.django_db


def earnings(client, **query):
    return client.get("/api/v1/agent/earnings", query)


def test_it_shows_the_owners_earnings_today_in_all_and_pending_cashout(alice, bob, mallory):
    _, key = register_node(bob)
    agent = client_with_key(key)
    _, other_key = register_node(mallory, name="mallory-rig")
    minimum = min_cashout_minor()
    with time_machine.travel(datetime.now(UTC) - timedelta(days=2)):
        earn(alice, bob, minimum, job_id=9001)  # in the total, not today
    earn(alice, bob, 1500, job_id=9002)
    request_cashout(bob, minimum)

    body = earnings(agent).json()

    assert (body["today_minor"], body["total_minor"]) == (1500, minimum + 1500)
    assert (body["balance_minor"], body["cashout_pending_minor"]) == (1500, minimum)
    assert body["today"] == "15.00"
    # Another operator's node sees its own owner's: none.
    other = earnings(client_with_key(other_key)).json()
    assert (other["total_minor"], other["cashout_pending_minor"]) == (0, 0)


@pytest.mark.parametrize(("offset", "since"), [(0, "2025-03-10T00:00:00Z"),
                                               (330, "2025-03-10T18:30:00Z"),
                                               (-300, "2025-03-10T05:00:00Z")])  # fmt: skip
def test_today_starts_at_the_agents_midnight(bob, offset: int, since: str):
    _, key = register_node(bob)
    with time_machine.travel(datetime(2025, 3, 10, 23, 0, tzinfo=UTC), tick=False):
        body = earnings(client_with_key(key), utc_offset_min=offset).json()

    assert body["since"] == since


@pytest.mark.parametrize("offset", ["841", "-900", "east"])
def test_a_bad_offset_is_a_field_error(bob, offset: str):
    _, key = register_node(bob)

    response = earnings(client_with_key(key), utc_offset_min=offset)

    assert response.status_code == 400 and "utc_offset_min" in response.json()["fields"]
