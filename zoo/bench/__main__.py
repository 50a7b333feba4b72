"""`python -m zoo.bench ...`: how `zoo bench --backend B` re-runs itself in
a child process when this one has loaded Keras with another backend."""

import os
import sys

from zoo.bench.command import main
from zoo.quiet_import import import_quietly

if os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow":
    import_quietly("tensorflow")  # before Keras loads it, as `zoo` does
sys.exit(main())
