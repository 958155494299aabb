"""A PostgreSQL cluster of a test's own, which the test may stop, crash and start at will.

The machine's server is shared with other suites, so a test that restarts PostgreSQL runs its
own: `initdb` into a temporary directory (as the `postgres` OS user when run as root, since
initdb refuses root), a free port on 127.0.0.1, its unix socket in that directory, fsync off
(nothing in it outlives the test). The server's own output goes to a log file of the caller's
choosing, which the live stack attaches to a failed test's report. Every command has a time
limit; `destroy` stops the server (killing the postmaster by its pid if pg_ctl cannot) and
removes the directory, and `sweep_orphans` does the same for clusters whose maker was killed
before it could (each directory names its maker's pid and start time).
"""

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_CTL_TIMEOUT_S = 60
PREFIX = "computepool-pg-"
OWNER = "owner"  # in a cluster's directory: "<pid> <start time>" of the process that made it


def find_bindir() -> Path | None:
    """Where initdb and pg_ctl are: $PG_BINDIR, then PATH, then `pg_config --bindir`, then the
    newest /usr/lib/postgresql/<major>/bin (Debian keeps them off PATH), then the embedded
    PostgreSQL's own (a machine with no system server)."""
    candidates = []
    if os.environ.get("PG_BINDIR"):
        candidates.append(Path(os.environ["PG_BINDIR"]))
    if shutil.which("pg_ctl"):  # often a link into the version's own directory
        candidates.append(Path(shutil.which("pg_ctl")).resolve().parent)
    if shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                ["pg_config", "--bindir"], capture_output=True, text=True, timeout=10
            )
            candidates.append(Path(out.stdout.strip()))

    def major(path: Path) -> int:
        return int(path.parent.name) if path.parent.name.isdigit() else 0

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=major, reverse=True)
    with contextlib.suppress(ImportError):
        from computepool.embedded_db import _bindir

        candidates.append(_bindir())
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _started(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), or None if there is none: with the
    pid, it names one process, even after the pid is reused."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _postmaster(data: Path) -> int | None:
    """The pid of the server running on `data`, if one does (its command line names it)."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return None
    return pid if str(data).encode() in cmdline else None


def sweep_orphans() -> None:
    """Stop and remove the clusters of test runs that were killed outright (their maker is
    gone, so their own clean-up never ran); a running test's cluster is left alone."""
    for root in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            pid, started = (root / OWNER).read_text().split()
        except (OSError, ValueError):
            continue
        if _started(int(pid)) == started:
            continue
        server = _postmaster(root / "data")
        if server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server, signal.SIGQUIT)  # immediate shutdown
            time.sleep(1)
        shutil.rmtree(root, ignore_errors=True)


class PrivateCluster:
    def __init__(self, bindir: Path, log: Path, *, superuser: str = "postgres") -> None:
        self.bindir, self.log, self.superuser = bindir, log, superuser
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX))
        (self.root / OWNER).write_text(f"{os.getpid()} {_started(os.getpid())}")
        self.data = self.root / "data"
        self.host, self.port = "127.0.0.1", 0
        self.setup_s = 0.0  # initdb to a migrated database, for reports
        # initdb and the server refuse to run as root: they run as the postgres OS user (or,
        # with no system server, the embedded server's own), who then owns the directory.
        self._as: list[str] = []
        if os.geteuid() == 0:
            owner = None
            for name in ("postgres", "embedded_postgres"):
                with contextlib.suppress(KeyError):
                    owner = owner or pwd.getpwnam(name)
            if owner is None:
                shutil.rmtree(self.root)
                raise RuntimeError("initdb refuses root, and there is no postgres user")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", owner.pw_name, "--"]

    def _run(self, tool: str, *args: str, timeout: float = PG_CTL_TIMEOUT_S + 30) -> None:
        """Run a PostgreSQL tool with its output appended to the log: a server it starts keeps
        that file (never a pipe, which would hold the call open as long as the server runs)."""
        with self.log.open("ab") as out:
            out.write(f"\n== {tool} {' '.join(args)}\n".encode())
            out.flush()
            done = subprocess.run(
                [*self._as, str(self.bindir / tool), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {args[-1]} failed ({done.returncode}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def create(self) -> None:
        """initdb, then start on a free port (another, if someone took it meanwhile)."""
        self._run(
            "initdb",
            *("-D", str(self.data), "-U", self.superuser, "--auth=trust"),
            *("-E", "UTF8", "--no-locale", "--no-sync"),
        )
        for tries_left in range(2, -1, -1):
            self.port = free_port()
            conf = self.data / "postgresql.auto.conf"
            conf.write_text(
                f"listen_addresses = '{self.host}'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.root}'\n"
                "fsync = off\nfull_page_writes = off\nmax_connections = 100\n"
            )
            try:
                self.start()
                return
            except RuntimeError:
                if tries_left == 0 or "could not bind" not in self.log_tail():
                    raise

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(PG_CTL_TIMEOUT_S), "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast`: clients disconnected, a clean shutdown; `immediate`: a crash, recovered from
        the WAL on the next start."""
        args = ("-D", str(self.data), "-w", "-t", str(PG_CTL_TIMEOUT_S), "-m", mode, "stop")
        self._run("pg_ctl", *args)

    def restart(self, mode: str = "fast") -> None:
        args = ("-D", str(self.data), "-w", "-t", str(PG_CTL_TIMEOUT_S), "-m", mode, "restart")
        self._run("pg_ctl", *args)

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(
            host=self.host,
            port=self.port,
            user=self.superuser,
            dbname="postgres",
            autocommit=True,
            connect_timeout=10,
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def destroy(self) -> None:
        """Stop the server however it can be stopped, then remove everything."""
        if (self.data / "postmaster.pid").exists():
            try:
                self.stop("immediate")
            except (RuntimeError, subprocess.TimeoutExpired):
                server = _postmaster(self.data)
                if server is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(server, signal.SIGKILL)
                    time.sleep(1)  # its backends exit once the postmaster is gone
        shutil.rmtree(self.root, ignore_errors=True)
