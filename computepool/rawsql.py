"""Hand-written SQL for the hot path, with values made what the ORM would make of them.

The ORM builds every statement anew per call; on the requests every agent makes (claim,
complete, heartbeat) that building cost more than the database's work (docs/benchmarks.md §7).
These helpers run fixed statements instead, and convert values the way the ORM does, so the
rows are the same on PostgreSQL and on SQLite (the embedded default).
"""

from datetime import UTC, datetime
from typing import Any

from django.db import connection, models
from django.utils.dateparse import parse_datetime

_inserts: dict[tuple[type[models.Model], str], tuple[str, list[models.Field]]] = {}


def db_datetime(value: datetime | str | None) -> datetime | None:
    """PostgreSQL hands back aware datetimes; SQLite hands back the ORM's naive UTC text."""
    if value is None or (isinstance(value, datetime) and value.tzinfo is not None):
        return value
    parsed = parse_datetime(value) if isinstance(value, str) else value
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def db_param(value: Any) -> Any:
    """A datetime as the backend stores it (SQLite: naive UTC text); anything else as is."""
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def insert_row(instance: models.Model) -> None:
    """INSERT `instance` as `save(force_insert=True)` would (every concrete field, defaults and
    `pre_save` applied, values prepared by the fields), without signals; sets its primary key."""
    model = type(instance)
    key = (model, connection.vendor)
    if key not in _inserts:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        table = connection.ops.quote_name(model._meta.db_table)
        pk = connection.ops.quote_name(model._meta.pk.column)
        _inserts[key] = (
            f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))}) "  # noqa: S608
            f"RETURNING {pk}",
            fields,
        )
    sql, fields = _inserts[key]
    params = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        instance.pk = cursor.fetchone()[0]
    instance._state.adding = False
    instance._state.db = connection.alias


_insert_selects: dict[tuple, tuple[str, str, list[tuple[str, models.Field]]]] = {}


def insert_select_lists(
    instance: models.Model, *, name: str, exprs: dict[str, str]
) -> tuple[str, str, dict[str, Any]]:
    """The column list and the select list of `INSERT INTO <table> (…) SELECT … FROM <source>`
    for `instance`, as `insert_row` would write it, except that the columns in `exprs` take SQL
    expressions over the source (a row the same statement produced). Named parameters, prefixed
    by `name`, so the lists fit a statement with other named parameters (PostgreSQL). The lists
    are built once per model, name and expressions; each call prepares only the values."""
    model = type(instance)
    key = (model, name, tuple(sorted(exprs.items())), connection.vendor)
    if key not in _insert_selects:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        columns, values, valued = [], [], []
        for i, field in enumerate(fields):
            columns.append(connection.ops.quote_name(field.column))
            if field.column in exprs:
                values.append(exprs[field.column])
            else:
                valued.append((f"{name}_{i}", field))
                values.append(f"%({name}_{i})s")
        _insert_selects[key] = (", ".join(columns), ", ".join(values), valued)
    columns, values, valued = _insert_selects[key]
    params = {
        param: field.get_db_prep_save(field.pre_save(instance, True), connection)
        for param, field in valued
    }
    return columns, values, params
