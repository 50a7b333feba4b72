"""An export folder's layout: its file names, the manifest (read and
checked), the request limits, and the runner's errors."""

import json
import shutil
from pathlib import Path


ENCODER = "encoder.onnx"
DECODER_STEP = "decoder_step.onnx"
MANIFEST = "manifest.json"
RUNNER = "run.py"
# The runner's package, copied whole beside `run.py` (`write_runner`).
RUNNER_PACKAGE = "onnx_runner"
README = "README.md"
MANIFEST_FORMAT = "keras-attention-zoo-onnx"
# 3: the folder runs on its own (request limits, search settings, run.py).
# 4: `step_cache_axes`; the decoder step takes its caches cut to any length.
MANIFEST_VERSION = 4
# The prefix of the decoder-step outputs that carry a changed state entry:
# an ONNX graph cannot have an input and an output of the same name.
NEW_STATE_PREFIX = "new_"
TRANSLATION = "translation"
CAPTIONING = "captioning"

# The recipes' contract's special tokens, in id order.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")

# A batch's sources are padded to a multiple of this width, as the Python
# API pads them (`zoo.inference.translator.SOURCE_WIDTH_MULTIPLE`): the
# padded width sets the step limit, so both give the same translations.
SOURCE_WIDTH_MULTIPLE = 8

# The request limits a manifest holds, and their defaults (the export's
# options can change them): sentences or images per `translate` /
# `caption` call, bytes of one image file, pixels of a decoded image's
# longer side.
DEFAULT_LIMITS = {"max_batch": 256, "max_image_bytes": 20_000_000, "max_image_side": 8192}


class RunnerError(Exception):
    """A user mistake (a bad folder, request or option): its message is one
    line that names the problem and the fix."""


class ExportFolderError(RunnerError):
    """A folder that is missing, incomplete or not an ONNX export of ours."""


class RequestTooLarge(RunnerError):
    """A request over one of the manifest's `limits`; the message names it."""


class InputError(RunnerError):
    """Input text or an image that cannot be read (the message says where)."""


class VocabularyError(RunnerError):
    """A vocabulary file that cannot be read (the message names it)."""


class MissingPackageError(RunnerError):
    """A package that reading one of the folder's or the request's files
    needs (`sentencepiece`, Pillow) is not installed."""


def check_limits(limits, error=None):
    """`DEFAULT_LIMITS` with `limits` (a dict, or None) over them, checked:
    known keys, ints >= 1; `error` (an exception class, default
    `RunnerError`) otherwise. The exports' options go through it."""
    error = error or RunnerError
    if limits is not None and not isinstance(limits, dict):
        raise error(f"limits must be a dict of limit names to ints; received {limits!r}")
    limits = dict(limits or {})
    unknown = sorted(set(limits) - set(DEFAULT_LIMITS))
    if unknown:
        raise error(
            f"unknown limit {', '.join(map(repr, unknown))}; the limits are {', '.join(DEFAULT_LIMITS)}"
        )
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise error(f"limit {name} must be an int >= 1; received {value!r}")
    return {**DEFAULT_LIMITS, **limits}


def read_manifest(folder):
    """The manifest of an export folder, checked: a one-line error otherwise."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise ExportFolderError(
            f"{str(folder)!r} is not an ONNX export: no {MANIFEST} "
            "(write one with `zoo export RUN_DIR --format onnx`)"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportFolderError(f"cannot read {path}: {error}") from None
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("version") != MANIFEST_VERSION:
        raise ExportFolderError(
            f"{path} is not a version-{MANIFEST_VERSION} {MANIFEST_FORMAT} manifest; "
            "re-export the run with `zoo export RUN_DIR --format onnx`"
        )
    graphs = [graph["file"] for graph in manifest["graphs"].values()]
    files = graphs + list(manifest["vocabularies"].values())
    missing = [name for name in files if not (folder / name).is_file()]
    if missing:
        raise ExportFolderError(
            f"export folder {str(folder)!r} is incomplete: missing {', '.join(missing)}"
        )
    return manifest


# What `python run.py` runs: this package, beside it in the folder. The
# folder is put first on the path so that `python -I run.py` (which leaves
# out the script's folder) and `import run` both find the package.
RUN_PY = '''"""Translate or caption with this ONNX export, with onnxruntime alone.

    python run.py --help

The runner is the package `onnx_runner/` beside this file (numpy and
onnxruntime; sentencepiece and Pillow where README.md says so); as a
module, `import run; run.load(".")` gives a Translator or a Captioner.
"""

import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
if str(FOLDER) not in sys.path:
    sys.path.insert(0, str(FOLDER))

from onnx_runner import *  # noqa: E402,F403
from onnx_runner import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(folder=FOLDER))
'''


def write_runner(folder):
    """Writes the runner into the export folder `folder`: this package's
    modules as `onnx_runner/` (no caches) and `run.py`, which runs it."""
    folder = Path(folder)
    package = folder / RUNNER_PACKAGE
    package.mkdir(exist_ok=True)
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        shutil.copyfile(path, package / path.name)
    (folder / RUNNER).write_text(RUN_PY, encoding="utf-8")
