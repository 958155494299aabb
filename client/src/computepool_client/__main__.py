import sys

from computepool_client.cli import main

sys.exit(main())
