"""`python -m zoo.cli`: the `zoo` command."""

import sys

from zoo.cli import main

sys.exit(main())
