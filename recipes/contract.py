"""The contract between the recipes, decoding and export, as code.

Every sequence-generating recipe is a `SequenceGenerator`. It offers three
entry points (docs/design.md, "The one contract"):

- `call({source_spec.name: source, "target_in": [B, T] ids})`: the
  teacher-forced logits `[B, T, V]`, for `fit`;
- `encode(source) -> state`: a flat dict of batch-first tensors;
- `decode_step(previous_tokens, state, step) -> (logits, state, attention)`,

and declares, instead of leaving decoding and export to find out:

- `constant_state_keys`: the state entries that `encode` computes once and
  `decode_step` returns unchanged (beam search does not reorder them, the
  ONNX decoder-step graph does not output them);
- `attention_state_key`: the state entry whose axis 1 is the attention width
  S, the `[B, S]` of each step's attention (`attention_width`);
- `step_cache_axes`: the state entries that hold one slot per target
  position (a self-attention key/value cache of `max_target_length` slots),
  each with the axis of its slots; a search of at most L steps cuts them to
  L slots (`fit_step_caches`);
- `pad_id`, `bos_id`, `eos_id`: the special token ids (by default those of
  `SPECIAL_TOKENS`, the first entries of every vocabulary);
- `image_size` and `grid_shape` for an image recipe: the square input size
  and the `(rows, columns)` of the feature grid it attends over.

`source_spec` follows from them: the name, shape and dtype of the source that
`call`, `encode`, the SavedModel signatures and the ONNX encoder take.
"""

from typing import NamedTuple

import keras
from keras import ops

# The reserved tokens, in the order of their ids, at the start of every
# vocabulary (`zoo.data.TextTokenizer` writes them so).
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")
PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN = SPECIAL_TOKENS
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(len(SPECIAL_TOKENS))


class SourceSpec(NamedTuple):
    """What a recipe reads as its source.

    Attributes:
        name: the key of the source in `call`'s input dict, and the name of
            the source input of the exported signatures and graphs.
        shape: batch first, None on the axes that vary (the batch, the
            source length).
        dtype: "int32" for token ids, "float32" for images in [0, 1].
    """

    name: str
    shape: tuple
    dtype: str


class SequenceGenerator(keras.Model):
    """Base class of every recipe that generates a sequence token by token.

    A subclass implements `call`, `encode` and `decode_step` (see the module
    docstring) and sets the declarations below; greedy and beam search
    (`zoo.recipes.decoding`), the SavedModel signatures (`zoo.export.saved_model`) and the
    ONNX export (`zoo.export.onnx_export`) read them and infer nothing.

    Args:
        target_vocabulary_size: int, size of the target vocabulary.
        pad_id, bos_id, eos_id: distinct ids of the padding, begin and end
            tokens, below `target_vocabulary_size`.
        max_target_length: optional int, the most target steps the model can
            decode (None: no limit of its own).
        **kwargs: `keras.Model` keyword arguments (`name`, `dtype`).

    Example:

    >>> import numpy as np
    >>> from zoo.recipes.rnnsearch import RNNSearch
    >>> model = RNNSearch(20, 20, embedding_dim=4, hidden_dim=4,
    ...                   attention_units=4, maxout_units=2)
    >>> model.source_spec
    SourceSpec(name='source', shape=(None, None), dtype='int32')
    >>> state = model.encode(np.array([[5, 6, 7, 3]], "int32"))
    >>> model.carried_state_keys(state)  # what beam search reorders
    ['decoder_state']
    >>> int(model.attention_width(state))  # the source length
    4
    """

    # The entries of `encode`'s state that `decode_step` returns unchanged.
    constant_state_keys = ()
    # The entry whose axis 1 has the size of each step's attention.
    attention_state_key = "source_mask"
    # Entry -> axis of the entries that hold one slot per target position.
    step_cache_axes = {}
    # An image recipe's square input size and feature grid; None otherwise.
    image_size = None
    grid_shape = None

    def __init__(
        self,
        target_vocabulary_size,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        max_target_length=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        special = {"pad_id": pad_id, "bos_id": bos_id, "eos_id": eos_id}
        for name, value in special.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"`{name}` must be an int >= 0. Received: {name}={value!r}")
        if len(set(special.values())) < len(special):
            raise ValueError(
                "`pad_id`, `bos_id` and `eos_id` must be distinct. Received: "
                + ", ".join(f"{name}={value}" for name, value in special.items())
            )
        self._check_vocabulary_size(
            "target_vocabulary_size", target_vocabulary_size, pad_id, bos_id, eos_id
        )
        self.target_vocabulary_size = target_vocabulary_size
        self.pad_id = pad_id
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.max_target_length = max_target_length

    @staticmethod
    def _check_vocabulary_size(name, size, *special_ids):
        if not isinstance(size, int) or size <= max(special_ids):
            raise ValueError(
                f"`{name}` must be an int larger than the special token ids. "
                f"Received: {name}={size!r}"
            )

    # The entry points ---------------------------------------------------------

    def call(self, inputs, training=None):
        """`{source_spec.name: source, "target_in": [B, T]}` -> logits `[B, T, V]`."""
        raise NotImplementedError

    def encode(self, source, training=None):
        """The source batch -> the state, a flat dict of batch-first tensors."""
        raise NotImplementedError

    def decode_step(self, previous_tokens, state, step):
        """`previous_tokens` int32 `[B]` at target position `step` ->
        `(logits [B, V], state, attention [B, S])`."""
        raise NotImplementedError

    # What the declarations give ------------------------------------------------

    @property
    def source_spec(self):
        """The `SourceSpec` of the source: token ids, or the images of
        `image_size` for an image recipe."""
        if self.image_size is None:
            return SourceSpec("source", (None, None), "int32")
        return SourceSpec("image", (None, self.image_size, self.image_size, 3), "float32")

    def attention_width(self, state):
        """S, the number of positions a step attends over: the size of axis
        1 of `state[attention_state_key]` (the source length, or the grid's
        locations)."""
        return attention_width(self, state)

    def carried_state_keys(self, state):
        """The entries of `state` that `decode_step` changes, in state order:
        all but `constant_state_keys`, each of which `state` must hold."""
        return carried_state_keys(self, state)

    def get_config(self):
        return {
            "target_vocabulary_size": self.target_vocabulary_size,
            "pad_id": self.pad_id,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "max_target_length": self.max_target_length,
            "name": self.name,
        }


def attention_width(model, state):
    """S of any object with the contract's declarations (a recipe, or an ONNX
    export's `zoo.export.onnx_runner.OnnxModel`): axis 1 of
    `state[model.attention_state_key]`, a python int where it is static."""
    return ops.shape(state[model.attention_state_key])[1]


def carried_state_keys(model, state):
    """The entries of `state` not in `model.constant_state_keys`, in order.

    For any object with the contract's declarations (a recipe, or an ONNX
    export's `zoo.export.onnx_runner.OnnxModel`).

    Raises:
        ValueError: a declared constant entry that `state` lacks (a renamed
            entry would otherwise be reordered by nobody).
    """
    missing = [key for key in model.constant_state_keys if key not in state]
    if missing:
        raise ValueError(
            f"{type(model).__name__}.constant_state_keys names {missing}, which the "
            f"state from `encode` does not hold (it holds {list(state)})"
        )
    return [key for key in state if key not in model.constant_state_keys]


def fit_step_caches(model, state, steps):
    """`state` with each entry of `model.step_cache_axes` cut to its first
    `steps` slots (a python int, or a scalar tensor under `tf.function`).

    `decode_step` at step t reads and writes only the slots below t + 1, so
    a search of at most `steps` steps decodes the same with the cut cache,
    and each step then attends over, writes and (in beam search) reorders
    `steps` slots instead of `max_target_length`.
    """
    axes = getattr(model, "step_cache_axes", {})
    if not axes:
        return state
    fitted = dict(state)
    for key, axis in axes.items():
        value = state[key]
        size = list(ops.shape(value))
        size[axis] = steps
        fitted[key] = ops.slice(value, [0] * len(size), size)
    return fitted
