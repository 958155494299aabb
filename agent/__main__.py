"""`python -m agent`: the same as the `computepool-agent` command."""

import sys

from agent.cli import main

sys.exit(main())
