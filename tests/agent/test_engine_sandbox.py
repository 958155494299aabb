"""The engine's process runs as jobs do: no network, and nothing of the machine to see beyond
/usr, the interpreter and this code (bubblewrap; CI requires it with REQUIRE_BWRAP=1)."""

import subprocess
import sys
from pathlib import Path

from agent.sandbox.own_code import sandboxed

PROBE = """
import os, socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    print("network: reached")
except OSError as exc:
    print("network: refused", type(exc).__name__)
print("root:", " ".join(sorted(os.listdir("/"))))
print("etc:", " ".join(sorted(os.listdir("/etc"))))
print("uid", os.getuid())
import llama_cpp
print("engine: imports")
"""


def test_the_engine_process_has_no_network_and_sees_little(bwrap):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    argv, env = sandboxed([sys.executable, "-c", PROBE, str(port)], memory_mb=2048, gpu=False)
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("network: refused")
    # The top of the tree: the system's, plus where the interpreter and this code live.
    roots = {Path(p).parts[1] for p in (sys.base_prefix, sys.prefix, __file__)}
    system = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc", "tmp"}
    assert set(lines[1].removeprefix("root: ").split()) <= system | roots
    assert set(lines[2].removeprefix("etc: ").split()) <= {
        "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    }  # fmt: skip
    assert "uid 65534" in lines and "engine: imports" in lines
