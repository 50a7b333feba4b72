"""The `tensorflow` extra: what it installs, and the one line when it is missing.

`pip install keras-attention-zoo` gives `zoo.layers` and `zoo.recipes` with
keras and numpy only. Training, the data pipelines, evaluation, export and
the commands that run them need the TensorFlow stack, which
`pip install "keras-attention-zoo[tensorflow]"` adds. This module imports
only the standard library, so the command line can check for the extra
before Keras or TensorFlow loads.
"""

import contextlib
import importlib.util

from zoo.errors import ZooUserError

INSTALL_COMMAND = 'pip install "keras-attention-zoo[tensorflow]"'
# The top-level modules of the extra that `zoo` imports, with the two that
# come with its packages (keras_hub with keras-nlp, onnx with tf2onnx).
MODULES = (
    "tensorflow",
    "tensorflow_text",
    "keras_nlp",
    "keras_hub",
    "sentencepiece",
    "tf2onnx",
    "onnx",
    "onnxruntime",
    "sacrebleu",
    "matplotlib",
)


class MissingExtraError(ZooUserError):
    """A module of the `tensorflow` extra is not installed."""

    def __init__(self, module):
        self.module = module
        super().__init__(
            f"this command needs {module}, which comes with the TensorFlow extra; "
            f"install it with: {INSTALL_COMMAND}"
        )


def require():
    """Raises `MissingExtraError` naming the first module of the extra that
    is not installed; finds them without importing them."""
    for module in MODULES:
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(module)


@contextlib.contextmanager
def missing_modules_as_user_errors():
    """Turns a `ModuleNotFoundError` of a module of the extra, raised inside,
    into a `MissingExtraError`; any other import error stays a bug."""
    try:
        yield
    except ModuleNotFoundError as error:
        module = (error.name or "").partition(".")[0]
        if module not in MODULES:
            raise
        raise MissingExtraError(module) from None
