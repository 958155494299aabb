"""Agent keys (cpa_…): one indexed lookup (the key's hash, then the node by id) that yields the
node's operator and the node.

Registered with people.auth from NodesConfig.ready. request.auth is the Node: it has no `role`,
so the role permissions give it none, and an agent key can reach only the agent endpoints,
which act on request.auth and take no node id from the request.
"""

import threading
from typing import Any

from django.db import connection
from django.utils.functional import SimpleLazyObject
from rest_framework.permissions import BasePermission

from nodes.models import Node
from people.keys import hash_key

# Stands in for the key's hash while the ORM writes the statement; found again in its params.
_PLACEHOLDER = "\x00agent-key-hash\x00"
_prepared: dict[str, tuple[str, list[Any], int, list[str], list]] = {}
_prepared_lock = threading.Lock()


def _statement() -> tuple[str, list[Any], int, list[str], list]:
    """The lookup's SQL, parameters and row converters, built by the ORM once per database.

    Every agent request runs this lookup; building the query anew each time cost about as much
    as the rest of a trivial request (benchmarks §7). The row is still converted and the Node
    still made exactly as the ORM would (`from_db`), so nothing downstream can tell.
    """
    found = _prepared.get(connection.alias)
    if found is not None:
        return found
    with _prepared_lock:
        query = Node.objects.filter(
            agent_key__key_hash=_PLACEHOLDER, key_revoked_at__isnull=True, operator__is_active=True
        )[:1].query
        # No join of the operator's columns (it is loaded only if something reads
        # request.user) and no ORDER BY (the hash is unique).
        compiler = query.get_compiler(connection.alias)
        sql, params = compiler.as_sql()
        params = list(params)
        columns = [col for col, _, _ in compiler.select]
        names = [col.target.attname for col in columns]
        converters = list(compiler.get_converters(columns).items())
        found = (sql, params, params.index(_PLACEHOLDER), names, converters)
        _prepared[connection.alias] = found
    return found


def resolve_agent_key(key: str) -> tuple[Any, Node] | None:
    sql, params, at, names, converters = _statement()
    params = params.copy()
    params[at] = hash_key(key)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    if converters:
        row = list(row)
        for i, (functions, expression) in converters:
            for convert in functions:
                row[i] = convert(row[i], expression, connection)
    node = Node.from_db(connection.alias, names, row)
    return SimpleLazyObject(lambda: node.operator), node


class IsAgent(BasePermission):
    message = "This needs an agent key."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Node)
