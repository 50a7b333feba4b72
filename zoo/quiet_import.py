"""Importing TensorFlow without the start-up lines its native libraries print.

While TensorFlow's shared libraries load, they write a few lines straight to
file descriptor 2, before its logging is configured, so neither
`TF_CPP_MIN_LOG_LEVEL` nor Python's `logging` can silence them (e.g. "All log
messages before absl::InitializeLog() is called are written to STDERR" and
"Could not find cuda drivers on your machine"). The `zoo` command line imports
TensorFlow through `import_quietly`, which holds back the lines known to be
start-up noise and passes every other line through, so real warnings and
errors still reach the user.
"""

import importlib
import os
import re
import sys
import tempfile

# Lines TensorFlow's libraries print on every start on a machine without a GPU,
# or where several of its CUDA plugins register themselves.
STARTUP_NOISE = tuple(
    re.compile(pattern)
    for pattern in (
        r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
        r"^[IW]\d{4} [\d:.]+\s+\d+ cudart_stub\.cc:\d+\] ",
        r"^[IW]\d{4} [\d:.]+\s+\d+ cpu_feature_guard\.cc:\d+\] ",
        r"^[IW]\d{4} [\d:.]+\s+\d+ port\.cc:\d+\] oneDNN custom operations are on",
        r"^E\d{4} [\d:.]+\s+\d+ cuda_(dnn|fft|blas)\.cc:\d+\] Unable to register cu\w+ factory",
    )
)


def is_startup_noise(line):
    """Whether one line of stderr is a known TensorFlow start-up message."""
    return any(pattern.search(line) for pattern in STARTUP_NOISE)


def import_quietly(module_name="tensorflow"):
    """Imports `module_name` with its start-up noise on stderr held back.

    Whatever else the import writes to file descriptor 2 is written to
    `sys.stderr` afterwards, in order, also when the import fails. A module
    already imported is returned as it is.
    """
    if module_name in sys.modules:
        return sys.modules[module_name]
    sys.stderr.flush()
    saved_stderr = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            return importlib.import_module(module_name)
        finally:
            sys.stderr.flush()
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
            captured.seek(0)
            kept = [
                line
                for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True)
                if not is_startup_noise(line.rstrip("\n"))
            ]
            sys.stderr.write("".join(kept))
            sys.stderr.flush()
