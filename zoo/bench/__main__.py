"""`python -m zoo.bench ...`: how `zoo bench --backend B` re-runs itself in
a child process when this one has loaded Keras with another backend."""

import sys

from zoo.bench.command import main

sys.exit(main())
