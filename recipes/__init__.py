"""The papers' models, built from `zoo.layers`, as Keras models.

Each recipe trains with `keras.Model.fit` and decodes greedily or with beam
search (`zoo.recipes.decoding`); `zoo.build(PRESET)` builds one with a
preset's sizes. Like `zoo.layers`, this package needs only keras and numpy.
"""

from zoo.recipes.contract import SequenceGenerator
from zoo.recipes.gnmt import GNMT
from zoo.recipes.luong import Luong
from zoo.recipes.rnnencdec import RNNEncDec
from zoo.recipes.rnnsearch import RNNSearch
from zoo.recipes.seq2seq import Seq2SeqRecipe
from zoo.recipes.show_attend_tell import ShowAttendTell
from zoo.recipes.transformer import Transformer

__all__ = [
    "GNMT",
    "Luong",
    "RNNEncDec",
    "RNNSearch",
    "Seq2SeqRecipe",
    "SequenceGenerator",
    "ShowAttendTell",
    "Transformer",
]
