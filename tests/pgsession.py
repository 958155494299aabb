"""Reading and changing the test connection's PostgreSQL settings."""

from django.db import connection


def setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


def sql(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)
