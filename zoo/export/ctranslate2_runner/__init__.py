"""Translate with a CTranslate2 export, with `ctranslate2` and
`sentencepiece` alone.

`zoo export RUN_DIR --format ctranslate2` writes a folder that needs nothing
of keras-attention-zoo, Keras or TensorFlow to run; this package is in it, as
`ct2_runner/`, beside a `run.py` that runs it (`layout.write_runner`):

    pip install ctranslate2 sentencepiece
    python run.py "A man is riding a bike."
    python run.py --input sentences.txt --beam 5 > translations.txt

It imports only `ctranslate2`, `sentencepiece` and the standard library,
and its modules import only each other, relatively. What the Python API
does around the model that CTranslate2 does not is written here again:
batches of similar length, the source cut at the run's `max_length`, and
the step limit of each batch. Two things differ from `zoo translate`: a
sentence over the limit is cut, not split at sentence ends first, and an
empty sentence gives an empty translation (CTranslate2 decodes nothing for
an empty source; `zoo translate` reads it as a lone EOS).

The length penalty is CTranslate2's: a hypothesis' log-probability divided
by `length ** alpha`, where keras-attention-zoo divides by GNMT's
`((5 + length) / 6) ** alpha`. The export passes alpha through as it is, so
beam results can differ from `zoo translate` for alpha > 0; for alpha 0 and
for greedy search they are the same.

Its modules:

    layout    the folder's file names, the manifest, the errors, `write_runner`
    serving   `Translator`, `Translation`, `load`
    cli       `python run.py ...` (`main`)

Example:

>>> import run  # in the folder; or `from zoo.export import ctranslate2_runner`
>>> translator = run.load("exports/transformer_multi30k")  # doctest: +SKIP
>>> translator.translate(["A dog runs."])[0].text  # doctest: +SKIP
"""

from .cli import STDIN
from .cli import main
from .cli import read_lines
from .layout import MANIFEST
from .layout import MANIFEST_FORMAT
from .layout import MANIFEST_VERSION
from .layout import MODEL_FILES
from .layout import README
from .layout import RUNNER
from .layout import RUNNER_PACKAGE
from .layout import SOURCE_WIDTH_MULTIPLE
from .layout import SPECIAL_TOKENS
from .layout import ExportFolderError
from .layout import RunnerError
from .layout import read_manifest
from .layout import write_runner
from .serving import DEFAULT_BATCH_SIZE
from .serving import MAX_LENGTH_OFFSET
from .serving import MAX_LENGTH_RATIO
from .serving import Translation
from .serving import Translator
from .serving import load

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ExportFolderError",
    "MANIFEST",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "MAX_LENGTH_OFFSET",
    "MAX_LENGTH_RATIO",
    "MODEL_FILES",
    "README",
    "RUNNER",
    "RUNNER_PACKAGE",
    "RunnerError",
    "SOURCE_WIDTH_MULTIPLE",
    "SPECIAL_TOKENS",
    "STDIN",
    "Translation",
    "Translator",
    "load",
    "main",
    "read_lines",
    "read_manifest",
    "write_runner",
]
