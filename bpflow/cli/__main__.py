"""`python -m bpflow.cli`: the `bpflow` command without its console script."""

import sys

from bpflow.cli import main

sys.exit(main())
