"""Agent keys (cpa_…): one indexed lookup that yields the node's operator and the node.

Registered with people.auth from NodesConfig.ready. request.auth is the Node: it has no `role`,
so the role permissions give it none, and an agent key can reach only the agent endpoints,
which act on request.auth and take no node id from the request.
"""

from typing import Any

from rest_framework.permissions import BasePermission

from nodes.models import Node
from people.keys import hash_key


def resolve_agent_key(key: str) -> tuple[Any, Node] | None:
    node = (
        Node.objects.select_related("operator")
        .filter(agent_key_hash=hash_key(key), key_revoked_at__isnull=True, operator__is_active=True)
        .first()
    )
    return (node.operator, node) if node is not None else None


class IsAgent(BasePermission):
    message = "This needs an agent key."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Node)
