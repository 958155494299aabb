"""Agent keys (cpa_…): one indexed lookup (the key's hash, then the node by id) that yields the
node's operator and the node.

Registered with people.auth from NodesConfig.ready. request.auth is the Node: it has no `role`,
so the role permissions give it none, and an agent key can reach only the agent endpoints,
which act on request.auth and take no node id from the request.
"""

from collections.abc import Callable
from functools import cache
from typing import Any

from django.db import connection
from django.utils.functional import SimpleLazyObject
from rest_framework.permissions import BasePermission

from core.sql import statement
from nodes.models import Node
from people.keys import hash_key

_FIELDS = Node._meta.concrete_fields
_NAMES = [field.attname for field in _FIELDS]


@cache
def _row_plan(columns: tuple[bytes, ...]) -> list[tuple[int, Callable[[Any], Any] | None]]:
    """For each of the model's fields, in its order: where the statement's row has its column
    (`columns`: the names as the server sends them, in bytes),
    and how the field turns the database's value into its own (`from_db_value`: JSON), if it
    does."""
    plan = []
    for field in _FIELDS:
        convert = getattr(field, "from_db_value", None)
        plan.append(
            (
                columns.index(field.column.encode()),
                (lambda value, c=convert: c(value, None, connection)) if convert else None,
            )
        )
    return plan


def resolve_agent_key(key: str) -> tuple[Any, Node] | None:
    # A static statement and Model.from_db, not a queryset or a raw one: every agent request
    # runs this lookup, and building the filtered query anew each time cost the hub about as
    # much CPU as the rest of a small request (a raw queryset, a third of that). The Node is
    # made as the ORM makes one: each field's conversion from the database, then from_db.
    with connection.cursor() as cursor:
        cursor.execute(statement("nodes", "agent_key_node"), [hash_key(key)])
        row = cursor.fetchone()
        if row is None:
            return None
        # The columns' names straight from the result: psycopg's `description` builds an object
        # per column, about ten times the cost, on a path every agent request takes.
        result = cursor.pgresult
        plan = _row_plan(tuple(result.fname(i) for i in range(result.nfields)))
    values = [row[i] if convert is None else convert(row[i]) for i, convert in plan]
    node = Node.from_db(connection.alias, _NAMES, values)
    # The operator's row is read only if something reads request.user.
    return SimpleLazyObject(lambda: node.operator), node


class IsAgent(BasePermission):
    message = "This needs an agent key."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Node)
