"""Static SQL with a home: each app keeps its statements that are not plain ORM as named files,
`<app>/sql/<name>.sql`, each opening with a comment on what it guarantees (what it locks, in
which order, what fences it). `statement(app, name)` reads one once per process and hands back
its text.

The text sent is the file's without its comment lines (`--` at a line's start) and with every
run of whitespace made one space: a statement's text must stay within what psycopg caches
(4096 characters) however it is laid out and commented. So a statement file holds no string
literal whose whitespace matters, and no comment after code on a line.
"""

import re
from functools import cache
from pathlib import Path

from django.db import connection

_ROOT = Path(__file__).resolve().parent.parent


# A line `\i <name>` stands for the text of `<app>/sql/<name>.sql` (psql's include), so that a
# part several statements share (the claim's gates) is written once.
_INCLUDE = re.compile(r"\s*\\i\s+(\w+)\s*")


@cache
def statement(app: str, name: str) -> str:
    """The text of `<app>/sql/<name>.sql`, its `\\i` lines replaced by the parts they name,
    read once."""
    text = (_ROOT / app / "sql" / f"{name}.sql").read_text()
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith("--"):
            continue
        included = _INCLUDE.fullmatch(line)
        lines.append(statement(app, included.group(1)) if included else line)
    return " ".join(" ".join(lines).split())


def commits_alone() -> bool:
    """Whether a statement run now is its own transaction: never a caller's (atomic, or
    autocommit off), whose other writes did not agree to a lazy commit. A statement that may
    commit lazily passes it to `commit_lazily` (core/sql/commit_lazily.sql)."""
    return connection.get_autocommit() and not connection.in_atomic_block
