"""The claim's plan as PostgreSQL runs it in production (diagnostics: the tests, bench.scale).

psycopg prepares a statement once it has run `prepare_threshold` times on a connection, and
PostgreSQL then plans it once, without the call's values (its generic plan), and keeps that
plan while its estimate is no worse than planning each call for its values. An EXPLAIN of the
statement with its values shows the other plan, the one built for each call; this shows the
one that runs.
"""

import re

from django.db import connection
from django.utils import timezone
from psycopg import ClientCursor
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer
from psycopg.pq import TransactionStatus

from jobs.claim import claim_statement
from jobs.node_profile import NodeProfile

_PROBE = "claim_plan_probe"
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def claim_generic_plan(profile: NodeProfile, *, analyze: bool = False) -> str:
    """EXPLAIN (with `analyze`, EXPLAIN ANALYZE, BUFFERS) of this node's claim under its generic
    plan. PostgreSQL only; call it inside a transaction that is then rolled back (it sets
    `plan_cache_mode` for the transaction, and with `analyze` it leases a task)."""
    sql, params, _ = claim_statement(profile, timezone.now())
    raw = connection.connection
    # The statement exactly as psycopg sends it: its $n text and the parameter types it binds
    # (an integer's type follows its value), prepared under a name of our own.
    query = PostgresQuery(Transformer(raw))
    query.convert(sql, params)
    # psycopg leaves strings untyped (0) for the server to infer; PREPARE says so as `unknown`.
    types = raw.execute(
        "SELECT CASE WHEN oid = 0 THEN 'unknown' ELSE oid::regtype::text END "
        "FROM unnest(%s::oid[]) WITH ORDINALITY AS t(oid, n) ORDER BY n",
        [list(query.types)],
    )
    signature = ", ".join(row[0] for row in types.fetchall())
    raw.execute(f"PREPARE {_PROBE} ({signature}) AS {query.query.decode()}")
    try:
        raw.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        # The values as literals, in the order psycopg numbers them (first appearance).
        names = list(dict.fromkeys(_PLACEHOLDER.findall(sql)))
        holes = ", ".join(["%s"] * len(names))
        options = "(ANALYZE, BUFFERS) " if analyze else ""
        cursor = ClientCursor(raw)
        cursor.execute(f"EXPLAIN {options}EXECUTE {_PROBE}({holes})", [params[n] for n in names])
        return "\n".join(row[0] for row in cursor.fetchall())
    finally:
        if raw.info.transaction_status != TransactionStatus.INERROR:
            raw.execute(f"DEALLOCATE {_PROBE}")
