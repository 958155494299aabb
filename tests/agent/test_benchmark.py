"""The hardware benchmark as the agent runs it: real measurements on this machine's CPU, the
proofs the hub checks them by, the GPU path's real reports from an H200, and the sandbox."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.benchmark import SUITE, BadSpec, parse, proofs, ptx
from agent.benchmark.cuda import Driver, NoDriver
from agent.benchmarking import BenchmarkService

FIXTURES = Path(__file__).parent / "fixtures" / "benchmark"
SEED = "0123456789abcdef0123456789abcdef"
SMALL = {
    "suite": SUITE,
    "seed": SEED,
    "cpu": {"matmul_n": 128, "min_seconds": 0.1, "stream_mb": 8},
    "gpu": {"iterations": 64},
}


def run_cli(spec: dict, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent.benchmark", "-", *argv],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_it_measures_this_machine_and_every_proof_checks():
    done = run_cli(SMALL)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seed"] == SEED and report["cpu"]["gflops"] > 0
    assert report["memory"]["gb_per_s"] > 0 and report["memory"]["threads"] >= 1
    assert proofs.report_problems(report, SMALL) == []
    # No NVIDIA driver on the test machines: said, not guessed.
    assert report["gpus"] == [] and "libcuda" in report["gpu_error"]


def test_a_report_checks_only_against_its_own_seed():
    report = json.loads(run_cli(SMALL).stdout)
    other = SMALL | {"seed": "f" * 32}
    assert "the report is for another seed" in proofs.report_problems(report, other)
    report["seed"] = other["seed"]  # a replay that rewrites the seed still fails the probes
    problems = proofs.report_problems(report, other)
    assert "cpu: the matrix product's probes are wrong" in problems
    assert "memory: the copied array's probe is wrong" in problems


def test_the_h200_reports_check_against_their_seeds_and_no_other():
    """Real runs on an NVIDIA H200 (tests/agent/fixtures/benchmark/SOURCES.md)."""
    runs = json.loads((FIXTURES / "h200-driver580-runs.json").read_text())
    assert len(runs) == 5
    for run in runs:
        report, spec = run["report"], run["spec"]
        assert proofs.report_problems(report, spec) == []
        (gpu,) = report["gpus"]
        assert gpu["name"] == "NVIDIA H200" and gpu["compute_capability"] == "9.0"
        # The stated rate is the work over the time: what the hub recomputes.
        work = proofs.flops_fp32(gpu["fp32"]["threads"], spec["gpu"]["iterations"])
        assert gpu["fp32"]["tflops"] == pytest.approx(work / gpu["fp32"]["ms"] / 1e9, rel=0.01)
        replayed = dict(spec, seed=runs[0]["spec"]["seed"] if run is not runs[0] else "0" * 32)
        assert proofs.report_problems(dict(report, seed=replayed["seed"]), replayed)
    figures = [run["report"]["gpus"][0]["fp32"]["tflops"] for run in runs]
    assert max(figures) / min(figures) < 1.01


def test_a_forged_gpu_proof_is_named():
    runs = json.loads((FIXTURES / "h200-driver580-runs.json").read_text())
    report, spec = runs[0]["report"], runs[0]["spec"]
    report["gpus"][0]["fp32"]["proof"] += 8
    report["gpus"][0]["vram_allocatable"]["verified_blocks"] -= 1
    assert proofs.report_problems(report, spec) == [
        "gpu 0: the float32 kernel's sum is wrong",
        "gpu 0: memory it allocated did not hold the seed's pattern",
    ]


@pytest.mark.parametrize(("lanes", "threads"), [(1024, 0), (1024, 1), (1024, 1500), (64, 270336)])
def test_the_kernels_starting_sum_is_computed_in_closed_form(lanes, threads):
    xor = 37 % lanes
    assert proofs._start_sum(threads, xor, lanes) == sum(
        (idx ^ xor) % lanes for idx in range(threads)
    )


def test_the_float32_chains_stay_exact_at_the_largest_iteration_count():
    limit = proofs.fp32_iterations_limit()
    # The largest value a thread stores: eight chains, each its start plus length × b (≤ 3).
    assert ptx.CHAINS * (proofs.FP32_LANES - 1 + limit * ptx.ROUNDS * 3) < 2**24


def test_each_kernel_loop_runs_the_fma_count_the_flops_are_counted_by():
    for text, instruction in ((ptx.fp32_ptx(), "fma.rn.f32"), (ptx.fp16_ptx(), "fma.rn.f16x2")):
        loop = text.split("LOOP:")[1].split("@%p bra LOOP")[0]
        assert loop.count(instruction) == ptx.FMA_PER_ITERATION


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"suite": "other/1"}, "unknown benchmark suite"),
        ({"seed": "xyz"}, "seed must be 32 hex digits"),
        ({"seed": "g" * 32}, "seed must be 32 hex digits"),
        ({"cpu": {"matmul_n": 10**6, "min_seconds": 1, "stream_mb": 8}}, "matmul_n"),
        ({"gpu": {"iterations": 10**9}}, "iterations"),
        ({"gpu": {"iterations": True}}, "iterations"),
    ],
)
def test_it_refuses_a_spec_it_cannot_run(change, message):
    with pytest.raises(BadSpec, match=message):
        parse(SMALL | change)
    done = run_cli(SMALL | change)
    assert done.returncode == 2 and message in done.stderr


def test_no_driver_library_is_said_as_such():
    with pytest.raises(NoDriver, match="no NVIDIA driver library"):
        Driver("libcuda-not-here.so.1")


def test_the_agent_runs_it_in_its_sandbox(bwrap):
    service = BenchmarkService(client=None, hub_public_key="", gpu=False)  # type: ignore[arg-type]
    report = service.measure(SMALL)
    assert proofs.report_problems(report, SMALL) == [], report


def test_a_benchmark_that_cannot_run_reports_why(bwrap):
    service = BenchmarkService(client=None, hub_public_key="", gpu=False)  # type: ignore[arg-type]
    assert "unknown benchmark suite" in service.measure(SMALL | {"suite": "x"})["error"]
