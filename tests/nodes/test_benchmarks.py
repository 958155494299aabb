"""Hardware benchmarks on the hub: issued with a fresh seed, taken and reported by the node's
agent, checked, and what the node is paid and routed as follows from the figures."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agent.spec import verify_spec
from ledger.models import Event
from ledger.verify import verify_ledger
from nodes.models import BenchmarkState, NodeBenchmark
from nodes.services import benchmark_report, benchmark_take, benchmarks_pass, node_tier_confirm
from nodes.signing import hub_public_key_b64
from tests.conftest import client_with_key
from tests.nodes.conftest import (
    beat,
    capabilities,
    gpu,
    honest_report,
    node_events,
    register_node,
)

pytestmark = pytest.mark.django_db
RTX_4090 = {"name": "NVIDIA GeForce RTX 4090", "fp32_tflops": 82.0, "vram_mb": 24000}


def take(key: str) -> dict:
    response = client_with_key(key).get("/api/v1/agent/benchmark")
    assert response.status_code == 200, response.content
    return response.json()


def report(key: str, benchmark_id: int, body: dict):
    return client_with_key(key).post(
        f"/api/v1/agent/benchmark/{benchmark_id}", {"report": body}, format="json"
    )


def benchmark_events(benchmark_id: int) -> list[tuple[str, dict]]:
    stream = Event.objects.filter(stream=f"benchmark:{benchmark_id}").order_by("version")
    return [(e.type, e.payload) for e in stream]


def test_a_new_node_is_issued_a_signed_benchmark_with_a_fresh_seed(bob):
    node, key = register_node(bob, benchmarked=False)
    other, _ = register_node(bob, name="rig-2", benchmarked=False)
    assert beat(client_with_key(key)).json()["benchmark"] is True
    due = take(key)
    verify_spec(due["spec"], due["signature"], hub_public_key_b64())
    assert due["spec"]["node_id"] == node.pk and len(due["spec"]["seed"]) == 32
    assert due["spec"]["seed"] != other.benchmarks.get().spec["seed"]
    assert [t for t, _ in benchmark_events(due["id"])] == ["BenchmarkIssued"]
    # Until it passes, the node is cpu whatever its GPU is called.
    node.refresh_from_db()
    assert (node.claimed_tier, node.tier, node.gpu_count, node.gpu_vram_mb) == (
        "rtx-4090",
        "cpu",
        0,
        0,
    )


def test_an_honest_report_pays_the_node_as_what_was_measured(bob):
    node, key = register_node(bob, benchmarked=False)
    due = take(key)
    response = report(key, due["id"], honest_report(due["spec"], [RTX_4090]))
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "passed" and response.json()["tier"] == "rtx-4090"
    node.refresh_from_db()
    assert (node.tier, node.gpu_count, node.gpu_vram_mb, node.benchmark_due_id) == (
        "rtx-4090",
        1,
        24564,
        None,
    )
    assert node.measured["gpus"][0]["fp32_tflops"] == 82.0
    assert beat(client_with_key(key)).json()["benchmark"] is False
    assert [t for t, _ in benchmark_events(due["id"])] == ["BenchmarkIssued", "BenchmarkEnded"]
    assert "NodeTierMeasured" in [t for t, _ in node_events(node)]
    assert verify_ledger(check_chain=False).ok


def test_a_cpu_machine_that_names_an_rtx_4090_is_paid_as_cpu_and_the_claim_recorded(bob):
    node, key = register_node(bob, benchmarked=False)
    due = take(key)
    response = report(key, due["id"], honest_report(due["spec"], []))
    assert response.json()["state"] == "passed" and response.json()["tier"] == "cpu"
    node.refresh_from_db()
    assert (node.claimed_tier, node.tier, node.gpu_count) == ("rtx-4090", "cpu", 0)
    (mismatch,) = [p for t, p in node_events(node) if t == "NodeTierMismatch"]
    assert mismatch | {"benchmark_id": 0} == {
        "benchmark_id": 0,
        "claimed_tier": "rtx-4090",
        "claimed_gpu": "NVIDIA GeForce RTX 4090",
        "measured_tier": "cpu",
        "measured_fp32_tflops": None,
    }
    assert node.reliability < 0.5


def test_a_gpu_far_slower_than_its_name_is_recorded_and_priced_by_its_figures(bob):
    node, key = register_node(bob, benchmarked=False)
    due = take(key)
    slow = {"name": "NVIDIA GeForce RTX 4090", "fp32_tflops": 12.0, "vram_mb": 24000}
    assert report(key, due["id"], honest_report(due["spec"], [slow])).status_code == 200
    node.refresh_from_db()
    # 12 TFLOPS with 24 GB meets the RTX 3060's range (the best it meets), not the 4090's.
    assert node.tier == "rtx-3060"
    assert [t for t, _ in node_events(node)][-2:] == ["NodeTierMeasured", "NodeTierMismatch"]


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        # Off by one from whatever the seed made it (a probe of 0 set to 0 would change nothing).
        (
            lambda r: r["cpu"]["probes"].__setitem__(0, r["cpu"]["probes"][0] + 1),
            "probes are wrong",
        ),
        (lambda r: r["gpus"][0]["fp32"].__setitem__("proof", 1), "float32 kernel's sum"),
        (lambda r: r["gpus"][0]["fp32"].__setitem__("tflops", 500.0), "its work and time make"),
        (lambda r: r.__setitem__("elapsed_s", 3600.0), "by the hub's"),
        (lambda r: r.__setitem__("seed", "0" * 32), "another seed"),
        (lambda r: r["cpu"].__setitem__("gflops", "fast"), "cpu.gflops"),
        (lambda r: r.__setitem__("gpus", "all of them"), "gpus must be a list"),
        (lambda r: r.__setitem__("error", "numpy is not installed"), "could not run it"),
    ],
)
def test_a_report_that_does_not_check_fails_and_costs_reliability(bob, tamper, problem):
    node, key = register_node(bob, benchmarked=False)
    due = take(key)
    body = honest_report(due["spec"], [RTX_4090])
    tamper(body)
    response = report(key, due["id"], body)
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "failed"
    assert any(problem in line for line in response.json()["problems"]), response.json()
    node.refresh_from_db()
    assert (node.tier, node.measured, node.benchmark_due_id) == ("cpu", {}, None)
    assert node.reliability < 0.5
    assert benchmark_events(due["id"])[-1][1]["state"] == "failed"


def test_only_the_node_it_was_issued_to_reports_it_and_only_once(bob, mallory):
    node, key = register_node(bob, benchmarked=False)
    _, other_key = register_node(mallory, name="m-1", benchmarked=False)
    benchmark = node.benchmarks.get()
    body = honest_report(benchmark.spec, [RTX_4090])
    # Not taken yet: the hub's clock has not started.
    assert report(key, benchmark.pk, body).status_code == 409
    take(key)
    assert report(other_key, benchmark.pk, body).status_code == 409
    assert report(key, benchmark.pk, body).json()["state"] == "passed"
    assert report(key, benchmark.pk, body).status_code == 409
    assert client_with_key(key).get("/api/v1/agent/benchmark").status_code == 204


@pytest.mark.parametrize("body", [{}, {"report": "x"}, {"report": [1]}])
def test_a_body_that_is_not_a_report_is_a_400(bob, body):
    _node, key = register_node(bob, benchmarked=False)
    due = take(key)
    response = client_with_key(key).post(
        f"/api/v1/agent/benchmark/{due['id']}", body, format="json"
    )
    assert response.status_code == 400
    assert NodeBenchmark.objects.get(pk=due["id"]).state == BenchmarkState.ISSUED


def test_the_beat_expires_an_unreported_benchmark_and_issues_due_ones(bob):
    node, key = register_node(bob)  # measured as an RTX 4090
    beat(client_with_key(key))  # online
    later = timezone.now() + timedelta(hours=200)
    assert benchmarks_pass(now=later) == {"expired": 0, "issued": 1}
    node.refresh_from_db()
    periodic = node.benchmarks.get(pk=node.benchmark_due_id)
    assert periodic.reason == "periodic"
    # Not taken, not reported: past its deadline it ends, and the measurement with it.
    assert benchmarks_pass(now=later + timedelta(minutes=40)) == {"expired": 1, "issued": 0}
    node.refresh_from_db()
    assert (node.tier, node.measured) == ("cpu", {})
    assert benchmark_events(periodic.pk)[-1][1]["state"] == "expired"
    # A node measured as nothing is offered a new one after the retry interval.
    assert benchmarks_pass(now=later + timedelta(hours=3))["issued"] == 1
    assert verify_ledger(check_chain=False).ok


def test_a_newer_benchmark_supersedes_the_one_waiting(bob):
    node, key = register_node(bob, benchmarked=False)
    first = node.benchmarks.get()
    caps_5090 = [gpu("NVIDIA GeForce RTX 5090", 32607, "12.0")]
    beat(client_with_key(key), capabilities=capabilities(gpus=caps_5090))
    first.refresh_from_db()
    assert first.state == BenchmarkState.SUPERSEDED
    assert benchmark_events(first.pk)[-1][1]["state"] == "superseded"
    assert take(key)["id"] != first.pk


def test_an_admin_confirms_the_tier_of_a_gpu_the_benchmark_cannot_measure(bob, dave):
    amd = gpu("AMD Radeon RX 7900 XTX", 24560, None, "6.3.1", vendor="amd")
    node, _ = register_node(bob, gpus=[amd])
    # Measured without a GPU (it is not NVIDIA), and no claim is held against it.
    assert (node.tier, node.gpu_count) == ("cpu", 0)
    assert "NodeTierMismatch" not in [t for t, _ in node_events(node)]
    node_tier_confirm(node=node, tier="generic-24gb", actor=f"user:{dave.pk}", reason="seen it")
    node.refresh_from_db()
    assert (node.tier, node.confirmed_tier, node.gpu_count) == ("generic-24gb", "generic-24gb", 1)
    assert node_events(node)[-1] == (
        "NodeTierConfirmed",
        {"tier": "generic-24gb", "previous_tier": "cpu", "reason": "seen it"},
    )
    with pytest.raises(ValueError, match="no tier"):
        node_tier_confirm(node=node, tier="rtx-9999", actor="x", reason="")
    assert verify_ledger(check_chain=False).ok


def test_nodes_and_quotes_show_measured_figures_and_cost_per_tflop_hour(api, bob):
    node, key = register_node(bob)
    beat(client_with_key(key))  # online
    body = api(bob, "operator").get(f"/api/v1/nodes/{node.pk}").json()
    assert body["measured_tflops"] == pytest.approx(82.58)
    price = body["price_per_s_minor"]
    assert body["cost_per_tflop_hour_minor"] == round(price * 3600 / 82.58)
    quote = api(bob, "operator").get(
        "/api/v1/quote", {"for": "node", "tier": "rtx-4090", "region": "IN"}
    )
    assert quote.status_code == 200, quote.content
    assert quote.json()["measured_tflops"] == pytest.approx(82.58)
    assert quote.json()["cost_per_tflop_hour_minor"] == round(
        quote.json()["price_per_s_minor"] * 3600 / 82.58
    )
    # A market nobody measured has no figure to divide by.
    empty = api(bob, "operator").get(
        "/api/v1/quote", {"for": "node", "tier": "rtx-3090", "region": "IN"}
    )
    assert (empty.json()["measured_tflops"], empty.json()["cost_per_tflop_hour_minor"]) == (
        None,
        None,
    )


def test_taking_a_benchmark_twice_keeps_the_hubs_first_clock(bob):
    node, _key = register_node(bob, benchmarked=False)
    first = benchmark_take(node=node)
    again = benchmark_take(node=node, now=timezone.now() + timedelta(seconds=30))
    assert again.taken_at == first.taken_at
    body = honest_report(first.spec, [RTX_4090])
    result = benchmark_report(node=node, benchmark_id=first.pk, report=body)
    assert result.state == BenchmarkState.PASSED


def test_the_admin_confirms_a_claimed_tier_and_benchmarks_on_request(client, dave, bob):
    from django.urls import reverse

    amd = gpu("AMD Radeon RX 7900 XTX", 24560, None, "6.3.1", vendor="amd")
    node, _ = register_node(bob, gpus=[amd])
    client.force_login(dave)
    changelist = reverse("admin:nodes_node_changelist")
    for action in ("confirm_claimed_tier", "benchmark_now"):
        response = client.post(changelist, {"action": action, "_selected_action": [node.pk]})
        assert response.status_code == 302
    node.refresh_from_db()
    assert (node.tier, node.gpu_count) == ("generic-24gb", 1)
    confirmed = Event.objects.get(stream=node.stream, type="NodeTierConfirmed")
    assert confirmed.actor == f"user:{dave.pk}"
    assert node.benchmarks.get(pk=node.benchmark_due_id).reason == "admin"
    page = client.get(reverse("admin:nodes_nodebenchmark_changelist"))
    assert page.status_code == 200 and b"admin" in page.content
