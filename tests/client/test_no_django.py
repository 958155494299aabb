"""The client is installed where the hub is not: it must import nothing of it, nor Django."""

import subprocess
import sys

from tests.client.conftest import CLIENT_SRC

CHECK = """
import pkgutil, sys
sys.modules["django"] = None  # any import of Django now fails
import computepool_client
for module in pkgutil.walk_packages(computepool_client.__path__, "computepool_client."):
    if not module.name.endswith("__main__"):  # that one runs the command
        __import__(module.name)
hub = ("django", "rest_framework", "computepool", "core", "jobs", "ledger", "nodes", "agent")
loaded = sorted(n for n in sys.modules if n.split(".")[0] in hub and sys.modules[n] is not None)
print(loaded)
"""


def test_the_client_imports_nothing_of_the_hub():
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(CLIENT_SRC)!r}){CHECK}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
