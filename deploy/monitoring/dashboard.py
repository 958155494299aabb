"""The ComputePool Grafana dashboard, written as data: `python deploy/monitoring/dashboard.py`
writes grafana/dashboards/computepool.json beside it (tests/test_monitoring.py checks that the
file is what this writes, and that it asks only for metrics docs/metrics.md lists).

Counters are summed over every scraped process (each counts what it did); the gauges read from
the database are taken from the hub's scrape only (`job="hub"`): the relay's says the same.
"""

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "grafana" / "dashboards" / "computepool.json"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
HUB = 'job="hub"'


def quantiles(metric: str, by: str = "") -> list[tuple[str, str]]:
    group = f"le, {by}" if by else "le"
    legend = f"{{{{{by}}}}} " if by else ""
    return [
        (
            f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket[5m])))",
            f"{legend}p{int(q * 100)}",
        )
        for q in (0.5, 0.95, 0.99)
    ]


# (row title, [(panel title, unit, [(expr, legend)])])
ROWS: list[tuple[str, list[tuple[str, str, list[tuple[str, str]]]]]] = [
    (
        "Queue",
        [
            (
                "Live tasks by state",
                "short",
                [(f"sum by (state) (computepool_tasks{{{HUB}}})", "{{state}}")],
            ),
            (
                "Queued tasks by size class",
                "short",
                [
                    (
                        f'sum by (size_class) (computepool_tasks{{{HUB}, state="queued"}})',
                        "{{size_class}}",
                    )
                ],
            ),
            (
                "Claims per second",
                "reqps",
                [("sum by (result) (rate(computepool_claims_total[5m]))", "{{result}}")],
            ),
            ("Claim latency", "s", quantiles("computepool_claim_seconds")),
            (
                "Dispatch latency (claimable → leased)",
                "s",
                quantiles("computepool_dispatch_seconds"),
            ),
        ],
    ),
    (
        "Outcomes",
        [
            (
                "Attempts ended per second",
                "ops",
                [
                    (
                        "sum by (outcome, failure_class) (rate(computepool_attempts_total[5m]))",
                        "{{outcome}} {{failure_class}}",
                    )
                ],
            ),
            (
                "Jobs finished per hour",
                "short",
                [
                    (
                        "sum by (state) (increase(computepool_jobs_finished_total[1h]))",
                        "{{state}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Money (credit minor units)",
        [
            (
                "Settled per hour: platform fee and operators' share",
                "short",
                [
                    (
                        "sum by (account_kind) (increase(computepool_ledger_credited_minor_total"
                        '{entry_kind="settlement", account_kind=~"revenue|earnings"}[1h]))',
                        "{{account_kind}}",
                    )
                ],
            ),
            (
                "Holds outstanding",
                "short",
                [
                    (f"computepool_holds_outstanding{{{HUB}}}", "jobs holding"),
                    (f"computepool_holds_outstanding_minor{{{HUB}}}", "held"),
                ],
            ),
            (
                "Cashouts waiting on finance",
                "short",
                [
                    (f"computepool_cashouts_open{{{HUB}}}", "{{status}} (count)"),
                    (f"computepool_cashouts_open_minor{{{HUB}}}", "{{status}} (minor units)"),
                ],
            ),
            (
                "Cashouts moved per day",
                "short",
                [("sum by (status) (increase(computepool_cashouts_total[1d]))", "{{status}}")],
            ),
            (
                "Ledger entries per second",
                "ops",
                [("sum by (kind) (rate(computepool_ledger_entries_total[5m]))", "{{kind}}")],
            ),
            (
                "Event log",
                "short",
                [(f"computepool_events{{{HUB}}}", "{{kind}}")],
            ),
        ],
    ),
    (
        "Fleet",
        [
            (
                "Nodes by state",
                "short",
                [(f"sum by (state) (computepool_nodes{{{HUB}}})", "{{state}}")],
            ),
            (
                "Online nodes by tier and region",
                "short",
                [
                    (
                        f'sum by (tier, region) (computepool_nodes{{{HUB}, state="online"}})',
                        "{{tier}} {{region}}",
                    )
                ],
            ),
            (
                "Heartbeat lag (max)",
                "s",
                [
                    (
                        f'computepool_node_heartbeat_lag_seconds{{{HUB}, stat="max"}}',
                        "{{state}}",
                    )
                ],
            ),
            (
                "GPUs reporting by tier",
                "short",
                [(f"computepool_gpus{{{HUB}}}", "{{tier}}")],
            ),
            (
                "GPU temperature by tier",
                "celsius",
                [(f"computepool_gpu_temperature_celsius{{{HUB}}}", "{{tier}} {{stat}}")],
            ),
            (
                "GPU utilisation by tier",
                "percent",
                [(f"computepool_gpu_utilization_percent{{{HUB}}}", "{{tier}} {{stat}}")],
            ),
            (
                "Quarantines per day",
                "short",
                [
                    (
                        "sum by (rule) (increase(computepool_nodes_quarantined_total[1d]))",
                        "{{rule}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Reapers",
        [
            (
                "Leases taken back per second",
                "ops",
                [
                    (
                        "sum by (reason) (rate(computepool_lease_reaper_batch_size_sum[5m]))",
                        "{{reason}}",
                    )
                ],
            ),
            ("Lease reaper run time", "s", quantiles("computepool_lease_reaper_seconds")),
            (
                "Nodes moved per second",
                "ops",
                [("sum by (to) (rate(computepool_node_reaper_batch_size_sum[5m]))", "{{to}}")],
            ),
            ("Node reaper run time", "s", quantiles("computepool_node_reaper_seconds")),
        ],
    ),
    (
        "Inference relay",
        [
            (
                "Requests per second",
                "reqps",
                [
                    (
                        "sum by (outcome, stream) (rate(computepool_relay_requests_total[5m]))",
                        "{{outcome}} stream={{stream}}",
                    )
                ],
            ),
            ("Time to first token", "s", quantiles("computepool_relay_first_token_seconds")),
            (
                "Tokens per second per answer",
                "short",
                quantiles("computepool_relay_tokens_per_second"),
            ),
            (
                "Tokens relayed per second",
                "short",
                [("sum(rate(computepool_relay_tokens_total[5m]))", "tokens/s")],
            ),
        ],
    ),
    (
        "Worker and beat",
        [
            (
                "Celery tasks per second",
                "ops",
                [
                    (
                        "sum by (task, state) (rate(computepool_celery_tasks_total[5m]))",
                        "{{task}} {{state}}",
                    )
                ],
            ),
            (
                "Celery task run time (p95)",
                "s",
                quantiles("computepool_celery_task_seconds", "task")[1:2],
            ),
            (
                "Beat sends per minute",
                "short",
                [("sum by (task) (rate(computepool_beat_sent_total[5m])) * 60", "{{task}}")],
            ),
            (
                "Nightly verify_ledger runs",
                "short",
                [
                    (
                        "sum by (result) (increase(computepool_ledger_verifications_total[1d]))",
                        "{{result}}",
                    )
                ],
            ),
            (
                "Alerts per day",
                "short",
                [("sum by (kind) (increase(computepool_alerts_total[1d]))", "{{kind}}")],
            ),
        ],
    ),
]


def dashboard() -> dict:
    panels: list[dict] = []
    y = 0
    for row_title, row in ROWS:
        panels.append(
            {
                "type": "row",
                "title": row_title,
                "id": len(panels) + 1,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        y += 1
        for index, (title, unit, targets) in enumerate(row):
            panels.append(
                {
                    "type": "timeseries",
                    "title": title,
                    "id": len(panels) + 1,
                    "datasource": DATASOURCE,
                    "gridPos": {"h": 8, "w": 8, "x": (index % 3) * 8, "y": y + (index // 3) * 8},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                    "targets": [
                        {
                            "datasource": DATASOURCE,
                            "expr": expr,
                            "legendFormat": legend,
                            "refId": ref,
                        }
                        for (expr, legend), ref in zip(targets, "ABCDEFGH", strict=False)
                    ],
                }
            )
        y += ((len(row) + 2) // 3) * 8
    return {
        "uid": "computepool",
        "title": "ComputePool",
        "tags": ["computepool"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "editable": True,
        "panels": panels,
    }


def rendered() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(rendered())
    print(f"wrote {OUT}")
