"""The hub's hardware benchmarks, as the agent runs them: take the one due, check the hub's
signature on it, run `python -m agent.benchmark` under the sandbox rules of the agent's own
processes (agent.sandbox.own_code), and report what it printed."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any

from agent.client import HubClient
from agent.sandbox.own_code import sandboxed
from agent.spec import verify_spec

log = logging.getLogger(__name__)

TIMEOUT_S = 600
# The CPU benchmark's arrays (a few hundred MB) and BLAS's buffers, with room to spare. Not on
# a GPU machine: the driver reserves address space far beyond the memory it uses.
MEMORY_MB = 8192


class BenchmarkService:
    def __init__(self, *, client: HubClient, hub_public_key: str, gpu: bool) -> None:
        self._client = client
        self._hub_key = hub_public_key
        self._gpu = gpu

    def run_due(self) -> dict[str, Any] | None:
        """Run the benchmark the hub has waiting, if any; the hub's verdict, or None."""
        due = self._client.benchmark_take()
        if due is None:
            return None
        spec = due["spec"]
        verify_spec(spec, due["signature"], self._hub_key)
        log.info("running hardware benchmark %s (the hub's seed %s)", due["id"], spec["seed"])
        report = self.measure(spec)
        verdict = self._client.benchmark_report(int(due["id"]), report)
        if verdict.get("state") == "passed":
            log.info("benchmark %s passed: paid and routed as %s", due["id"], verdict.get("tier"))
        else:
            log.warning(
                "benchmark %s %s: %s",
                due["id"],
                verdict.get("state"),
                "; ".join(verdict.get("problems") or []),
            )
        return verdict

    def measure(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The report, or {"error": why} when the benchmark did not run to the end."""
        argv, env = sandboxed(
            [sys.executable, "-m", "agent.benchmark", "-"],
            memory_mb=None if self._gpu else MEMORY_MB,
            gpu=self._gpu,
        )
        try:
            done = subprocess.run(
                argv,
                input=json.dumps(spec),
                capture_output=True,
                text=True,
                env=env,
                timeout=TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"error": f"the benchmark did not run: {exc}"}
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
            return {"error": lines[-1][:500]}
        try:
            return json.loads(done.stdout)
        except ValueError:
            return {"error": "the benchmark printed no report"}
