"""An export folder's layout: its file names, the manifest (read and
checked), the runner's errors, and `write_runner`."""

import json
import shutil
from pathlib import Path

MANIFEST = "manifest.json"
README = "README.md"
RUNNER = "run.py"
# The runner's package, copied whole beside `run.py` (`write_runner`).
RUNNER_PACKAGE = "ct2_runner"
MANIFEST_FORMAT = "keras-attention-zoo-ctranslate2"
MANIFEST_VERSION = 1
# The recipes' contract's special tokens, in id order.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")
PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN = SPECIAL_TOKENS
# CTranslate2's own files of the model (`ctranslate2.Translator` reads them).
MODEL_FILES = ("model.bin", "config.json")

# A batch's sources are padded to a multiple of this width, as the Python
# API pads them (`zoo.inference.translator.SOURCE_WIDTH_MULTIPLE`): the
# padded width sets the step limit, so both give the same translations.
SOURCE_WIDTH_MULTIPLE = 8


class RunnerError(Exception):
    """A user mistake (a bad folder, request or option): its message is one
    line that names the problem and the fix."""


class ExportFolderError(RunnerError):
    """A folder that is missing, incomplete or not a CTranslate2 export of ours."""


def read_manifest(folder):
    """The manifest of an export folder, checked: a one-line error otherwise."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise ExportFolderError(
            f"{str(folder)!r} is not a CTranslate2 export: no {MANIFEST} "
            "(write one with `zoo export RUN_DIR --format ctranslate2`)"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ExportFolderError(f"cannot read {path}: {error}") from None
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("version") != MANIFEST_VERSION:
        raise ExportFolderError(
            f"{path} is not a version-{MANIFEST_VERSION} {MANIFEST_FORMAT} manifest; "
            "re-export the run with `zoo export RUN_DIR --format ctranslate2`"
        )
    names = list(MODEL_FILES) + list(manifest["vocabularies"].values())
    missing = [name for name in names if not (folder / name).is_file()]
    if missing:
        raise ExportFolderError(
            f"export folder {str(folder)!r} is incomplete: missing {', '.join(missing)}"
        )
    return manifest


# What `python run.py` runs: this package, beside it in the folder. The
# folder is put first on the path so that `python -I run.py` (which leaves
# out the script's folder) and `import run` both find the package.
RUN_PY = '''"""Translate with this CTranslate2 export, with ctranslate2 and sentencepiece alone.

    python run.py --help

The runner is the package `ct2_runner/` beside this file; as a module,
`import run; run.load(".")` gives a Translator. Its length penalty is
CTranslate2's (a score divided by length ** alpha), not GNMT's
((5 + length) / 6) ** alpha of keras-attention-zoo: beam results can
differ from `zoo translate` for alpha > 0, and are the same for alpha 0
and for greedy search.
"""

import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
if str(FOLDER) not in sys.path:
    sys.path.insert(0, str(FOLDER))

from ct2_runner import *  # noqa: E402,F403
from ct2_runner import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(folder=FOLDER))
'''


def write_runner(folder):
    """Writes the runner into the export folder `folder`: this package's
    modules as `ct2_runner/` (no caches) and `run.py`, which runs it."""
    folder = Path(folder)
    package = folder / RUNNER_PACKAGE
    package.mkdir(exist_ok=True)
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        shutil.copyfile(path, package / path.name)
    (folder / RUNNER).write_text(RUN_PY, encoding="utf-8")
