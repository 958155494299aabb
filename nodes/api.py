"""The nodes API: operators manage their nodes, agents heartbeat. Thin: validate, one service,
serialize."""

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.bodies import model_validated, validated
from core.api.pagination import DefaultPagination
from core.api.permissions import IsOperator
from ledger.models import Event
from ledger.quotes import format_minor
from ledger.statements import earnings_summary
from nodes.auth import IsAgent
from nodes.heartbeat import Heartbeat
from nodes.models import Node
from nodes.selectors import node_get, node_history, node_list
from nodes.serializers import (
    AgentEarningsOut,
    AgentEarningsQuery,
    AgentMeOut,
    CapabilitiesIn,
    HeartbeatOut,
    NodeEventOut,
    NodeOut,
    NodeRegisteredOut,
    NodeRegisterIn,
    NodeUpdateIn,
)
from nodes.services import (
    node_heartbeat,
    node_pause,
    node_register,
    node_resume,
    node_retire,
    node_update,
)
from nodes.signing import hub_public_key_b64


def _actor(request: Request) -> str:
    return f"user:{request.user.pk}"


class NodeListCreateApi(generics.ListAPIView):
    """Your nodes. Registering one (the agent does it) returns its agent key once."""

    permission_classes = [IsOperator]
    serializer_class = NodeOut

    def get_queryset(self) -> QuerySet[Node]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no operator
            return Node.objects.none()
        return node_list(operator=self.request.user)

    @extend_schema(
        request=NodeRegisterIn,
        responses={201: NodeRegisteredOut},
        summary="Register a node (operator key)",
    )
    def post(self, request: Request) -> Response:
        data = NodeRegisterIn(data=request.data)
        data.is_valid(raise_exception=True)
        node, agent_key = node_register(
            operator=request.user,
            name=data.validated_data["name"],
            region=data.validated_data["region"],
            price_floor=data.validated_data["price_floor"],
            capabilities=data.validated_data["capabilities"],
            actor=_actor(request),
        )
        body = NodeRegisteredOut(
            {
                "node": node,
                "agent_key": agent_key,
                "hub_public_key": hub_public_key_b64(),
                "heartbeat_interval_s": settings.NODE_HEARTBEAT_INTERVAL_S,
            }
        )
        return Response(body.data, status=status.HTTP_201_CREATED)


class NodeDetailApi(APIView):
    permission_classes = [IsOperator]

    @extend_schema(responses=NodeOut, summary="One of your nodes")
    def get(self, request: Request, node_id: int) -> Response:
        return Response(NodeOut(node_get(operator=request.user, node_id=node_id)).data)

    @extend_schema(
        request=NodeUpdateIn, responses=NodeOut, summary="Rename a node or set its price floor"
    )
    def patch(self, request: Request, node_id: int) -> Response:
        node = node_get(operator=request.user, node_id=node_id)
        data = NodeUpdateIn(data=request.data)
        data.is_valid(raise_exception=True)
        node = node_update(node=node, actor=_actor(request), **data.validated_data)
        return Response(NodeOut(node).data)


class _NodeActionApi(APIView):
    """POST to one of the operator's nodes: the service `act` on it, and the node back."""

    permission_classes = [IsOperator]
    act: Callable[..., object]

    def post(self, request: Request, node_id: int) -> Response:
        node = node_get(operator=request.user, node_id=node_id)
        type(self).act(node=node, actor=_actor(request))
        return Response(NodeOut(node).data)


def _action_schema(summary: str) -> Callable[[type], type]:
    return extend_schema_view(post=extend_schema(request=None, responses=NodeOut, summary=summary))


@_action_schema("Retire one of your nodes for good (revokes its agent key)")
class NodeRetireApi(_NodeActionApi):
    act = node_retire


@_action_schema("Pause one of your nodes: it finishes what it runs and takes no new work")
class NodePauseApi(_NodeActionApi):
    act = node_pause


@_action_schema("Resume a node you paused")
class NodeResumeApi(_NodeActionApi):
    act = node_resume


class HistoryPagination(DefaultPagination):  # its forged-cursor check included
    ordering = "-version"
    page_size_query_param = "page_size"
    max_page_size = 200


class NodeHistoryApi(generics.ListAPIView):
    """What happened to the node, newest first: every state change with its reason."""

    permission_classes = [IsOperator]
    serializer_class = NodeEventOut
    pagination_class = HistoryPagination

    def get_queryset(self) -> QuerySet[Event]:
        if getattr(self, "swagger_fake_view", False):
            return Event.objects.none()
        node = node_get(operator=self.request.user, node_id=self.kwargs["node_id"])
        return node_history(node=node)


class AgentMeApi(APIView):
    permission_classes = [IsAgent]

    @extend_schema(responses=AgentMeOut, summary="The node this agent key belongs to")
    def get(self, request: Request) -> Response:
        return Response(AgentMeOut(request.auth).data)


class AgentEarningsApi(APIView):
    """The earnings of the operator who owns this node (all their nodes together), read-only:
    what the agent's `status` shows its owner."""

    permission_classes = [IsAgent]

    @extend_schema(
        parameters=[AgentEarningsQuery],
        responses=AgentEarningsOut,
        summary="The node owner's earnings: today, in all, pending cashout",
    )
    def get(self, request: Request) -> Response:
        offset = timedelta(
            minutes=validated(AgentEarningsQuery, request.query_params)["utc_offset_min"]
        )
        local = datetime.now(UTC) + offset
        since = local.replace(hour=0, minute=0, second=0, microsecond=0) - offset
        figures = dataclasses.asdict(
            earnings_summary(user_id=request.auth.operator_id, since=since)
        )
        out: dict = {"since": since}
        out.update({f"{name}_minor": value for name, value in figures.items()})
        out.update({name: format_minor(value) for name, value in figures.items()})
        return Response(AgentEarningsOut(out).data)


class AgentHeartbeatApi(APIView):
    permission_classes = [IsAgent]

    @extend_schema(request=Heartbeat, responses=HeartbeatOut, summary="Agent heartbeat")
    def post(self, request: Request) -> Response:
        body = model_validated(Heartbeat, request.data)
        node = request.auth
        # The region prices the node's work and picks its spot market: it is set at
        # registration, and a heartbeat that names another is refused rather than ignored.
        if body["region"] is not None and body["region"] != node.region:
            registered = node.region or "no region"
            raise ValidationError(
                {"region": [f"this node registered in {registered}; a heartbeat cannot move it"]}
            )
        if body["capabilities"] is not None:
            try:
                body["capabilities"] = validated(CapabilitiesIn, body["capabilities"])
            except ValidationError as exc:
                raise ValidationError({"capabilities": exc.detail}) from None
        reply = node_heartbeat(
            node=node,
            status=body["status"],
            load=body["load"],
            gpus=body["gpus"],
            lease_tokens=body["leases"],
            capabilities=body["capabilities"],
        )
        # The reply is plain values already (HeartbeatOut documents it): every agent sends
        # this request, so it is not run through a serializer again.
        return Response(dataclasses.asdict(reply))
