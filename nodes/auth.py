"""Agent keys (cpa_…): one indexed lookup that yields the node's operator and the node.

Registered with people.auth from NodesConfig.ready. request.auth is the Node: it has no `role`,
so the role permissions give it none, and an agent key can reach only the agent endpoints,
which act on request.auth and take no node id from the request.
"""

from typing import Any

from django.utils.functional import SimpleLazyObject
from rest_framework.permissions import BasePermission

from nodes.models import Node
from people.keys import hash_key


def resolve_agent_key(key: str) -> tuple[Any, Node] | None:
    # The hot path of every agent request: no join of the operator's columns (the operator is
    # loaded only if something reads request.user) and no ORDER BY (the hash is unique).
    found = list(
        Node.objects.filter(
            agent_key_hash=hash_key(key), key_revoked_at__isnull=True, operator__is_active=True
        )[:1]
    )
    if not found:
        return None
    node = found[0]
    return SimpleLazyObject(lambda: node.operator), node


class IsAgent(BasePermission):
    message = "This needs an agent key."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Node)
