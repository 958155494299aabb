"""Every endpoint × every kind of caller: only the intended actors get through.

The expected table is data (tests/proof/matrix.py); this file calls each cell against a world
with one of everything (tests/proof/conftest.py), each call in a savepoint that is rolled back,
so a cancel or a retire by one actor never changes what the next one sees. A new endpoint
without a row fails `test_every_served_endpoint_has_a_row`; docs/security.md must carry the
same table.
"""

import copy
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.utils import timezone

from tests.jobs.conftest import job_body
from tests.nodes.conftest import capabilities, honest_report
from tests.proof import matrix
from tests.proof.conftest import UPI, World, min_cashout_minor, signed

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
LOGIN = "/login/"

# Which principal plays each actor; "owner" depends on the row (matrix.MATRIX's first field).
PLAYS = {
    "anonymous": "anonymous",
    "other_submitter": "mallory_submitter",
    "other_operator": "mallory_operator",
    "other_agent": "mallory_agent",
    "finance": "carol",
    "admin": "dave",
}
OWNER_PLAYS = {
    "self": "alice",
    "submitter": "alice",
    "operator": "bob",
    "cashout": "bob",
    "agent": "bob_agent",
    "provider": "anonymous",  # signed by the provider's secret: see _webhook
    "public": "anonymous",
    "finance": "alice",
    "catalog": "alice",
    "model_file": "bob_agent",
    "relay": "alice",
    "relay_push": "bob_agent",
    "benchmark": "bob_agent",
    "page_public": "alice",
    "page_self": "alice",
    "page_reset": "alice",
    "page_operator": "bob",
    "page_finance": "bob",
    "page_submitter": "alice",
}
ROLE_OF = {
    "alice": "submitter",
    "bob": "operator",
    "mallory_submitter": "submitter",
    "mallory_operator": "operator",
    "carol": "finance",
    "dave": "admin",
}


@dataclass
class Call:
    method: str
    path: str
    data: Any = None
    format: str = "json"
    headers: dict[str, str] = field(default_factory=dict)
    page: bool = False  # a web page: sent from the principal's browser (World.pages)


def page(method: str, path: str, data: dict[str, Any] | None = None) -> Call:
    return Call(method, path, data, format="form", page=True)


PASSWORD = "correct horse battery staple"


def _reset_link(w: World) -> str:
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    alice = w.users["alice"]
    uid = urlsafe_base64_encode(force_bytes(alice.pk))
    return f"/reset/{uid}/{default_token_generator.make_token(alice)}/"


def _signup(principal: str) -> dict[str, str]:
    return {
        "username": f"matrix-{principal}",
        "email": f"matrix-{principal}@example.test",
        "password1": "a long new passphrase 42",
        "password2": "a long new passphrase 42",
        "role": "submitter",
    }


def _job_form() -> dict[str, Any]:
    """The job form's fields for a small script job (web/job_form.py)."""
    return {
        "kind": "script", "script": "true", "interpreter": "sh", "slices": 1, "cpu_cores": 1,
        "ram_mb": 256, "disk_mb": 256, "gpu_count": 0, "min_vram_mb": 0, "timeout_s": 60,
        "max_attempts": 3, "priority": 0, "price_ceiling": "0.01",
    }  # fmt: skip


def _iso(when) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _period() -> str:
    now = timezone.now()
    return f"from={_iso(now - timedelta(days=1))}&to={_iso(now + timedelta(days=1))}"


def _day(offset: int) -> str:
    return (timezone.now() + timedelta(days=offset)).date().isoformat()


def _lease(w: World, **body: Any) -> dict[str, Any]:
    return {"lease_token": w.lease_token, **body}


def _webhook(w: World, principal: str, owner: bool) -> Call:
    body = json.dumps(
        {
            "id": f"pay-{principal}",
            "type": "payment.succeeded",
            "user_id": w.users["alice"].pk,
            "amount_paise": 1000,
            "currency": "INR",
        }
    ).encode()
    headers = {"HTTP_X_PAYMENT_SIGNATURE": signed(body)} if owner else {}
    return Call("post", "/api/v1/credits/webhook", body, "raw", headers)


def _benchmark_report(w: World) -> Call:
    """A benchmark issued to bob's node and taken by it, with the report its agent would make."""
    from nodes.services import benchmark_issue, benchmark_take

    benchmark = benchmark_issue(node=w.node, reason="admin", actor="matrix")
    w.node.refresh_from_db()
    benchmark_take(node=w.node)
    report = honest_report(benchmark.spec, [])
    return Call("post", f"/api/v1/agent/benchmark/{benchmark.pk}", {"report": report})


def _artifact(w: World) -> Call:
    data = b"second output\n"
    return Call(
        "post",
        f"/api/v1/agent/attempts/{w.attempt_id}/artifacts",
        _lease(
            w,
            name="second.txt",
            sha256=hashlib.sha256(data).hexdigest(),
            file=SimpleUploadedFile("second.txt", data),
        ),
        "multipart",
    )


Builder = Callable[[World, str, bool], Call]
A = "/api/v1/agent/attempts/{}/"

REQUESTS: dict[str, Builder] = {
    "GET /api/v1/me": lambda w, p, o: Call("get", "/api/v1/me"),
    "GET /v1/models": lambda w, p, o: Call("get", "/v1/models"),
    "POST /v1/chat/completions": lambda w, p, o: Call(
        "post",
        "/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]},
    ),
    "POST /v1/completions": lambda w, p, o: Call(
        "post", "/v1/completions", {"model": "tiny", "prompt": "hi"}
    ),
    "POST /api/v1/agent/inference/poll": lambda w, p, o: Call(
        "post", "/api/v1/agent/inference/poll", {"wait": 0}
    ),
    "POST /api/v1/agent/inference/push": lambda w, p, o: Call(
        "post",
        "/api/v1/agent/inference/push",
        {
            "pushes": [
                {
                    "request_id": w.extra["request"],
                    "attempt": 1,
                    "entries": [{"k": "t", "v": ["x"]}],
                }
            ]
        },
    ),
    "GET /api/v1/agent/models/{name}": lambda w, p, o: Call(
        "get", f"/api/v1/agent/models/{w.extra['model']}"
    ),
    "GET /api/v1/keys/": lambda w, p, o: Call("get", "/api/v1/keys/"),
    "POST /api/v1/keys/": lambda w, p, o: Call(
        "post", "/api/v1/keys/", {"role": ROLE_OF.get(p, "submitter"), "name": "matrix"}
    ),
    "POST /api/v1/keys/{key_id}/revoke": lambda w, p, o: Call(
        "post", f"/api/v1/keys/{w.spare_key.pk}/revoke"
    ),
    "GET /api/v1/nodes/": lambda w, p, o: Call("get", "/api/v1/nodes/"),
    "POST /api/v1/nodes/": lambda w, p, o: Call(
        "post",
        "/api/v1/nodes/",
        {"name": "matrix-rig", "region": "IN", "capabilities": capabilities()},
    ),
    "GET /api/v1/nodes/{node_id}": lambda w, p, o: Call("get", f"/api/v1/nodes/{w.node.pk}"),
    "PATCH /api/v1/nodes/{node_id}": lambda w, p, o: Call(
        "patch", f"/api/v1/nodes/{w.node.pk}", {"name": "renamed"}
    ),
    "POST /api/v1/nodes/{node_id}/pause": lambda w, p, o: Call(
        "post", f"/api/v1/nodes/{w.node.pk}/pause"
    ),
    "POST /api/v1/nodes/{node_id}/resume": lambda w, p, o: Call(
        "post", f"/api/v1/nodes/{w.node.pk}/resume"
    ),
    "POST /api/v1/nodes/{node_id}/retire": lambda w, p, o: Call(
        "post", f"/api/v1/nodes/{w.node.pk}/retire"
    ),
    "GET /api/v1/nodes/{node_id}/history": lambda w, p, o: Call(
        "get", f"/api/v1/nodes/{w.node.pk}/history"
    ),
    "GET /api/v1/agent/me": lambda w, p, o: Call("get", "/api/v1/agent/me"),
    "POST /api/v1/agent/heartbeat": lambda w, p, o: Call(
        "post", "/api/v1/agent/heartbeat", {"status": "available"}
    ),
    "GET /api/v1/agent/earnings": lambda w, p, o: Call("get", "/api/v1/agent/earnings"),
    "POST /api/v1/agent/claim": lambda w, p, o: Call("post", "/api/v1/agent/claim", {"wait": 0}),
    "GET /api/v1/agent/benchmark": lambda w, p, o: Call("get", "/api/v1/agent/benchmark"),
    "POST /api/v1/agent/benchmark/{benchmark_id}": lambda w, p, o: _benchmark_report(w),
    # Another node's agent presents the right token too: a stolen token is worth nothing.
    "POST /api/v1/agent/attempts/{attempt_id}/progress": lambda w, p, o: Call(
        "post", A.format(w.attempt_id) + "progress", _lease(w, progress=10)
    ),
    "POST /api/v1/agent/attempts/{attempt_id}/log": lambda w, p, o: Call(
        "post", A.format(w.attempt_id) + "log", _lease(w, stream="stdout", seq=7, data="x\n")
    ),
    "POST /api/v1/agent/attempts/{attempt_id}/artifacts": lambda w, p, o: _artifact(w),
    "POST /api/v1/agent/attempts/{attempt_id}/complete": lambda w, p, o: Call(
        "post", A.format(w.attempt_id) + "complete", _lease(w, exit_code=0)
    ),
    "POST /api/v1/agent/attempts/{attempt_id}/fail": lambda w, p, o: Call(
        "post", A.format(w.attempt_id) + "fail", _lease(w, failure_class="job")
    ),
    "POST /api/v1/agent/attempts/{attempt_id}/hand-back": lambda w, p, o: Call(
        "post", A.format(w.attempt_id) + "hand-back", _lease(w, reason="owner back")
    ),
    "GET /api/v1/jobs/": lambda w, p, o: Call("get", "/api/v1/jobs/"),
    "POST /api/v1/jobs/": lambda w, p, o: Call("post", "/api/v1/jobs/", job_body()),
    "GET /api/v1/jobs/{job_id}": lambda w, p, o: Call("get", f"/api/v1/jobs/{w.job.pk}"),
    "POST /api/v1/jobs/{job_id}/cancel": lambda w, p, o: Call(
        "post", f"/api/v1/jobs/{w.job.pk}/cancel"
    ),
    "GET /api/v1/jobs/{job_id}/logs": lambda w, p, o: Call("get", f"/api/v1/jobs/{w.job.pk}/logs"),
    "GET /api/v1/jobs/{job_id}/timeline": lambda w, p, o: Call(
        "get", f"/api/v1/jobs/{w.job.pk}/timeline"
    ),
    "GET /api/v1/artifacts/{artifact_id}/download": lambda w, p, o: Call(
        "get", f"/api/v1/artifacts/{w.artifact_id}/download"
    ),
    "GET /api/v1/jobs/{job_id}/webhook": lambda w, p, o: Call(
        "get", f"/api/v1/jobs/{w.extra['webhook_job']}/webhook"
    ),
    "POST /api/v1/jobs/{job_id}/webhook/redeliver": lambda w, p, o: Call(
        "post", f"/api/v1/jobs/{w.extra['webhook_job']}/webhook/redeliver"
    ),
    "GET /api/v1/webhooks/secret": lambda w, p, o: Call("get", "/api/v1/webhooks/secret"),
    "POST /api/v1/webhooks/secret/rotate": lambda w, p, o: Call(
        "post", "/api/v1/webhooks/secret/rotate"
    ),
    "POST /api/v1/credits/grants": lambda w, p, o: Call(
        "post",
        "/api/v1/credits/grants",
        {"user_id": w.users["alice"].pk, "amount_minor": 100, "idempotency_key": f"matrix-{p}"},
    ),
    "POST /api/v1/credits/webhook": _webhook,
    "GET /api/v1/credits/me": lambda w, p, o: Call("get", "/api/v1/credits/me"),
    "GET /api/v1/quote": lambda w, p, o: Call(
        "get", "/api/v1/quote?tier=rtx-4090&region=IN&ceiling_per_s_minor=500&timeout_s=60"
    ),
    "GET /api/v1/statements/me": lambda w, p, o: Call("get", f"/api/v1/statements/me?{_period()}"),
    "GET /api/v1/cashouts/": lambda w, p, o: Call("get", "/api/v1/cashouts/"),
    "POST /api/v1/cashouts/": lambda w, p, o: Call(
        "post", "/api/v1/cashouts/", {"amount_minor": min_cashout_minor(), "payout_details": UPI}
    ),
    "GET /api/v1/cashouts/{cashout_id}": lambda w, p, o: Call(
        "get", f"/api/v1/cashouts/{w.cashout_requested.pk}"
    ),
    "POST /api/v1/cashouts/{cashout_id}/approve": lambda w, p, o: Call(
        "post", f"/api/v1/cashouts/{w.cashout_requested.pk}/approve"
    ),
    "POST /api/v1/cashouts/{cashout_id}/reject": lambda w, p, o: Call(
        "post", f"/api/v1/cashouts/{w.cashout_requested.pk}/reject", {"reason": "not this one"}
    ),
    "POST /api/v1/cashouts/{cashout_id}/paid": lambda w, p, o: Call(
        "post", f"/api/v1/cashouts/{w.cashout_approved.pk}/paid", {"payout_reference": "UTR-1"}
    ),
    "GET /api/v1/exports/": lambda w, p, o: Call("get", "/api/v1/exports/"),
    "POST /api/v1/exports/": lambda w, p, o: Call(
        "post",
        "/api/v1/exports/",
        {
            "from": _iso(timezone.now() - timedelta(days=1)),
            "to": _iso(timezone.now() + timedelta(days=1)),
        },
    ),
    "GET /api/v1/exports/{export_id}": lambda w, p, o: Call(
        "get", f"/api/v1/exports/{w.export.pk}"
    ),
    "GET /api/v1/exports/{export_id}/download": lambda w, p, o: Call(
        "get", f"/api/v1/exports/{w.export.pk}/download"
    ),
    "GET /api/v1/schema": lambda w, p, o: Call("get", "/api/v1/schema"),
    "GET /api/v1/docs": lambda w, p, o: Call("get", "/api/v1/docs"),
    "GET /healthz": lambda w, p, o: Call("get", "/healthz"),
    "GET /metrics": lambda w, p, o: Call("get", "/metrics"),
    "GET /": lambda w, p, o: page("get", "/"),
    "GET /signup/": lambda w, p, o: page("get", "/signup/"),
    "POST /signup/": lambda w, p, o: page("post", "/signup/", _signup(p)),
    "GET /login/": lambda w, p, o: page("get", "/login/"),
    "POST /login/": lambda w, p, o: page(
        "post", "/login/", {"username": "alice", "password": PASSWORD}
    ),
    "POST /logout/": lambda w, p, o: page("post", "/logout/"),
    "GET /password-reset/": lambda w, p, o: page("get", "/password-reset/"),
    "POST /password-reset/": lambda w, p, o: page(
        "post", "/password-reset/", {"email": w.users["alice"].email}
    ),
    "GET /password-reset/sent/": lambda w, p, o: page("get", "/password-reset/sent/"),
    "GET /reset/{uidb64}/{token}/": lambda w, p, o: page("get", _reset_link(w)),
    "POST /reset/{uidb64}/{token}/": lambda w, p, o: page(
        "post", _reset_link(w), {"new_password1": "x", "new_password2": "x"}
    ),
    "GET /reset/done/": lambda w, p, o: page("get", "/reset/done/"),
    "GET /network/": lambda w, p, o: page("get", "/network/"),
    "GET /account/": lambda w, p, o: page("get", "/account/"),
    "POST /account/public-name/": lambda w, p, o: page(
        "post", "/account/public-name/", {"show_name": "on", "public_name": "Matrix Rigs"}
    ),
    "GET /account/keys/": lambda w, p, o: page("get", "/account/keys/"),
    "POST /account/keys/": lambda w, p, o: page(
        "post", "/account/keys/", {"name": "matrix", "role": ROLE_OF.get(p, "submitter")}
    ),
    "POST /account/keys/{key_id}/revoke/": lambda w, p, o: page(
        "post", f"/account/keys/{w.spare_key.pk}/revoke/"
    ),
    "GET /nodes/": lambda w, p, o: page("get", "/nodes/"),
    "GET /nodes/add/": lambda w, p, o: page("get", "/nodes/add/"),
    "POST /nodes/add/": lambda w, p, o: page("post", "/nodes/add/", {"name": "matrix"}),
    "GET /nodes/{node_id}/": lambda w, p, o: page("get", f"/nodes/{w.node.pk}/"),
    "POST /nodes/{node_id}/price-floor/": lambda w, p, o: page(
        "post", f"/nodes/{w.node.pk}/price-floor/", {"price_floor": "1.50"}
    ),
    "POST /nodes/{node_id}/pause/": lambda w, p, o: page("post", f"/nodes/{w.node.pk}/pause/"),
    "POST /nodes/{node_id}/resume/": lambda w, p, o: page("post", f"/nodes/{w.node.pk}/resume/"),
    "POST /nodes/{node_id}/retire/": lambda w, p, o: page("post", f"/nodes/{w.node.pk}/retire/"),
    "GET /earnings/": lambda w, p, o: page("get", "/earnings/"),
    "GET /earnings/cashout/": lambda w, p, o: page("get", "/earnings/cashout/"),
    "POST /earnings/cashout/": lambda w, p, o: page(
        "post",
        "/earnings/cashout/",
        {"amount": f"{min_cashout_minor() / 100:.2f}", "method": "upi", "vpa": UPI["vpa"]},
    ),
    "GET /finance/cashouts/": lambda w, p, o: page("get", "/finance/cashouts/"),
    "POST /finance/cashouts/{cashout_id}/approve/": lambda w, p, o: page(
        "post", f"/finance/cashouts/{w.cashout_requested.pk}/approve/"
    ),
    "POST /finance/cashouts/{cashout_id}/reject/": lambda w, p, o: page(
        "post", f"/finance/cashouts/{w.cashout_requested.pk}/reject/", {"reason": "not this one"}
    ),
    "POST /finance/cashouts/{cashout_id}/paid/": lambda w, p, o: page(
        "post", f"/finance/cashouts/{w.cashout_approved.pk}/paid/", {"payout_reference": "UTR-2"}
    ),
    "GET /finance/exports/": lambda w, p, o: page("get", "/finance/exports/"),
    "POST /finance/exports/": lambda w, p, o: page(
        "post", "/finance/exports/", {"start": _day(-1), "end": _day(1)}
    ),
    "GET /finance/exports/{export_id}/": lambda w, p, o: page(
        "get", f"/finance/exports/{w.export.pk}/"
    ),
    "GET /finance/exports/{export_id}/download/": lambda w, p, o: page(
        "get", f"/finance/exports/{w.export.pk}/download/"
    ),
    "GET /finance/exports/{export_id}/head/": lambda w, p, o: page(
        "get", f"/finance/exports/{w.export.pk}/head/"
    ),
    "GET /finance/statements/": lambda w, p, o: page(
        "get", f"/finance/statements/?username=bob&start={_day(-1)}&end={_day(1)}"
    ),
    "GET /jobs/": lambda w, p, o: page("get", "/jobs/"),
    "GET /jobs/new/": lambda w, p, o: page("get", "/jobs/new/"),
    "POST /jobs/new/": lambda w, p, o: page("post", "/jobs/new/", _job_form()),
    "GET /jobs/new/quote/": lambda w, p, o: page(
        "get", "/jobs/new/quote/?price_ceiling=5.00&timeout_s=60&slices=1"
    ),
    "GET /jobs/{job_id}/": lambda w, p, o: page("get", f"/jobs/{w.job.pk}/"),
    "GET /jobs/{job_id}/live/": lambda w, p, o: page("get", f"/jobs/{w.job.pk}/live/"),
    "POST /jobs/{job_id}/cancel/": lambda w, p, o: page("post", f"/jobs/{w.job.pk}/cancel/"),
    "GET /jobs/{job_id}/outputs.zip": lambda w, p, o: page("get", f"/jobs/{w.job.pk}/outputs.zip"),
    "GET /credits/": lambda w, p, o: page("get", "/credits/"),
}

OWNED_OBJECT = {
    "GET /api/v1/keys/": lambda w: w.spare_key.pk,
    "GET /api/v1/nodes/": lambda w: w.node.pk,
    "GET /api/v1/jobs/": lambda w: w.job.pk,
    "GET /api/v1/cashouts/": lambda w: w.cashout_requested.pk,
}
# Pages: text that shows the owner's object on the page.
OWNED_TEXT = {
    "GET /account/keys/": lambda w: w.spare_key.prefix,
    "GET /nodes/": lambda w: f'id="node-{w.node.pk}"',
    "GET /earnings/": lambda w: f'id="cashout-{w.cashout_requested.pk}"',
    "GET /finance/cashouts/": lambda w: f'id="cashout-{w.cashout_requested.pk}"',
    "GET /jobs/": lambda w: f'data-job="{w.job.pk}"',
}


def send(w: World, principal: str, call: Call):
    client = w.pages[principal] if call.page else w.clients[principal]
    method = getattr(client, call.method)
    if call.page:
        # Logging in, out or up changes the browser's cookies; the next call must find the
        # principal's session as the world made it.
        cookies = copy.deepcopy(client.cookies)
        try:
            return method(call.path, call.data or {}, **call.headers)
        finally:
            client.cookies = cookies
    if call.format == "raw":
        return method(call.path, call.data, content_type="application/json", **call.headers)
    if call.data is None:
        return method(call.path, **call.headers)
    if call.method == "get":
        return method(call.path, call.data, **call.headers)
    return method(call.path, call.data, format=call.format, **call.headers)


def test_every_served_endpoint_has_a_row_and_a_request():
    served = matrix.resolver_endpoints()
    assert served - set(matrix.MATRIX) == set(), "endpoints without a row in tests/proof/matrix.py"
    assert set(matrix.MATRIX) - served == set(), "rows for endpoints that are no longer served"
    assert set(REQUESTS) == set(matrix.MATRIX)


def test_every_endpoint_in_the_openapi_schema_has_a_row(client):
    paths = client.get("/api/v1/schema?format=json").json()["paths"]
    documented = {
        f"{method.upper()} {path.rstrip('/') if '{' in path.split('/')[-2] else path}"
        for path, ops in paths.items()
        for method in ops
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert documented <= set(matrix.MATRIX), documented - set(matrix.MATRIX)


def test_the_security_doc_carries_the_same_table():
    text = DOC.read_text()
    block = re.search(
        r"<!-- access-matrix:start -->\n(.*?)\n<!-- access-matrix:end -->", text, re.DOTALL
    )
    assert block, "docs/security.md lost its access-matrix markers"
    assert block.group(1).strip() == matrix.render_markdown(), (
        "docs/security.md's table differs from tests/proof/matrix.py: regenerate it with "
        "`.venv/bin/python -m tests.proof.matrix`"
    )


@pytest.mark.parametrize("endpoint", list(matrix.MATRIX))
def test_only_the_intended_actors_get_through(endpoint, world):
    owner_kind, _ = matrix.MATRIX[endpoint]
    wrong: list[str] = []
    for actor, want in matrix.expected(endpoint).items():
        principal = OWNER_PLAYS[owner_kind] if actor == "owner" else PLAYS[actor]
        call = REQUESTS[endpoint](world, principal, actor == "owner")
        with transaction.atomic():
            response = send(world, principal, call)
            transaction.set_rollback(True)
        got = response.status_code
        assert got < 500, f"{endpoint} as {actor}: {got} {response.content[:300]!r}"
        if call.page:
            # A page answers a caller it does not know by sending them to log in; a form it
            # accepts, by a redirect elsewhere.
            to_login = got == 302 and response["Location"].startswith(LOGIN)
            got = "login" if to_login else ("ok" if got in (200, 302) else got)
            if str(got) != want:
                wrong.append(f"{actor}: wanted {want}, got {got} {response.content[:200]!r}")
            elif endpoint in OWNED_TEXT and want == "ok":
                sees = OWNED_TEXT[endpoint](world) in response.content.decode()
                if sees != (actor in matrix.LIST_SEES_OWNERS_OBJECT[endpoint]):
                    wrong.append(f"{actor}: sees the owner's object: {sees}")
            continue
        if want == "ok":
            if not 200 <= got < 300:
                wrong.append(f"{actor}: wanted 2xx, got {got} {response.content[:200]!r}")
                continue
            if endpoint in OWNED_OBJECT:
                ids = [row["id"] for row in response.json()["results"]]
                sees = OWNED_OBJECT[endpoint](world) in ids
                if sees != (actor in matrix.LIST_SEES_OWNERS_OBJECT[endpoint]):
                    wrong.append(f"{actor}: sees the owner's object: {sees}")
        elif got != int(want):
            wrong.append(f"{actor}: wanted {want}, got {got} {response.content[:200]!r}")
    assert not wrong, f"{endpoint}:\n  " + "\n  ".join(wrong)


def test_an_agent_acts_only_as_its_own_node(world):
    for principal, node in (("bob_agent", world.node), ("mallory_agent", world.other_node)):
        assert world.clients[principal].get("/api/v1/agent/me").json()["id"] == node.pk


def test_a_foreign_object_is_answered_like_a_missing_one(world):
    """404 for another's object and for no object at all, with the same body: ids leak nothing."""
    pairs = [
        ("mallory_submitter", f"/api/v1/jobs/{world.job.pk}", "/api/v1/jobs/999999999"),
        (
            "mallory_submitter",
            f"/api/v1/artifacts/{world.artifact_id}/download",
            "/api/v1/artifacts/999999999/download",
        ),
        ("mallory_operator", f"/api/v1/nodes/{world.node.pk}", "/api/v1/nodes/999999999"),
        (
            "mallory_operator",
            f"/api/v1/cashouts/{world.cashout_requested.pk}",
            "/api/v1/cashouts/999999999",
        ),
    ]
    for principal, foreign, missing in pairs:
        client = world.clients[principal]
        a, b = client.get(foreign), client.get(missing)
        assert (a.status_code, a.json()) == (b.status_code, b.json()) == (404, a.json())
    agent = world.clients["mallory_agent"]
    progress = {"lease_token": world.lease_token, "progress": 5}
    a = agent.post(f"/api/v1/agent/attempts/{world.attempt_id}/progress", progress, format="json")
    b = agent.post("/api/v1/agent/attempts/999999999/progress", progress, format="json")
    assert a.status_code == b.status_code == 409
    assert a.json()["error"] == b.json()["error"] == "stale_lease"


def test_dead_credentials_are_refused(world):
    from django.contrib.auth import get_user_model

    from nodes.models import Node
    from nodes.services import node_retire
    from people.services import api_key_revoke

    for key in world.users["alice"].api_keys.all():
        api_key_revoke(key=key, actor="test")
    assert world.clients["alice"].get("/api/v1/me").status_code == 401
    node_retire(node=Node.objects.get(pk=world.node.pk), actor="test")
    assert world.clients["bob_agent"].get("/api/v1/agent/me").status_code == 401
    get_user_model().objects.filter(pk=world.users["mallory"].pk).update(is_active=False)
    assert world.clients["mallory_submitter"].get("/api/v1/me").status_code == 401
    assert world.clients["mallory_agent"].get("/api/v1/agent/me").status_code == 401
    anonymous = world.clients["anonymous"]
    for header in (
        "Bearer",
        "Bearer a b",
        "Bearer cpk_forged",
        "Bearer cpa_forged",
        "Bearer \u00e9",
    ):
        assert anonymous.get("/api/v1/me", HTTP_AUTHORIZATION=header).status_code == 401, header
    assert anonymous.get("/api/v1/me", HTTP_AUTHORIZATION="Basic eDp5").status_code == 401


def test_the_public_endpoints_show_no_identities(world):
    secrets = [u.username for u in world.users.values()]
    secrets += [world.node.name, world.node.agent_key_prefix, world.spare_key.prefix]
    for path in ("/metrics", "/healthz", "/network/"):
        body = world.clients["anonymous"].get(path).content.decode()
        assert not [s for s in secrets if s in body], path


def test_the_admin_site_takes_no_api_key(world):
    for principal in ("dave", "carol", "bob_agent", "anonymous"):
        response = world.clients[principal].get("/admin/")
        assert response.status_code == 302, principal
        assert response["Location"].startswith("/admin/login/")
