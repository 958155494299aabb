"""A dishonest operator's agent, for the end-to-end tests of verification: the real agent
(`python -m agent`), changed as such an operator would change it. It claims and runs its tasks
in its real sandbox like any other, then reports random bytes for every output file, with exit
code 0 and the checksums of those bytes: what a node that skips the work and invents a result
sends. Run as `python -m tests.e2e.cheating_agent <agent arguments>`."""

import hashlib
import os
import sys

from agent import runner
from agent.cli import main

_honest_complete = runner.TaskRunner._complete


def _complete(self, claim, result, *args, **kwargs):
    for output in result.outputs:
        invented = os.urandom(64)
        output.path.write_bytes(invented)
        output.size, output.sha256 = len(invented), hashlib.sha256(invented).hexdigest()
    return _honest_complete(self, claim, result, *args, **kwargs)


runner.TaskRunner._complete = _complete

if __name__ == "__main__":
    sys.exit(main())
