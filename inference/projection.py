"""Inference requests as the log tells them, against the requests table, with every closing's
sums recomputed from its inputs and its price book (verify_ledger)."""

from inference.billing import close_figures
from ledger.errors import DomainError
from ledger.models import Event
from ledger.pricing import fee_of_version


class RequestsProjection:
    name = "inference"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        # request_id -> (state, prompt_tokens, completion_tokens, charged)
        self.requests: dict[int, tuple[str, int, int, int]] = {}
        self.held: dict[int, int] = {}
        self.problems: list[str] = []
        self._fees: dict[int, int | None] = {}

    def _fee_bps(self, version: int) -> int | None:
        if version not in self._fees:
            try:
                self._fees[version] = fee_of_version(version).platform_fee_bps
            except DomainError:
                self._fees[version] = None
        return self._fees[version]

    def apply(self, event: Event) -> None:
        kind, p = event.type, event.payload
        if kind == "InferenceRequested":
            self.requests[p["request_id"]] = ("requested", 0, 0, 0)
            self.held[p["request_id"]] = p["amount_minor"]
        elif kind in ("InferenceServed", "InferenceFailed"):
            self._check_close(event, p)
            state = "served" if kind == "InferenceServed" else "failed"
            self.requests[p["request_id"]] = (
                state, p["prompt_tokens"], p["completion_tokens"], p["charged_minor"],
            )  # fmt: skip

    def _check_close(self, event: Event, p: dict) -> None:
        where = f"inference: request {p['request_id']} (event {event.pk})"
        if self.requests.get(p["request_id"], ("",))[0] != "requested":
            self.problems.append(f"{where} was closed without being open")
        if p["held_before_minor"] != self.held.get(p["request_id"]):
            self.problems.append(f"{where} closed a hold of {p['held_before_minor']}, not "
                                 f"the {self.held.get(p['request_id'])} held")  # fmt: skip
        fee_bps = self._fee_bps(p["book_version"])
        if fee_bps != p["fee_bps"]:
            self.problems.append(f"{where}: fee {p['fee_bps']} bps, book says {fee_bps}")
            return
        figures = close_figures(
            held=p["held_before_minor"],
            prompt_tokens=p["prompt_tokens"],
            completion_tokens=p["completion_tokens"],
            rate_in=p["rate_in"],
            rate_out=p["rate_out"],
            fee_bps=fee_bps,
        )
        recorded = (p["cost_minor"], p["charged_minor"], p["fee_minor"], p["operator_minor"],
                    p["released_minor"])  # fmt: skip
        recomputed = (figures.cost, figures.charged, figures.fee, figures.operator,
                      figures.released)  # fmt: skip
        if recorded != recomputed:
            self.problems.append(f"{where} recorded {recorded}, recomputed {recomputed}")

    def diff(self) -> list[str]:
        from inference.models import InferenceRequest

        problems = list(self.problems)
        live = {
            pk: (state, prompt, completion, charged)
            for pk, state, prompt, completion, charged in InferenceRequest.objects.values_list(
                "id", "state", "prompt_tokens", "completion_tokens", "charged_minor"
            ).iterator(chunk_size=10_000)
        }
        for pk in sorted(set(live) | set(self.requests)):
            if live.get(pk) != self.requests.get(pk):
                problems.append(
                    f"inference: request {pk} is {live.get(pk)} in the table, "
                    f"{self.requests.get(pk)} in the log"
                )
        return problems
