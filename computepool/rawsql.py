"""Hand-written SQL for the hot path, with values made what the ORM would make of them.

The ORM builds every statement anew per call; on the requests every agent makes (claim,
complete, heartbeat) that building cost more than the database's work (docs/benchmarks.md §7).
These helpers run fixed statements instead, and convert values the way the ORM does.
"""

from typing import Any

from django.db import connection, models
from psycopg import sql

# A subquery that turns off the wait for the WAL's flush for the transaction of the statement
# that holds it, and no further (`set_config(…, true)`): written into a statement that is its
# own transaction (`commits_alone`), so that it commits without that wait.
LAZY_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true))"


def commits_alone() -> bool:
    """Whether a statement run now is its own transaction: never a caller's
    (atomic, or autocommit off), whose other writes did not agree to a lazy commit."""
    return connection.get_autocommit() and not connection.in_atomic_block


_insert_selects: dict[tuple, tuple[str, str, list[tuple[str, models.Field]]]] = {}


def insert_select_lists(
    model: type[models.Model], *, name: str, exprs: dict[str, str], values: dict[str, Any]
) -> tuple[str, str, dict[str, Any]]:
    """The column list and the select list of `INSERT INTO <table> (…) SELECT … FROM <source>`
    (PostgreSQL), keyed by column: the columns in `exprs` take SQL expressions over the source
    (a row the same statement produced), those in `values` the given values as named
    parameters prefixed by `name` (prepared as the field prepares them), and every other column
    its field's default, as `save()` stores a field left unset, written into the SQL as a
    literal: psycopg converts each parameter anew on every call. The lists are built once per
    model, name, expressions and valued columns; each call prepares only the values. A column
    whose default is not one fixed value (a callable, `auto_now`) must be in one of the two."""
    key = (model, name, tuple(sorted(exprs.items())), tuple(sorted(values)))
    built = _insert_selects.get(key)
    if built is None:
        built = _insert_selects[key] = _insert_select(model, name, exprs, set(values))
    columns, select, valued = built
    params = {
        f"{name}_{column}": field.get_db_prep_save(values[column], connection)
        for column, field in valued
    }
    return columns, select, params


def _insert_select(
    model: type[models.Model], name: str, exprs: dict[str, str], valued: set[str]
) -> tuple[str, str, list[tuple[str, models.Field]]]:
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    unknown = (set(exprs) | valued) - {f.column for f in fields}
    if unknown:
        raise ValueError(f"{model.__name__} has no column {', '.join(sorted(unknown))}")
    connection.ensure_connection()
    columns, select, params = [], [], []
    for field in fields:
        columns.append(connection.ops.quote_name(field.column))
        if field.column in exprs:
            select.append(exprs[field.column])
        elif field.column in valued:
            params.append((field.column, field))
            select.append(f"%({name}_{field.column})s")
        elif (
            (field.has_default() and callable(field.default))
            or getattr(field, "auto_now", False)
            or getattr(field, "auto_now_add", False)
        ):
            raise ValueError(f"{model.__name__}.{field.name} has no fixed default: give it")
        else:
            value = field.get_db_prep_save(field.get_default(), connection)
            # `%` doubled: the statement has parameters, so psycopg reads the text for them.
            literal = sql.Literal(value).as_string(connection.connection).replace("%", "%%")
            select.append(literal)
    return ", ".join(columns), ", ".join(select), params
