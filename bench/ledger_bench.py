"""Ledger: settlement's share of a completion, verify_ledger over 1M events, and a finance export
of 100k cashouts (time and peak memory).

1. Settlement share: completes through the DRF stack in this process (the test client: no
   socket), with the settlement, the hold release and attempt_complete itself wrapped in
   timers (wall and CPU time). (The node's reliability update is no part of its own to time
   on PostgreSQL: it is the first part of the success's one statement.)
2. verify_ledger: 1M TransferPosted events between 100 funded submitters, written with COPY
   (events, entries, postings, in transactions of 5000, so the sealer can take them a
   transaction at a time), the accounts' balances moved to match; sealed into the hash chain
   with chain_seal; then verify_ledger(), which must report no difference.
3. Export: 100k approved cashouts written with COPY, exported with cashout_export_create, then
   the CSV streamed from its lines; each in a fresh process whose peak RSS is read from
   /proc/self/status (VmHWM), next to a 10k export for the memory's flatness.

    .venv/bin/python -m bench.ledger_bench [--events 1000000] [--cashouts 100000]
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import common

PERIOD_SMALL = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC))
PERIOD_LARGE = (datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC))


# --- 1. settlement's share of complete ----------------------------------------------------------


class Timer:
    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    def wrap(self, module, name: str, label: str) -> None:
        original = getattr(module, name)

        def timed(*args, **kwargs):
            w, c = time.perf_counter(), time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.wall[label] += time.perf_counter() - w
                self.cpu[label] += time.process_time() - c

        setattr(module, name, timed)


def settlement_share(samples: int) -> None:
    from django.db import transaction
    from rest_framework.test import APIClient

    from bench.throughput import seed_jobs
    from jobs import attempts, billing
    from ledger import settlement
    from ledger.accounts import REVENUE, account_ensure, earnings_code, system_account
    from ledger.models import AccountKind

    ops = common.operators(1, prefix="shareop")
    _, keys = common.seed_nodes(1, operator_ids=ops, salt="share")
    user_id, _ = common.submitter("sharesub")
    seed_jobs(samples + 50, user_id)
    with transaction.atomic():
        system_account(REVENUE)
        account_ensure(code=earnings_code(ops[0]), kind=AccountKind.EARNINGS, owner_id=ops[0])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {keys[0]}")
    timer = Timer()

    def cycle() -> None:
        lease = client.post("/api/v1/agent/claim", {"wait": 0}, format="json").json()
        w, c = time.perf_counter(), time.process_time()
        done = client.post(
            f"/api/v1/agent/attempts/{lease['attempt_id']}/complete",
            {"lease_token": lease["lease_token"], "exit_code": 0},
            format="json",
        )
        timer.wall["request"] += time.perf_counter() - w
        timer.cpu["request"] += time.process_time() - c
        assert done.status_code == 200, done.content

    for _ in range(30):  # warm up
        cycle()
    timer.wall.clear()
    timer.cpu.clear()
    timer.wrap(attempts, "attempt_complete", "attempt_complete")
    timer.wrap(billing, "settle", "settle (billing.settle → attempt_settle)")
    timer.wrap(settlement, "attempt_settle", "attempt_settle")
    timer.wrap(billing, "release", "hold release (job's last task)")
    for _ in range(samples):
        cycle()
    rows = []
    for label in (
        "request",
        "attempt_complete",
        "settle (billing.settle → attempt_settle)",
        "attempt_settle",
        "hold release (job's last task)",
    ):
        rows.append(
            [
                label,
                f"{1000 * timer.wall[label] / samples:.2f}",
                f"{100 * timer.wall[label] / timer.wall['request']:.0f}%",
                f"{1000 * timer.cpu[label] / samples:.2f}",
                f"{100 * timer.cpu[label] / timer.cpu['request']:.0f}%",
            ]
        )
    common.table(
        rows,
        ["part of POST …/complete", "wall ms", "of request", "CPU ms", "of request CPU"],
    )
    money = timer.wall["settle (billing.settle → attempt_settle)"]
    money += timer.wall["hold release (job's last task)"]
    print(
        f"  settlement + release: {100 * money / timer.wall['attempt_complete']:.0f}% of "
        f"attempt_complete's wall time ({samples} one-slice jobs, in-process)"
    )


# --- 2. verify_ledger over 1M events ----------------------------------------------------------


def seed_transfers(count: int, chunk: int = 5000) -> float:
    from django.db import connection, transaction
    from django.utils import timezone

    from ledger.accounts import available_code
    from ledger.models import Account, Entry, Event, Posting

    users = [common.submitter(f"verify{i}", credits_minor=10**9)[0] for i in range(100)]
    accounts = list(
        Account.objects.filter(code__in=[available_code(u) for u in users]).values_list(
            "id", "code"
        )
    )
    deltas: dict[int, int] = defaultdict(int)
    now = timezone.now()
    t0 = time.perf_counter()
    for start in range(0, count, chunk):
        n = min(chunk, count - start)
        legs = []
        events = []
        for i in range(start, start + n):
            (src, src_code), (dst, dst_code) = accounts[i % 100], accounts[(i * 7 + 1) % 100]
            if src == dst:
                dst, dst_code = accounts[(i + 1) % 100]
            amount = 1 + i % 5
            stream = f"transfer:bench-{i}"
            payload = {
                "memo": "bench",
                "kind": "transfer",
                "postings": [[src_code, -amount, "CRD"], [dst_code, amount, "CRD"]],
            }
            events.append(
                {
                    "stream": stream,
                    "version": 1,
                    "type": "TransferPosted",
                    "schema_version": 1,
                    "payload": payload,
                    "actor": "bench",
                    "recorded_at": now,
                }
            )
            legs.append(((src, -amount), (dst, amount)))
            deltas[src] -= amount
            deltas[dst] += amount
        # Transfers written under no idempotency key: no fingerprint, as the door writes them.
        with transaction.atomic():
            first_event = common.model_copy(Event, events, reserve=n)
            first_entry = common.model_copy(
                Entry,
                (
                    {"event_id": first_event + k, "kind": "transfer", "created_at": now}
                    for k in range(n)
                ),
                reserve=n,
            )
            common.model_copy(
                Posting,
                (
                    {"entry_id": first_entry + k, "account_id": a, "amount": m, "currency": "CRD"}
                    for k, pair in enumerate(legs)
                    for a, m in pair
                ),
            )
    with transaction.atomic(), connection.cursor() as cursor:
        for account_id, delta in deltas.items():
            cursor.execute(
                "UPDATE ledger_account SET balance = balance + %s WHERE id = %s",
                [delta, account_id],
            )
    return time.perf_counter() - t0


def verify(count: int, db: str) -> None:
    from ledger.chain import chain_seal
    from ledger.models import Event
    from ledger.verify import verify_ledger

    took = seed_transfers(count)
    common.close_django_connections()
    common.vacuum_analyze(db, "ledger_event", "ledger_entry", "ledger_posting")
    total = Event.objects.count()
    print(f"  seeded {count} transfer events with COPY in {took:.0f} s ({total} events in all)")
    t0 = time.perf_counter()
    sealed = 0
    while True:
        result = chain_seal(limit=5000)
        sealed += result.sealed
        if not result.sealed:
            break
    print(f"  chain_seal: {sealed} events sealed in {time.perf_counter() - t0:.0f} s")
    common.close_django_connections()
    common.vacuum_analyze(db, "ledger_eventseal")
    t0, c0 = time.perf_counter(), time.process_time()
    report = verify_ledger(check_chain=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"  verify_ledger (chain + every projection): {wall:.1f} s wall, {cpu:.1f} s CPU in this "
        f"process, {report.events} events, peak RSS {peak:.0f} MiB (target < 60 s)"
    )
    print(f"  verdict: {'OK' if report.ok else f'{len(report.problems)} problem(s)'}")
    for line in report.problems[:10]:
        print(f"    {line}")
    t0 = time.perf_counter()
    report = verify_ledger(check_chain=False)
    print(f"  verify_ledger without the chain: {time.perf_counter() - t0:.1f} s")


# --- 3. the export ----------------------------------------------------------------------------


def seed_cashouts(period: tuple[datetime, datetime], count: int, ops: list[int]) -> None:
    from ledger.cashouts import payout_details_hash
    from ledger.pricing import rules_at

    rules = rules_at()
    details = {"method": "upi", "vpa": "operator@okbank"}
    digest = payout_details_hash(details)
    span = (period[1] - period[0]).total_seconds()
    from ledger.models_cashouts import Cashout

    common.model_copy(
        Cashout,
        (
            {
                "operator_id": ops[i % len(ops)],
                "status": "approved",
                "amount_minor": 100_000 + i % 1000,
                "fee_minor": 0,
                "inr_paise": 100_000 + i % 1000,
                "book_version": rules.version,
                "paise_per_credit": rules.paise_per_credit,
                "payout_details": details,
                "payout_details_sha256": digest,
                "version": 2,
                "requested_at": period[0],
                "approved_at": period[0] + timedelta(seconds=span * i / count),
                "decided_at": period[0],
                "decided_by": "bench",
            }
            for i in range(count)
        ),
    )


def _vm_hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def export_child(db: str, which: str, profile: bool) -> None:
    """Runs in a fresh process: one export, then its CSV streamed; prints JSON figures."""
    import cProfile
    import pstats

    common.django_setup(db)
    from ledger.exports import cashout_export_create, export_csv_chunks

    baseline = _vm_hwm_mib()
    period = PERIOD_SMALL if which == "small" else PERIOD_LARGE
    profiler = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    export = cashout_export_create(period_from=period[0], period_to=period[1], actor="bench")
    if profiler:
        profiler.disable()
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(30)
    created = time.perf_counter() - t0
    after_create = _vm_hwm_mib()
    t0 = time.perf_counter()
    size = sum(len(chunk) for chunk in export_csv_chunks(export))
    streamed = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "count": export.count,
                "create_s": created,
                "stream_s": streamed,
                "bytes": size,
                "baseline_mib": baseline,
                "peak_create_mib": after_create,
                "peak_mib": _vm_hwm_mib(),
            }
        )
    )


def exports(db: str, count: int, profile: bool) -> None:
    ops = common.operators(100, prefix="cashop")
    seed_cashouts(PERIOD_SMALL, max(1, count // 10), ops)
    seed_cashouts(PERIOD_LARGE, count, ops)
    common.close_django_connections()
    common.vacuum_analyze(db, "ledger_cashout")
    rows = []
    for which in ("small", "large"):
        out = subprocess.run(
            [common.PYTHON, "-m", "bench.ledger_bench", "--export-child", which, "--db", db]
            + (["--profile"] if profile and which == "small" else []),
            cwd=common.ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        f = json.loads(out.stdout.strip().splitlines()[-1])
        if profile and which == "small":
            print("  cProfile of the smaller export's cashout_export_create (cumulative, wall):")
            print("\n".join("    " + line for line in out.stderr.splitlines()[6:45]))
        rows.append(
            [
                f["count"],
                f"{f['create_s']:.1f}",
                f"{f['stream_s']:.1f}",
                f"{f['bytes'] / 2**20:.1f}",
                f"{f['baseline_mib']:.0f}",
                f"{f['peak_create_mib']:.0f}",
                f"{f['peak_mib']:.0f}",
            ]
        )
    common.table(
        rows,
        [
            "cashouts",
            "create s (target < 10)",
            "stream CSV s",
            "CSV MiB",
            "RSS after setup MiB",
            "peak after create",
            "peak after stream",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--cashouts", type=int, default=100_000)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the smaller export")
    parser.add_argument("--skip", default="", help="parts to skip: share,export,verify")
    parser.add_argument("--export-child", choices=("small", "large"), help=argparse.SUPPRESS)
    parser.add_argument("--verify-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument(
        "--name",
        default="ledger",
        help="database suffix: bench_computepool_<name> and <name>_verify (default ledger)",
    )
    args = parser.parse_args()
    if args.export_child:
        export_child(args.db, args.export_child, args.profile)
        return
    if args.verify_child:
        # A database of its own: the other parts write rows (COPY'd jobs) that have no events.
        common.django_setup(args.db)
        verify(args.events, args.db)
        return
    common.banner("ledger: settlement share, verify_ledger, finance export")
    db = common.create_db(args.name)
    common.django_setup(db)
    skip = set(args.skip.split(","))
    if "share" not in skip:
        print(f"\n1. settlement's share of POST …/complete ({args.samples} completions)")
        settlement_share(args.samples)
    if "export" not in skip:
        print(f"\n3. finance export of {args.cashouts} cashouts (each in a fresh process)")
        exports(db, args.cashouts, args.profile)
    common.close_django_connections()
    if not args.keep:
        common.drop_db(db)
    if "verify" in skip:
        return
    print(f"\n2. verify_ledger over {args.events} events (a fresh database)")
    sys.stdout.flush()
    vdb = common.create_db(f"{args.name}_verify")
    subprocess.run(
        [common.PYTHON, "-m", "bench.ledger_bench", "--verify-child", "--db", vdb,
         "--events", str(args.events)],
        cwd=common.ROOT,
        check=True,
        timeout=1800,
    )  # fmt: skip
    if not args.keep:
        common.drop_db(vdb)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
