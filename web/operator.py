"""An operator's own nodes: the list, one node with its settings, and adding a machine.

Thin over the nodes app: the list and the node come from nodes.selectors (by owner, so another
operator's node is 404 like a missing one), and every change calls the service the API calls
(nodes.services.node_update, node_retire; people.services.api_key_create).
"""

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views import View

from core.errors import DomainError
from core.regions import region_code
from jobs.models import Attempt, AttemptState
from ledger.pricing import NoRulesInForce, spot_price_get
from ledger.quotes import MINOR_PER_CREDIT, node_price
from nodes.measured import best_gpu, headline_tflops
from nodes.models import Node, NodeState
from nodes.selectors import node_get, node_history, node_list
from nodes.serializers import MAX_PRICE_FLOOR
from nodes.services import node_pause, node_resume, node_retire, node_update
from nodes.trust import node_trusted
from people.services import api_key_create
from web.ratelimit import over_budget_page
from web.roles import OperatorPage

NODES_PER_PAGE = 50
HISTORY_SHOWN = 20
ACTIVE = (AttemptState.LEASED, AttemptState.RUNNING)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.pk}"


@dataclass
class NodeRow:
    """A node as its pages show it; `work` is its leased or running attempts."""

    node: Node
    work: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tflops(self) -> float | None:
        return headline_tflops(self.node.measured)

    @property
    def temperature_c(self) -> float | None:
        """The hottest GPU in the last heartbeat."""
        readings = [
            gpu.get("temperature_c")
            for gpu in self.node.gpu_state or []
            if isinstance(gpu, dict) and isinstance(gpu.get("temperature_c"), int | float)
        ]
        return max(readings) if readings else None

    @property
    def trusted(self) -> bool:
        return node_trusted(self.node)

    @property
    def tier_as_claimed(self) -> bool:
        """Paid as the tier its GPU's name claims (else the benchmark found less, or none)."""
        return self.node.tier == self.node.claimed_tier


def node_rows(nodes: list[Node]) -> list[NodeRow]:
    """The nodes with their current work: one query for all of them, however many."""
    rows = {node.pk: NodeRow(node) for node in nodes}
    attempts = (
        Attempt.objects.filter(node_id__in=list(rows), state__in=ACTIVE)
        .order_by("leased_at", "pk")
        .values("node_id", "task_id", "task__index", "state", "progress", "message", "leased_at")
    )
    for attempt in attempts:
        rows[attempt["node_id"]].work.append(attempt)
    return list(rows.values())


class NodesPage(OperatorPage, View):
    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest) -> HttpResponse:
        # Newest first: the order of Ownership's index, so a page of a big fleet is a short
        # index scan rather than a sort of every node.
        nodes = node_list(operator=request.user).order_by("-ownership__node")
        page = Paginator(nodes, NODES_PER_PAGE).get_page(request.GET.get("page"))
        return render(
            request, "web/operator/nodes.html", {"page": page, "rows": node_rows(list(page))}
        )


class PriceFloorForm(forms.Form):
    price_floor = forms.DecimalField(
        label="Price floor (credits per second)",
        min_value=Decimal(0),
        max_value=Decimal(MAX_PRICE_FLOOR) / MINOR_PER_CREDIT,
        decimal_places=2,
        help_text="The least you accept: the node is paid its market's price or this, whichever "
        "is higher. 0 takes the market's price.",
    )

    def minor(self) -> int:
        return int(self.cleaned_data["price_floor"] * MINOR_PER_CREDIT)


def _price_now(node: Node) -> int | None:
    try:
        spot = spot_price_get(region=node.region, tier=node.tier)
    except NoRulesInForce:
        return None
    return node_price(spot_per_s_minor=spot, floor_per_s_minor=node.price_floor)


def _node_page(
    request: HttpRequest, node: Node, form: PriceFloorForm | None = None
) -> HttpResponse:
    form = form or PriceFloorForm(
        initial={"price_floor": Decimal(node.price_floor) / MINOR_PER_CREDIT}
    )
    context = {
        "row": node_rows([node])[0],
        "node": node,
        "form": form,
        "price_now": _price_now(node),
        "gpu": best_gpu(node.measured or {}),
        "history": node_history(node=node).order_by("-version")[:HISTORY_SHOWN],
        "retired": node.state == NodeState.RETIRED,
        "paused": node.paused_at is not None,
    }
    return render(request, "web/operator/node.html", context)


class NodePage(OperatorPage, View):
    http_method_names = ["get", "head", "options"]

    def get(self, request: HttpRequest, node_id: int) -> HttpResponse:
        return _node_page(request, node_get(operator=request.user, node_id=node_id))


class NodePriceFloorPage(OperatorPage, View):
    http_method_names = ["post", "options"]

    def post(self, request: HttpRequest, node_id: int) -> HttpResponse:
        node = node_get(operator=request.user, node_id=node_id)
        form = PriceFloorForm(request.POST)
        if not form.is_valid():
            return _node_page(request, node, form)
        try:
            node_update(node=node, price_floor=form.minor(), actor=_actor(request))
        except DomainError as exc:
            form.add_error(None, str(exc))
            return _node_page(request, node, form)
        messages.success(request, f"The price floor of {node.name} is set.")
        return redirect("web:node", node_id=node.pk)


class _NodeActionPage(OperatorPage, View):
    """A button on the node's page: the service `act` on the operator's node (as the API's
    POST …/retire, …/pause, …/resume), then back to the page with `done` said when it changed
    something."""

    http_method_names = ["post", "options"]
    act: Callable[..., bool]
    done: str  # "{name}" is the node's

    def post(self, request: HttpRequest, node_id: int) -> HttpResponse:
        node = node_get(operator=request.user, node_id=node_id)
        try:
            changed = type(self).act(node=node, actor=_actor(request))
        except DomainError as exc:
            messages.error(request, str(exc))
            return redirect("web:node", node_id=node.pk)
        if changed:
            messages.success(request, self.done.format(name=node.name))
        return redirect("web:node", node_id=node.pk)


class NodeRetirePage(_NodeActionPage):
    act = node_retire
    done = "{name} is removed from the pool; its key is revoked."


class NodePausePage(_NodeActionPage):
    act = node_pause
    done = "{name} is paused: it finishes what it runs and takes no new work."


class NodeResumePage(_NodeActionPage):
    act = node_resume
    done = "{name} takes work again from its next heartbeat."


class EnrolForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        required=False,
        help_text="Letters, digits, dots, dashes; blank for the machine's host name.",
    )
    region = forms.CharField(
        max_length=2, required=False, help_text="Where the machine is: IN, US, DE…"
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if name and not _NAME.match(name):
            raise forms.ValidationError("Letters, digits, dots, dashes and underscores only.")
        return name

    def clean_region(self) -> str:
        return region_code(self.cleaned_data["region"].strip())


def register_command(*, hub: str, token: str, name: str = "", region: str = "") -> str:
    parts = ["computepool-agent", "register", "--hub", hub, "--token", token]
    if name:
        parts += ["--name", name]
    if region:
        parts += ["--region", region]
    return shlex.join(parts)


class AddMachinePage(OperatorPage, View):
    """The enrolment code is an operator API key made for it: registration authenticates with
    one (POST /api/v1/nodes/), and the key can be revoked on the keys page once the machine is
    in."""

    http_method_names = ["get", "post", "head", "options"]

    def _page(self, request: HttpRequest, form: EnrolForm, command: str = "") -> HttpResponse:
        response = render(
            request, "web/operator/add_machine.html", {"form": form, "command": command}
        )
        add_never_cache_headers(response)  # it may show a key
        return response

    def get(self, request: HttpRequest) -> HttpResponse:
        return self._page(request, EnrolForm())

    def post(self, request: HttpRequest) -> HttpResponse:
        if refused := over_budget_page(request, "enrol"):
            return refused
        form = EnrolForm(request.POST)
        if not form.is_valid():
            return self._page(request, form)
        key, secret = api_key_create(
            user=request.user,
            role="operator",
            name=f"enrol {timezone.now():%Y-%m-%d}",
            actor=_actor(request),
        )
        command = register_command(
            hub=request.build_absolute_uri("/").rstrip("/"),
            token=secret,
            name=form.cleaned_data["name"],
            region=form.cleaned_data["region"],
        )
        messages.success(request, f"Made the enrolment key “{key.name}” ({key.prefix}…).")
        return self._page(request, EnrolForm(), command)
