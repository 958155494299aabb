"""Demo helper: creates the demo's people and keys; prints shell assignments for demo.sh.

python scripts/demo_setup.py people
"""

import os
import secrets
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "computepool.settings")

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import transaction  # noqa: E402

from people.services import api_key_create, role_grant  # noqa: E402


def people() -> None:
    User = get_user_model()
    password = secrets.token_urlsafe(12)
    with transaction.atomic():
        admin, _ = User.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        admin.is_staff = admin.is_superuser = True
        admin.set_password(password)
        admin.save()
        role_grant(user=admin, role="admin", actor="demo")
        keys = {}
        for username, role in (("alice", "submitter"), ("bob", "operator")):
            user, _ = User.objects.get_or_create(username=username)
            role_grant(user=user, role=role, actor="demo")
            _, keys[role] = api_key_create(user=user, role=role, name="demo", actor="demo")
    print(f"ADMIN_PASSWORD={password}")
    print(f"SUBMITTER_KEY={keys['submitter']}")
    print(f"OPERATOR_KEY={keys['operator']}")


def node_state() -> None:
    from nodes.models import Node

    print(
        Node.objects.filter(name="demo-rig").order_by("-id").values_list("state", flat=True).first()
        or "missing"
    )


def benchmark() -> None:
    """The demo node's latest benchmark: empty until it ended."""
    from nodes.models import NodeBenchmark

    done = (
        NodeBenchmark.objects.filter(node__name="demo-rig")
        .exclude(state="issued")
        .order_by("-id")
        .first()
    )
    if done is None:
        return
    figures = done.figures or {}
    print(
        f"benchmark {done.pk} {done.state}: paid and routed as {done.tier or 'cpu'}; "
        f"CPU {figures.get('cpu_gflops')} GFLOPS, memory {figures.get('memory_gb_per_s')} GB/s, "
        f"{len(figures.get('gpus') or [])} GPU(s) measured"
        + (f"; problems: {'; '.join(done.problems)}" if done.problems else "")
    )


SAMPLES = [
    {
        "name": "hello-slices",
        "kind": "script",
        "slices": 3,
        "timeout_s": 60,
        "price_ceiling": 100,
        "script": 'echo "slice $CP_SLICE_INDEX of $CP_SLICE_COUNT: $(echo pooled compute | wc -c)'
        ' bytes"\necho "slice $CP_SLICE_INDEX" > "$COMPUTEPOOL_OUT/result.txt"\n',
    },
    {
        "name": "count-primes",
        "kind": "script",
        "slices": 1,
        "timeout_s": 60,
        "price_ceiling": 100,
        "script": "n=0; for i in $(seq 2 400); do p=1; for d in $(seq 2 $((i - 1))); do "
        "[ $((i % d)) -eq 0 ] && p=0 && break; done; n=$((n + p)); done; "
        'echo "primes below 400: $n"\n',
    },
]


def submit(hub: str, key: str) -> None:
    """Submit the samples over HTTP, as any submitter would, and wait for them to finish."""
    import time

    import requests

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    ids = []
    for body in SAMPLES:
        response = session.post(f"{hub}/api/v1/jobs/", json=body, timeout=10)
        response.raise_for_status()
        ids.append(response.json()["id"])
        print(f"submitted job {ids[-1]} ({body['name']}, {body['slices']} slice(s))")
    deadline = time.monotonic() + 120
    jobs = {}
    while time.monotonic() < deadline:
        jobs = {i: session.get(f"{hub}/api/v1/jobs/{i}", timeout=10).json() for i in ids}
        if all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs.values()):
            break
        time.sleep(0.5)
    for job in jobs.values():
        print(f"\njob {job['id']} {job['name']}: {job['state']}")
        for task in job["tasks"]:
            for attempt in task["attempts"]:
                out = attempt["stdout_tail"].strip().replace("\n", " | ")
                files = ", ".join(a["name"] for a in attempt["artifacts"]) or "none"
                print(
                    f"  slice {task['index']}: {attempt['state']} in "
                    f"{attempt['runtime_ms']} ms on node {attempt['node_id']}: {out!r} "
                    f"(outputs: {files})"
                )
    money()
    if any(j["state"] != "succeeded" for j in jobs.values()):
        sys.exit("a sample job did not succeed; see var/demo/log/agent.log")


def money() -> None:
    from django.db.models import Sum

    from ledger.models import Posting

    def total(**filters: object) -> int:
        return Posting.objects.filter(**filters).aggregate(s=Sum("amount"))["s"] or 0

    spent = -total(entry__kind="settlement", amount__lt=0)
    earned = total(entry__kind="settlement", account__kind="earnings")
    fee = total(entry__kind="settlement", account__kind="revenue")
    print(
        f"\nalice spent {spent / 100:.2f} credits; bob earned {earned / 100:.2f}; "
        f"the platform's fee was {fee / 100:.2f} (spent = earned + fee: "
        f"{'yes' if spent == earned + fee else 'NO'})"
    )


def cashout() -> None:
    """A whole cashout cycle for bob: request, approve, export, pay. The book in force asks for
    ₹500 at least and values a credit at one paisa, and a demo's few seconds of work earn well
    under a credit where jobs run fast (with no sandbox, say): so the demo first publishes a
    demo-sized version of the book, with a one-paisa minimum and a credit worth a rupee, so
    that whatever bob earned is whole paise (as an admin would, in a new version of the book:
    books in force are never edited)."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from ledger import quotes
    from ledger.accounts import earnings_code
    from ledger.cashouts import cashout_approve, cashout_mark_paid, cashout_request
    from ledger.exports import cashout_export_create
    from ledger.models import Account
    from ledger.models_pricing import PriceBook
    from ledger.pricing import price_book_copy, rules_at
    from people.services import role_grant

    now = timezone.now()
    rules = rules_at(now)
    if rules.min_cashout_paise > 1 or quotes.paise_granularity(rules.paise_per_credit) > 1:
        with transaction.atomic():
            in_force = PriceBook.objects.get(pk=rules.version)
            book = price_book_copy(
                source=in_force, effective_from=now + timedelta(days=365), name="demo-sized"
            )
            book.min_cashout_paise = 1
            # A paisa per minor unit: every minor unit bob earned can be paid out.
            book.paise_per_credit = quotes.MINOR_PER_CREDIT
            book.effective_from = now - timedelta(seconds=1)
            book.save()
        rules = rules_at()
    bob = get_user_model().objects.get(username="bob")
    carol, _ = get_user_model().objects.get_or_create(username="carol")
    role_grant(user=carol, role="finance", actor="demo")
    earned = (
        Account.objects.filter(code=earnings_code(bob.pk)).values_list("balance", flat=True).first()
        or 0
    )
    step = quotes.paise_granularity(rules.paise_per_credit)
    amount = earned // step * step
    if amount == 0:
        print(
            f"\nbob earned nothing to cash out ({quotes.format_minor(earned)} credits): no cashout"
        )
        return
    actor = f"user:{bob.pk}"
    requested = cashout_request(
        operator_id=bob.pk,
        amount=amount,
        payout_details={"method": "upi", "vpa": "bob@okbank"},
        actor=actor,
        idempotency_key=f"demo-{now:%Y%m%d%H%M%S}",
    )
    finance = f"user:{carol.pk}"
    cashout_approve(cashout_id=requested.pk, actor=finance)
    export = cashout_export_create(
        period_from=now - timedelta(hours=1),
        period_to=timezone.now() + timedelta(seconds=1),
        actor=finance,
        cashout_ids=[requested.pk],
    )
    paid = cashout_mark_paid(
        cashout_id=requested.pk, payout_reference=f"UPI-DEMO-{requested.pk}", actor=finance
    )
    print(
        f"\ncashout {paid.pk}: bob asked for {quotes.format_minor(amount)} credits "
        f"(₹{quotes.format_paise(paid.inr_paise)} after the fee, minimum "
        f"₹{quotes.format_paise(rules.min_cashout_paise)} in the demo's book); carol (finance) "
        f"approved it, exported it (export {export.pk}, sha256 {export.sha256[:12]}…, chain head "
        f"{export.chain_head[:12]}…) and marked it {paid.status} as {paid.payout_reference}"
    )


def inference(models_dir: str) -> None:
    """The tiny model in the catalog, priced: what an admin does in the admin."""
    from inference.catalog import model_register, token_prices_publish
    from inference.models import InferenceModel
    from inference.tiny_model import write_tiny_model
    from ledger.pricing import rules_at

    root = Path(models_dir)
    root.mkdir(parents=True, exist_ok=True)
    write_tiny_model(root / "tiny.gguf")
    if not InferenceModel.objects.filter(name="tiny").exists():
        model_register(InferenceModel(name="tiny", path="tiny.gguf", quantization="F32",
                                      context_length=2048, ram_mb=64))  # fmt: skip
    if "tiny" not in rules_at().priced_models():
        # 1 and 2 minor units a token in and out (per million), in a new version of the book.
        token_prices_publish({"tiny": (1_000_000, 2_000_000)}, name="with tiny")
    print("model tiny (the tiny test model, 0.4 MB) is in the catalog, priced")


def requests_shown() -> None:
    from inference.models import InferenceRequest

    for request in InferenceRequest.objects.order_by("id"):
        print(
            f"request {request.pk}: {request.state} by node {request.node_id}, "
            f"{request.prompt_tokens} prompt + {request.completion_tokens} completion tokens, "
            f"first token after {request.ttft_ms} ms, charged {request.charged_minor} minor units"
        )


if __name__ == "__main__":
    {
        "people": people,
        "node_state": node_state,
        "benchmark": benchmark,
        "submit": lambda: submit(*sys.argv[2:4]),
        "money": money,
        "cashout": cashout,
        "inference": lambda: inference(sys.argv[2]),
        "requests": requests_shown,
    }[sys.argv[1]]()
