"""Instructions an idle node's heartbeat runs in the hub's process, by part, counted by Valgrind's
callgrind: the same count on every run, where this machine's timings of one request swing by a
tenth or more between runs (the steal of a shared host). A change to the hot path that moves the
count by a few per cent shows here at once; a timing would need many alternating pairs.

The parts: the whole request through the WSGI application as gunicorn calls it (a pooled connection
taken and handed back, middleware, DRF, the parts below, the response; not gunicorn's own parsing
of HTTP), the URL resolution, the agent key's lookup (the node's row), the body's JSON parse and
check, and the liveness service's write. Counted twice by default: as a WSGI hub process runs
(which is what serves heartbeats), and with the objects loaded at start-up frozen out of the
garbage collector's reach, as an ASGI one runs (core.long_lived): what the freeze would save a
heartbeat. Each part's count is the mean of `--beats` calls; what the measurement itself costs
(callgrind_control's dump) is subtracted.

Needs `valgrind` (Debian's package) on PATH; the process runs some fifty times slower under it,
so a run takes a few minutes.

    .venv/bin/python -m bench.instructions [--beats 200] [--wsgi-only]
"""

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from wsgiref.util import setup_testing_defaults

from bench import common

PARTS = ("request", "URL resolution", "agent key lookup", "body parse and check", "liveness write")
_DUMP = re.compile(r"^desc: Trigger: dump (\S+)|^summary: (\d+)", re.M)


def _dump(label: str) -> None:
    """Ask callgrind to write the counts since the previous dump, labelled (waits until done)."""
    subprocess.run(
        ["callgrind_control", "-d", label, str(os.getpid())], check=True, capture_output=True
    )


def _child(beats: int, frozen: bool) -> None:
    """Runs under callgrind: each part `beats` times, a dump after each."""
    import gc

    db = common.create_db("instructions_frozen" if frozen else "instructions")
    try:
        # Connections from a pool, as the bench's hub (and a deployed one) takes them.
        os.environ["DB_POOL_MAX_SIZE"] = "8"
        common.django_setup(db)
        _, keys = common.seed_nodes(8, operator_ids=common.operators(1))
        common.close_django_connections()
        from django.core.wsgi import get_wsgi_application
        from django.urls import resolve

        from core.api.bodies import model_validated
        from core.long_lived import load_views
        from nodes.auth import resolve_agent_key
        from nodes.heartbeat import Heartbeat
        from nodes.services.liveness import node_heartbeat

        application = get_wsgi_application()
        raw = json.dumps(common.HEARTBEAT_BODY)
        node = resolve_agent_key(keys[0])[1]
        body = model_validated(Heartbeat, json.loads(raw))
        beat = {name: body[name] for name in ("status", "load", "gpus", "capabilities")}
        beat["lease_tokens"] = body["leases"]
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/api/v1/agent/heartbeat",
            "HTTP_AUTHORIZATION": f"Bearer {keys[0]}",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(raw)),
        }
        setup_testing_defaults(environ)  # the rest of what a WSGI server sets

        def request() -> None:
            # The WSGI application as gunicorn calls it: the request's signals (the database
            # connection taken from the pool and handed back) and middleware included.
            status: list[str] = []
            answer = b"".join(
                application(
                    {**environ, "wsgi.input": io.BytesIO(raw.encode())},
                    lambda line, headers, exc_info=None: status.append(line),
                )
            )
            if not status[0].startswith("200"):
                raise RuntimeError(f"heartbeat: {status[0]} {answer[:200]!r}")

        parts = {
            "request": request,
            "URL resolution": lambda: resolve("/api/v1/agent/heartbeat"),
            "agent key lookup": lambda: resolve_agent_key(keys[0]),
            "body parse and check": lambda: model_validated(Heartbeat, json.loads(raw)),
            "liveness write": lambda: node_heartbeat(node=node, **beat),
            "nothing": lambda: None,  # the dump's own cost, subtracted from each part
        }
        load_views()
        for call in parts.values():  # warm: imports, prepared statements, caches
            for _ in range(20):
                call()
        if frozen:  # as core.long_lived.freeze_loaded does, after loading the views
            gc.collect()
            gc.freeze()
        _dump("start")
        for name, call in parts.items():
            for _ in range(beats):
                call()
            _dump(name.replace(" ", "_"))
        common.close_django_connections()
    finally:
        common.drop_db(db)


def _start(beats: int, frozen: bool, out: str) -> subprocess.Popen:
    argv = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p",
        sys.executable, "-m", "bench.instructions", "--child", "--beats", str(beats),
    ]  # fmt: skip
    if frozen:
        argv.append("--frozen")
    return subprocess.Popen(
        argv, cwd=common.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _counts(proc: subprocess.Popen, beats: int, out: str) -> dict[str, float]:
    _, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the run under callgrind failed:\n{stderr[-3000:]}")
    counts: dict[str, int] = {}
    for dump in Path(out).glob("cg.*.*"):
        label, total = None, None
        for match in _DUMP.finditer(dump.read_text(errors="replace")):
            label = match.group(1) or label
            total = int(match.group(2)) if match.group(2) else total
        if label and total is not None:
            counts[label.replace("_", " ")] = total
    missing = [p for p in (*PARTS, "nothing") if p not in counts]
    if missing:
        raise SystemExit(f"callgrind wrote no count for {', '.join(missing)}")
    return {p: (counts[p] - counts["nothing"]) / beats for p in PARTS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beats", type=int, default=200, help="calls of each part")
    parser.add_argument("--wsgi-only", action="store_true", help="only as a WSGI hub runs")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--frozen", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.beats, args.frozen)
        return
    for command in ("valgrind", "callgrind_control"):
        if shutil.which(command) is None:
            raise SystemExit(f"{command} is not on PATH: install Debian's valgrind package")
    common.banner("an idle heartbeat's instructions in the hub's process, by part (callgrind)")
    common.ensure_template()
    modes = [False] if args.wsgi_only else [False, True]
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        # Both modes at once, one on each core: the counts do not depend on what else runs.
        outs = {frozen: Path(tmp, str(frozen)) for frozen in modes}
        for out in outs.values():
            out.mkdir()
        procs = {frozen: _start(args.beats, frozen, str(outs[frozen])) for frozen in modes}
        figures = {
            frozen: _counts(procs[frozen], args.beats, str(outs[frozen])) for frozen in modes
        }
    rows = []
    for part in PARTS:
        row = [part, f"{figures[False][part] / 1000:,.0f}"]
        if True in figures:
            frozen = figures[True][part]
            row += [f"{frozen / 1000:,.0f}", f"{100 * (frozen / figures[False][part] - 1):+.1f}%"]
        rows.append(row)
    header = ["part", "thousand instructions (as a WSGI hub)"]
    if True in figures:
        header += ["loaded objects frozen", "frozen ÷ not"]
    common.table(rows, header)
    print(
        f"  mean of {args.beats} calls of each part; the request includes the four parts below it"
    )


if __name__ == "__main__":
    main()
