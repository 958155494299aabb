"""The proof suite's common ground: a cache of its own, a world with one of everything, and the
live stack (from tests/e2e) for the chaos proof.

The world is what an attacker would aim at: alice's job with a task leased to bob's node and an
uploaded artifact, an ended job of hers with a webhook, bob's node, bob's cashouts in every
state, a finance export, and alice's spare API key. mallory (submitter and operator) owns a
node, earnings and credits of her own, so that every "another …" actor is a real, working
principal rather than an empty account.

Pages are visited with browser sessions (`World.pages`), and a session acts as every role of
its user: there "another submitter" is sybil (a submitter only) and "another operator" is otto
(an operator only), so that a page gated by role meets each role alone. An agent visits a page
with its key in the header, which logs nobody in.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tests.conftest import client_with_key, key_for

# The live stack (real hub, worker and beat), with its log tails on failure, on a PostgreSQL
# cluster of its own that the chaos proof restarts.
from tests.e2e.conftest import (  # noqa: F401
    live_stack,
    live_stack_env,
    live_stack_process_env,
    private_postgres,
    pytest_runtest_makereport,
)
from tests.jobs.conftest import CREDITS, fund, job_body, upload
from tests.nodes.conftest import beat, register_node

WEBHOOK_SECRET = "proof-webhook-secret"
UPI = {"method": "upi", "vpa": "bob@okbank"}
ARTIFACT = b"upper-cased words\n"


# A per-process cache: other suites on this machine share Redis database 0, and with it
# throttle counters keyed by key ids that every test database reuses. The actors' passwords are
# never used here; a slow hash would only cost seconds per world.
WORLD_SETTINGS = {
    "CACHES": {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
    "PAYMENT_WEBHOOK_SECRET": WEBHOOK_SECRET,
    "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"],
    # The world's lease must outlive the module that uses it.
    "JOB_LEASE_S": 3600,
    # No node serves models in this world: an allowed relay call gets its 429 at once.
    "INFERENCE_QUEUE_WAIT_S": 0,
    # The pages' budgets, as unspendable as the API's below.
    "WEB_LOGIN_RATE": (1_000_000, 60),
    "WEB_SIGNUP_RATE": (1_000_000, 60),
    "WEB_PASSWORD_RESET_RATE": (1_000_000, 60),
    "WEB_ENROL_RATE": (1_000_000, 60),
    "WEB_CASHOUT_RATE": (1_000_000, 60),
    "WEB_JOB_SUBMIT_RATE": (1_000_000, 60),
    "WEB_NETWORK_PAGE_RATE": (1_000_000, 60),
    "WEB_PUBLIC_NAME_RATE": (1_000_000, 60),
}
# A request in force on bob's node in the relay (Redis), for the push endpoint's row.
RELAY_REQUEST_ID = 970_000_001


@pytest.fixture(autouse=True)
def _own_cache_and_no_throttle(settings, monkeypatch) -> None:
    """WORLD_SETTINGS, and throttle budgets that a fuzzer cannot spend, so a 429 never hides
    what an endpoint does."""
    from rest_framework.throttling import SimpleRateThrottle

    for name, value in WORLD_SETTINGS.items():
        setattr(settings, name, value)
    rates = {"per_key": "1000000/min", "anon": "1000000/min"}
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)


def min_cashout_minor() -> int:
    from ledger.pricing import rules_at
    from ledger.quotes import MINOR_PER_CREDIT

    rules = rules_at()
    return -(-rules.min_cashout_paise * MINOR_PER_CREDIT // rules.paise_per_credit)


_fake_jobs = iter(range(900_000_001, 10**12))


def earn(submitter, operator, amount: int) -> None:
    """Give `operator` at least `amount` of earnings through a real hold and settlement."""
    from tests.ledger.economy_helpers import earn as ledger_earn

    ledger_earn(submitter, operator, amount, job_id=next(_fake_jobs))


def signed(body: bytes, *, secret: str = WEBHOOK_SECRET, at: int | None = None) -> str:
    from ledger.funding import webhook_sign

    return webhook_sign(body, secret=secret, timestamp=int(time.time()) if at is None else at)


@dataclass
class World:
    users: dict[str, Any]
    keys: dict[str, str]  # principal -> API key
    clients: dict[str, APIClient]  # principal -> a client sending that key
    node: Any  # bob's
    other_node: Any  # mallory's
    job: Any  # alice's
    attempt_id: int
    lease_token: str
    artifact_id: int
    spare_key: Any  # alice's, for the revoke endpoint
    cashout_requested: Any
    cashout_approved: Any
    export: Any
    extra: dict[str, Any] = field(default_factory=dict)
    pages: dict[str, Client] = field(default_factory=dict)  # principal -> a browser


def build_world(media_root: str) -> World:
    from asgiref.sync import async_to_sync
    from django.contrib.auth import get_user_model

    from inference import relay
    from inference.catalog import model_register
    from inference.models import InferenceModel
    from jobs.cancellation import job_cancel
    from jobs.models import Artifact, Job
    from ledger.cashouts import cashout_approve, cashout_request
    from ledger.exports import cashout_export_create
    from people.services import api_key_create, user_create
    from tests.inference.conftest import price_tokens
    from webhooks.models import WebhookDelivery
    from webhooks.services import delivery_attempt

    def person(name: str, roles: list[str]):
        return user_create(
            username=name,
            roles=roles,
            email=f"{name}@example.test",
            password="correct horse battery staple",
        )

    alice, bob = person("alice", ["submitter"]), person("bob", ["operator"])
    carol, dave = person("carol", ["finance"]), person("dave", ["admin"])
    mallory = person("mallory", ["submitter", "operator"])
    sybil, otto = person("sybil", ["submitter"]), person("otto", ["operator"])
    get_user_model().objects.filter(pk=dave.pk).update(is_staff=True, is_superuser=True)

    fund(alice, 1_000_000 * CREDITS)
    fund(mallory, 1_000_000 * CREDITS)
    minimum = min_cashout_minor()
    earn(alice, bob, 5 * minimum)
    earn(alice, mallory, 2 * minimum)

    node, bob_agent_key = register_node(bob, name="bob-rig")
    other_node, mallory_agent_key = register_node(mallory, name="mallory-rig")
    bob_agent = client_with_key(bob_agent_key)
    for agent_key in (bob_agent_key, mallory_agent_key):
        assert beat(client_with_key(agent_key)).status_code == 200
    alice_key = key_for(alice, "submitter")
    alice_submitter = client_with_key(alice_key)
    created = alice_submitter.post("/api/v1/jobs/", job_body(slices=2), format="json")
    assert created.status_code == 201, created.content
    job = Job.objects.get(pk=created.json()["id"])
    lease = bob_agent.post("/api/v1/agent/claim", {"wait": 0}, format="json")
    assert lease.status_code == 200, lease.content
    lease = lease.json()
    uploaded = upload(bob_agent, lease, "out.txt", ARTIFACT)
    assert uploaded.status_code == 201, uploaded.content
    # A job of alice's that named a webhook and ended (cancelled), and whose one allowed
    # delivery attempt found nothing listening: a delivery its owner may ask for again.
    with override_settings(WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_MAX_ATTEMPTS=1):
        hooked = alice_submitter.post(
            "/api/v1/jobs/", job_body(webhook_url="http://127.0.0.1:9/hooks"), format="json"
        )
        assert hooked.status_code == 201, hooked.content
        job_cancel(job=Job.objects.get(pk=hooked.json()["id"]), actor=f"user:{alice.pk}")
        delivery = WebhookDelivery.objects.get(webhook_id=hooked.json()["id"])
        assert delivery_attempt(delivery_id=delivery.pk) is None
    spare_key, _ = api_key_create(user=alice, role="submitter", name="spare")
    model = model_register(
        InferenceModel(
            name="tiny", quantization="F16", context_length=256, ram_mb=1024,
            file=SimpleUploadedFile("tiny.gguf", b"GGUF tiny"),
        )
    )  # fmt: skip
    price_tokens({model.name: (1_000_000, 2_000_000)})
    async_to_sync(relay.assign)(
        RELAY_REQUEST_ID, 1, node.pk, node.agent_key.key_hash, {"model": {"name": "tiny"}}
    )

    def request(amount: int):
        with transaction.atomic():
            return cashout_request(
                operator_id=bob.pk, amount=amount, payout_details=UPI, actor=f"user:{bob.pk}"
            )

    approved = request(minimum)
    cashout_approve(cashout_id=approved.pk, actor=f"user:{carol.pk}")
    export = cashout_export_create(
        period_from=timezone.now() - timedelta(days=1),
        period_to=timezone.now() + timedelta(seconds=1),
        actor=f"user:{carol.pk}",
    )
    # Approved after the export was made: what a finance caller's new export picks up.
    later = request(minimum)
    cashout_approve(cashout_id=later.pk, actor=f"user:{carol.pk}")
    requested = request(minimum)

    keys = {
        "alice": alice_key,
        "bob": key_for(bob, "operator"),
        "bob_agent": bob_agent_key,
        "mallory_submitter": key_for(mallory, "submitter"),
        "mallory_operator": key_for(mallory, "operator"),
        "mallory_agent": mallory_agent_key,
        "carol": key_for(carol, "finance"),
        "dave": key_for(dave, "admin"),
    }
    clients = {"anonymous": APIClient()} | {name: client_with_key(k) for name, k in keys.items()}
    pages = {
        "anonymous": Client(),
        "bob_agent": Client(HTTP_AUTHORIZATION=f"Bearer {bob_agent_key}"),
        "mallory_agent": Client(HTTP_AUTHORIZATION=f"Bearer {mallory_agent_key}"),
    }
    sessions = {
        "alice": alice,
        "bob": bob,
        "mallory_submitter": sybil,
        "mallory_operator": otto,
        "carol": carol,
        "dave": dave,
    }
    for principal, user in sessions.items():
        pages[principal] = Client()
        pages[principal].force_login(user)
    return World(
        users={
            "alice": alice,
            "bob": bob,
            "carol": carol,
            "dave": dave,
            "mallory": mallory,
            "sybil": sybil,
            "otto": otto,
        },
        pages=pages,
        keys=keys,
        clients=clients,
        node=node,
        other_node=other_node,
        job=job,
        attempt_id=lease["attempt_id"],
        lease_token=lease["lease_token"],
        artifact_id=Artifact.objects.get(attempt_id=lease["attempt_id"]).pk,
        spare_key=spare_key,
        cashout_requested=requested,
        cashout_approved=approved,
        export=export,
        extra={
            "media_root": media_root,
            "model": model.name,
            "request": RELAY_REQUEST_ID,
            "webhook_job": hooked.json()["id"],
        },
    )


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[World]:
    """One world per module, built inside a transaction that is rolled back at the module's
    end; each test runs in a savepoint inside it (pytest-django's `db`), as Django's
    TestCase.setUpTestData does. Tests read the world's objects by id and never mutate them."""
    media_root = str(tmp_path_factory.mktemp("media"))
    with (
        django_db_blocker.unblock(),
        override_settings(**WORLD_SETTINGS, MEDIA_ROOT=media_root),
        transaction.atomic(),
    ):
        try:
            yield build_world(media_root)
        finally:
            transaction.set_rollback(True)
