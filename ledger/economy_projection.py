"""verify_ledger's view of the economy: cashouts, exports and spot prices replayed from their
events, every settlement recomputed from its inputs and price book, and the standing invariants.
"""

from collections import defaultdict
from typing import Any

from django.db.models import Q, Sum

from core.errors import DomainError
from ledger import quotes
from ledger.accounts import FUNDING, PAYOUTS, REVENUE, cashout_code, earnings_code
from ledger.cashouts import payout_details_hash
from ledger.exports import export_sha256
from ledger.models import Account, AccountKind, Event, Posting
from ledger.models_cashouts import Cashout, CashoutExport, CashoutExportLine, CashoutStatus
from ledger.models_pricing import SpotPrice
from ledger.payload_checks import moves_differ
from ledger.pricing import Rules, rules_version
from ledger.settlement import settlement_check, settlement_recompute

# Which status each cashout event may follow.
_TRANSITIONS = {
    "CashoutApproved": ({"requested"}, "approved"),
    "CashoutRejected": ({"requested", "approved"}, "rejected"),
    "CashoutPaid": ({"approved"}, "paid"),
}


def _cashout_moves(event_type: str, state: dict[str, Any]) -> dict[str, int]:
    """What a cashout's decision moves: its payload states no amount, the request did."""
    operator, amount, fee = state["operator_id"], state["amount_minor"], state["fee_minor"]
    if event_type == "CashoutRejected":
        return {cashout_code(operator): -amount, earnings_code(operator): amount}
    if event_type == "CashoutPaid":
        return {cashout_code(operator): -amount, PAYOUTS: amount - fee, REVENUE: fee}
    return {}


_CASHOUT_FIELDS = ("operator_id", "status", "amount_minor", "fee_minor", "inr_paise", "version")


class EconomyProjection:
    name = "economy"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.cashouts: dict[int, dict[str, Any]] = {}
        self.spots: dict[tuple[str, str], dict[str, int]] = {}
        self.exports: dict[int, dict[str, Any]] = {}
        self.exported: dict[int, int] = {}
        self.problems: list[str] = []
        self._rules: dict[int, Rules | None] = {}

    def _rules_of(self, version: int) -> Rules | None:
        if version not in self._rules:
            try:
                self._rules[version] = rules_version(version)
            except DomainError:
                self._rules[version] = None
        return self._rules[version]

    def apply(self, event: Event) -> None:
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event, event.payload)

    # --- settlements ---

    def _on_AttemptSettled(self, event: Event, p: dict) -> None:
        rules = self._rules_of(p["book_version"])
        if rules is None:
            self.problems.append(
                f"economy: settlement {event.pk} names a missing price book v{p['book_version']}"
            )
            return
        figures = settlement_recompute(event, rules=rules)
        self.problems.extend(f"economy: {line}" for line in settlement_check(event, figures))

    def _on_SpotCheckSettled(self, event: Event, p: dict) -> None:
        """A spot-check the platform paid: the operator's share of its cost, recomputed."""
        rules = self._rules_of(p["book_version"])
        billed = quotes.billed_ms(runtime_ms=p["runtime_ms"], timeout_ms=p["timeout_ms"])
        cost = quotes.cost_minor(price_per_s_minor=p["price_per_s_minor"], billed_ms=billed)
        fee_bps = rules.platform_fee_bps if rules is not None else None
        expected = {"billed_ms": billed, "cost_minor": cost, "fee_bps": fee_bps}
        if fee_bps is not None:
            expected["operator_minor"] = quotes.fee_split(cost=cost, fee_bps=fee_bps).operator
        self.problems.extend(
            f"economy: spot-check settlement {event.pk} (attempt {p['attempt_id']}): {name} "
            f"recorded {p[name]}, recomputed {value}"
            for name, value in expected.items()
            if p[name] != value
        )

    # --- cashouts ---

    def _on_CashoutRequested(self, event: Event, p: dict) -> None:
        cashout_id = p["cashout_id"]
        if cashout_id in self.cashouts:
            self.problems.append(f"economy: cashout {cashout_id} was requested twice")
        try:
            figures = quotes.cashout_figures(
                amount=p["amount_minor"],
                fee_bps=p["fee_bps"],
                paise_per_credit=p["paise_per_credit"],
            )
        except ValueError as exc:
            self.problems.append(f"economy: cashout {cashout_id} cannot be recomputed: {exc}")
            figures = None
        if figures is not None and (figures.fee, figures.inr_paise) != (
            p["fee_minor"],
            p["inr_paise"],
        ):
            self.problems.append(
                f"economy: cashout {cashout_id} recorded fee {p['fee_minor']} / "
                f"₹{p['inr_paise']} paise, recomputed {figures.fee} / {figures.inr_paise}"
            )
        rules = self._rules_of(p["book_version"])
        if rules is None or (rules.cashout_fee_bps, rules.paise_per_credit) != (
            p["fee_bps"],
            p["paise_per_credit"],
        ):
            self.problems.append(
                f"economy: cashout {cashout_id}'s rates differ from price book v{p['book_version']}"
            )
        self.cashouts[cashout_id] = {
            "operator_id": p["operator_id"],
            "status": "requested",
            "amount_minor": p["amount_minor"],
            "fee_minor": p["fee_minor"],
            "inr_paise": p["inr_paise"],
            "version": event.version,
            "details_sha256": p["payout_details_sha256"],
            "payout_reference": "",
        }

    def _transition(self, event: Event, p: dict) -> None:
        state = self.cashouts.get(p["cashout_id"])
        allowed, to = _TRANSITIONS[event.type]
        if state is None:
            self.problems.append(f"economy: {event.type} for unknown cashout {p['cashout_id']}")
            return
        if state["status"] not in allowed:
            self.problems.append(
                f"economy: cashout {p['cashout_id']} went {state['status']} → {to} (not allowed)"
            )
        for phrase in moves_differ(p, _cashout_moves(event.type, state)):
            self.problems.append(f"economy: {event.type} {event.pk} of cashout {p['cashout_id']}: "
                                 f"{phrase}")  # fmt: skip
        state["status"] = to
        state["version"] = event.version
        if to == "paid":
            state["payout_reference"] = p["payout_reference"]

    _on_CashoutApproved = _transition
    _on_CashoutRejected = _transition
    _on_CashoutPaid = _transition

    def _on_CashoutsExported(self, event: Event, p: dict) -> None:
        for cashout_id in p["cashout_ids"]:
            if cashout_id in self.exported:
                self.problems.append(
                    f"economy: cashout {cashout_id} is in exports {self.exported[cashout_id]} "
                    f"and {p['export_id']}"
                )
            self.exported[cashout_id] = p["export_id"]
        self.exports[p["export_id"]] = p

    # --- spot prices ---

    def _on_SpotPriceChanged(self, event: Event, p: dict) -> None:
        key = (p["region"], p["tier"])
        before = self.spots.get(key)
        old = before["price"] if before else None
        if old != p["old_price_per_s_minor"]:
            self.problems.append(
                f"economy: spot {key} changed from {p['old_price_per_s_minor']} but was {old}"
            )
        self._spot(event, p)

    def _on_SpotBoundsChanged(self, event: Event, p: dict) -> None:
        self._spot(event, p)

    def _spot(self, event: Event, p: dict) -> None:
        if not p["min_per_s_minor"] <= p["price_per_s_minor"] <= p["max_per_s_minor"]:
            self.problems.append(f"economy: spot {p['region']}/{p['tier']} left its bounds")
        self.spots[(p["region"], p["tier"])] = {
            "price": p["price_per_s_minor"],
            "min": p["min_per_s_minor"],
            "max": p["max_per_s_minor"],
            "version": event.version,
        }

    # --- the diff ---

    def diff(self) -> list[str]:
        problems = list(self.problems)
        problems.extend(self._diff_cashouts())
        problems.extend(self._diff_exports())
        problems.extend(self._diff_spots())
        problems.extend(economy_invariants())
        return problems

    def _diff_cashouts(self) -> list[str]:
        problems = []
        rows = {c.pk: c for c in Cashout.objects.all().iterator(chunk_size=2000)}
        for cashout_id in sorted(set(rows) | set(self.cashouts)):
            row, replayed = rows.get(cashout_id), self.cashouts.get(cashout_id)
            if row is None:
                problems.append(f"economy: cashout {cashout_id} is in the log but has no row")
                continue
            if replayed is None:
                problems.append(f"economy: cashout {cashout_id} has a row but no events")
                continue
            for name in _CASHOUT_FIELDS:
                if getattr(row, name) != replayed[name]:
                    problems.append(
                        f"economy: cashout {cashout_id} {name} is {getattr(row, name)!r}, "
                        f"the log says {replayed[name]!r}"
                    )
            if row.payout_reference != replayed["payout_reference"]:
                problems.append(f"economy: cashout {cashout_id} payout reference differs")
            if payout_details_hash(row.payout_details) != replayed["details_sha256"] or (
                row.payout_details_sha256 != replayed["details_sha256"]
            ):
                problems.append(f"economy: cashout {cashout_id} payout details were changed")
        return problems

    def _diff_exports(self) -> list[str]:
        problems = []
        rows = {e.pk: e for e in CashoutExport.objects.all()}
        lines: dict[int, int] = dict(
            CashoutExportLine.objects.values_list("cashout_id", "export_id")
        )
        for export_id in sorted(set(rows) | set(self.exports)):
            row, logged = rows.get(export_id), self.exports.get(export_id)
            if row is None or logged is None:
                problems.append(f"economy: export {export_id} is missing from the log or the table")
                continue
            for name in (
                "count",
                "total_amount_minor",
                "total_fee_minor",
                "total_inr_paise",
                "sha256",
                "chain_head",
                "chain_seq",
            ):
                # .get: exports made before chain_seq carry none, as their rows do.
                if getattr(row, name) != logged.get(name):
                    problems.append(f"economy: export {export_id} {name} differs from its event")
            if export_sha256(row) != logged["sha256"]:
                problems.append(f"economy: export {export_id}'s lines no longer hash to its sha256")
        if lines != self.exported:
            problems.append("economy: the export lines do not match the cashouts the log exported")
        return problems

    def _diff_spots(self) -> list[str]:
        problems = []
        rows = {
            (s.region, s.tier): {
                "price": s.price_per_s_minor,
                "min": s.min_per_s_minor,
                "max": s.max_per_s_minor,
                "version": s.version,
            }
            for s in SpotPrice.objects.all()
        }
        for key in sorted(set(rows) | set(self.spots)):
            if rows.get(key) != self.spots.get(key):
                problems.append(
                    f"economy: spot price {key[0]}/{key[1]} is {rows.get(key)}, "
                    f"the log says {self.spots.get(key)}"
                )
        return problems


def economy_invariants() -> list[str]:
    """Cheap standing checks (no replay): fit for a periodic task as well as verify_ledger.

    - credits inside = funded - paid out: the projected balance columns of every internal
      account plus the derived balances (revenue) equal -(funding + payouts) from postings;
    - external payouts received exactly the net of the paid cashouts;
    - each operator's cashout clearing holds exactly their requested and approved cashouts;
    - platform revenue is not negative.
    """
    problems: list[str] = []
    posted = dict(
        Posting.objects.filter(account__code__in=[FUNDING, PAYOUTS, REVENUE])
        .values_list("account__code")
        .annotate(total=Sum("amount"))
        .values_list("account__code", "total")
    )
    funding, payouts, revenue = (posted.get(c) or 0 for c in (FUNDING, PAYOUTS, REVENUE))
    internal = Account.objects.exclude(kind__in=[AccountKind.FUNDING, AccountKind.PAYOUTS])
    projected = internal.filter(projected=True).aggregate(s=Sum("balance"))["s"] or 0
    derived = (
        Posting.objects.filter(account__in=internal.filter(projected=False)).aggregate(
            s=Sum("amount")
        )["s"]
        or 0
    )
    if projected + derived != -(funding + payouts):
        problems.append(
            f"economy: credits inside the books are {projected + derived}, but funded - paid out "
            f"is {-funding} - {payouts} = {-(funding + payouts)}"
        )
    if revenue < 0:
        problems.append(f"economy: platform revenue is negative ({revenue})")
    paid = Cashout.objects.filter(status=CashoutStatus.PAID).aggregate(
        a=Sum("amount_minor"), f=Sum("fee_minor")
    )
    paid_net = (paid["a"] or 0) - (paid["f"] or 0)
    if payouts != paid_net:
        problems.append(
            f"economy: external payouts received {payouts}, paid cashouts net {paid_net}"
        )
    outstanding = defaultdict(int)
    for operator_id, amount in Cashout.objects.filter(
        Q(status=CashoutStatus.REQUESTED) | Q(status=CashoutStatus.APPROVED)
    ).values_list("operator_id", "amount_minor"):
        outstanding[cashout_code(operator_id)] += amount
    clearing = dict(Account.objects.filter(kind=AccountKind.CASHOUT).values_list("code", "balance"))
    for code in sorted(set(clearing) | set(outstanding)):
        if clearing.get(code, 0) != outstanding.get(code, 0):
            problems.append(
                f"economy: {code} holds {clearing.get(code, 0)}, but open cashouts total "
                f"{outstanding.get(code, 0)}"
            )
    return problems
