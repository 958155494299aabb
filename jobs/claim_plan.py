"""The claim's plan as PostgreSQL runs it in production (diagnostics: the tests, bench.scale).

psycopg prepares a statement once it has run a few times on a connection (`prepare_threshold`),
and PostgreSQL then plans it once, without the call's values (its generic plan), and keeps that
plan while its estimate is no worse than planning each call for its values. An EXPLAIN of the
statement with its values shows the other plan, the one built for each call; this shows the
one that runs.
"""

import re

import psycopg
from django.db import connection
from django.utils import timezone

from jobs.claim import claim_statement
from jobs.node_profile import NodeProfile

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def claim_generic_plan(profile: NodeProfile, *, analyze: bool = False) -> str:
    """EXPLAIN (with `analyze`, EXPLAIN ANALYZE, BUFFERS) of this node's claim under its generic
    plan. PostgreSQL only. It prepares the statement by running it, so it leases a task (two
    with `analyze`): call it inside a transaction that is then rolled back."""
    sql, params, _ = claim_statement(profile, timezone.now())
    raw = connection.connection
    raw.execute(sql, params, prepare=True)
    # psycopg numbers named placeholders in the order they first appear.
    names = list(dict.fromkeys(_PLACEHOLDER.findall(sql)))
    number = {n: f"${i}" for i, n in enumerate(names, 1)}
    text = _PLACEHOLDER.sub(lambda m: number[m.group(1)], sql).replace("%%", "%")
    row = raw.execute("SELECT name FROM pg_prepared_statements WHERE statement = %s", [text])
    (name,) = row.fetchone() or (None,)
    if name is None:
        raise LookupError("the claim is not among this connection's prepared statements")
    _, fresh, _ = claim_statement(profile, timezone.now())  # a lease token of its own
    options = "(ANALYZE, BUFFERS) " if analyze else ""
    holes = ", ".join(["%s"] * len(names))
    raw.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    try:
        cursor = psycopg.ClientCursor(raw)
        cursor.execute(f"EXPLAIN {options}EXECUTE {name}({holes})", [fresh[n] for n in names])
        return "\n".join(row[0] for row in cursor.fetchall())
    finally:
        raw.execute("SET LOCAL plan_cache_mode = auto")
