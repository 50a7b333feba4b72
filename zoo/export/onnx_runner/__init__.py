"""Translate and caption with an ONNX export, with onnxruntime alone.

`zoo export RUN_DIR --format onnx` writes a folder that needs nothing of
keras-attention-zoo, Keras or TensorFlow to run; this package is in it, as
`onnx_runner/`, beside a `run.py` that runs it (`layout.write_runner`):

    pip install numpy onnxruntime sentencepiece pillow   # the last two where needed
    python run.py "A man is riding a bike."
    python run.py --input sentences.txt --beam 5 > translations.txt
    python run.py photo.jpg                              # a captioning export

It imports only numpy, onnxruntime, `sentencepiece` (for a SentencePiece
vocabulary) and Pillow (to read image files), and its modules import only
each other, relatively. Everything else the Python API does around the
model is written here again in NumPy: the WordPiece tokenizer, greedy and
beam search (GNMT length and coverage penalties, early or exact stopping,
the n-best list, the alignment), batching, splitting an over-long sentence
at sentence ends, image resizing. A test holds each piece to the package's
own (`tests/zoo/export/`): the same tokens, the same scores to 1e-4, and it
runs the folder where tensorflow, keras and zoo cannot be imported;
`tests/zoo/export/test_runner_copies.py` holds the pieces written again
word for word to the package's.

Why a copy and not an import of the package: a server that copies an
export folder (or a Java, C# or C++ service reading the same graphs and
manifest) must not need the training stack. `zoo.export.onnx_runner` is
this same package, so the package's tests and `zoo bench export` run
exactly what is shipped.

Its modules:

    layout           the folder's file names, the manifest, the request
                     limits, the errors, and `write_runner`
    session          the two graphs in onnxruntime sessions (`OnnxModel`)
    search_settings  beam width, penalties, stopping rule: defaults, checks
    search           greedy search, `DecodeResult`, the step limit
    beam             beam search with GNMT penalties
    tokenizers       WordPiece and SentencePiece
    images           image files read and resized
    results          `Translation`, `Caption`, `Hypothesis`
    alignment        a split sentence's alignment, Pharaoh word alignments
    serving          `Translator`, `Captioner`, `load`
    cli              `python run.py ...` (`main`)

The folder's files (see `zoo.export.onnx_export`):

    encoder.onnx, decoder_step.onnx   the recipes' contract as two graphs
    manifest.json                     special ids, state names, limits,
                                      search settings, image size
    *.vocab / *.model                 the tokenizers' files
    run.py                            runs the package: `python run.py`
    onnx_runner/                      this package
    README.md                         inputs, outputs and limits

Example:

>>> import run  # in the folder; or `from zoo.export import onnx_runner`
>>> translator = run.load("exports/rnnsearch_small")  # doctest: +SKIP
>>> translator.translate(["the dog sees a cat."])[0].text  # doctest: +SKIP
"""

from .alignment import BlockAlignment
from .alignment import pharaoh_alignment
from .alignment import piece_words
from .beam import COVERAGE_FLOOR
from .beam import beam_search
from .cli import STDIN
from .cli import main
from .cli import read_lines
from .cli import serve
from .images import IMAGE_FORMATS
from .images import load_image
from .images import load_image_bytes
from .layout import CAPTIONING
from .layout import DECODER_STEP
from .layout import DEFAULT_LIMITS
from .layout import ENCODER
from .layout import MANIFEST
from .layout import MANIFEST_FORMAT
from .layout import MANIFEST_VERSION
from .layout import NEW_STATE_PREFIX
from .layout import README
from .layout import RUNNER
from .layout import RUNNER_PACKAGE
from .layout import SOURCE_WIDTH_MULTIPLE
from .layout import SPECIAL_TOKENS
from .layout import TRANSLATION
from .layout import ExportFolderError
from .layout import InputError
from .layout import MissingPackageError
from .layout import RequestTooLarge
from .layout import RunnerError
from .layout import VocabularyError
from .layout import check_limits
from .layout import read_manifest
from .layout import write_runner
from .results import Caption
from .results import Hypothesis
from .results import Translation
from .search import NEG_INF
from .search import DecodeResult
from .search import _fit_step_caches  # noqa: F401 (the package's tests cut caches with it)
from .search import decode_to_lists
from .search import greedy_search
from .search import log_softmax
from .search import max_decoding_steps
from .search_settings import DEFAULT_SEARCH
from .search_settings import STOPPING_RULES
from .search_settings import check_search
from .serving import Captioner
from .serving import Translator
from .serving import _join_parts  # noqa: F401 (held to zoo.inference's by the tests)
from .serving import load
from .serving import split_sentences
from .session import OnnxModel
from .session import default_session_options
from .tokenizers import MAX_BYTES_PER_WORD
from .tokenizers import SUFFIX_INDICATOR
from .tokenizers import VOCABULARY_SUFFIXES
from .tokenizers import SentencePieceTokenizer
from .tokenizers import WordPieceTokenizer
from .tokenizers import load_tokenizer
from .tokenizers import load_tokenizers
from .tokenizers import pretokenize

__all__ = [
    "BlockAlignment",
    "CAPTIONING",
    "COVERAGE_FLOOR",
    "Caption",
    "Captioner",
    "DECODER_STEP",
    "DEFAULT_LIMITS",
    "DEFAULT_SEARCH",
    "DecodeResult",
    "ENCODER",
    "ExportFolderError",
    "Hypothesis",
    "IMAGE_FORMATS",
    "InputError",
    "MANIFEST",
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "MAX_BYTES_PER_WORD",
    "MissingPackageError",
    "NEG_INF",
    "NEW_STATE_PREFIX",
    "OnnxModel",
    "README",
    "RUNNER",
    "RUNNER_PACKAGE",
    "RequestTooLarge",
    "RunnerError",
    "SOURCE_WIDTH_MULTIPLE",
    "SPECIAL_TOKENS",
    "STDIN",
    "STOPPING_RULES",
    "SUFFIX_INDICATOR",
    "SentencePieceTokenizer",
    "TRANSLATION",
    "Translation",
    "Translator",
    "VOCABULARY_SUFFIXES",
    "VocabularyError",
    "WordPieceTokenizer",
    "beam_search",
    "check_limits",
    "check_search",
    "decode_to_lists",
    "default_session_options",
    "greedy_search",
    "load",
    "load_image",
    "load_image_bytes",
    "load_tokenizer",
    "load_tokenizers",
    "log_softmax",
    "main",
    "max_decoding_steps",
    "pharaoh_alignment",
    "piece_words",
    "pretokenize",
    "read_lines",
    "read_manifest",
    "serve",
    "split_sentences",
    "write_runner",
]
