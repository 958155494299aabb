"""Agent keys (cpa_…): one indexed lookup (the key's hash, then the node by id) that yields the
node's operator and the node.

Registered with people.auth from NodesConfig.ready. request.auth is the Node: it has no `role`,
so the role permissions give it none, and an agent key can reach only the agent endpoints,
which act on request.auth and take no node id from the request.
"""

from typing import Any

from django.utils.functional import SimpleLazyObject
from rest_framework.permissions import BasePermission

from core.sql import statement
from nodes.models import Node
from people.keys import hash_key


def resolve_agent_key(key: str) -> tuple[Any, Node] | None:
    # A static statement, not a queryset: every agent request runs this lookup, and building
    # the filtered query anew each time cost the hub about as much CPU as the rest of a small
    # request. Node.objects.raw still makes the Node as the ORM does (converters, from_db).
    node = next(iter(Node.objects.raw(statement("nodes", "agent_key_node"), [hash_key(key)])), None)
    if node is None:
        return None
    # The operator's row is read only if something reads request.user.
    return SimpleLazyObject(lambda: node.operator), node


class IsAgent(BasePermission):
    message = "This needs an agent key."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Node)
