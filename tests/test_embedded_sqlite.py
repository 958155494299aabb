"""The embedded default: several processes writing one SQLite file, as the demo's hub, worker
and beat do, never hit "database is locked", and the books still verify."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WRITER = """
import os, sys
sys.path.insert(0, os.getcwd())
import django
django.setup()
from django.db import transaction
from ledger.chain import chain_seal
from ledger.services import account_open, transfer
with transaction.atomic():
    funding = account_open(code="external:funding", kind="funding")
    mine = account_open(code=f"writer:{sys.argv[1]}", kind="available")
for i in range(40):
    transfer(source=funding, destination=mine, amount=i + 1, actor="writer")
    if i % 10 == 0:
        chain_seal()
"""


def run(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_writers_share_the_sqlite_file(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"}
    }
    env.update(
        {
            "COMPUTEPOOL_VAR_DIR": str(tmp_path),
            "DEBUG": "1",
            "DJANGO_SETTINGS_MODULE": "computepool.settings",
        }
    )
    migrate = run(["manage.py", "migrate", "--noinput"], env)
    assert migrate.wait(120) == 0, migrate.stderr.read()
    writers = [run(["-c", WRITER, str(i)], env) for i in range(3)]
    for writer in writers:
        assert writer.wait(120) == 0, writer.stderr.read()
    seal = run(["manage.py", "seal_ledger"], env)
    assert seal.wait(60) == 0, seal.stderr.read()
    verify = run(["manage.py", "verify_ledger"], env)
    assert verify.wait(60) == 0, verify.stderr.read()
    out = verify.stdout.read()
    # 3 writers x (2 accounts opened, one deduplicated funding, 40 transfers) = at least 120 + 4.
    assert "ledger OK" in out
    events = int(out.split("ledger OK: ")[1].split(" events")[0])
    assert events >= 3 * 40 + 4
