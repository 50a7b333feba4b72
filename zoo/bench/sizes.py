"""The benchmark sizes (`--size`) and the synthetic inputs and models drawn at them."""

from dataclasses import dataclass
from dataclasses import field

import numpy as np

# Token ids below this are special (PAD, UNK, BOS, EOS): synthetic batches
# draw their tokens from the rest of the vocabulary.
FIRST_WORD_ID = 4


@dataclass(frozen=True)
class Size:
    """The shapes of one benchmark size (`--size`)."""

    # (batch, length, depth) of each layer case.
    layer_shapes: tuple
    num_heads: int
    local_window: int
    # AdditiveAttention's `units`: its teacher-forced score is a
    # [batch, length, length, units] tensor, so `units` sets its memory.
    additive_units: int
    # The AdditiveAttention decoding loop: batch, source length, steps, the
    # depths of the decoder state (the query) and of the annotations (the
    # memory), and the attention units.
    loop_batch: int
    loop_source_length: int
    loop_steps: int
    loop_state_depth: int
    loop_memory_depth: int
    loop_units: int
    # The MultiHeadAttention decoding step: batch, model depth (its heads are
    # num_heads) and decoded lengths.
    cache_batch: int
    cache_depth: int
    cache_lengths: tuple
    # Greedy against beam search: sentences per call, source length, steps.
    search_batches: tuple
    search_source_length: int
    search_max_length: int
    # train_on_batch: sentences and tokens per sentence, vocabulary, and
    # constructor overrides per recipe (empty: the preset's own sizes).
    train_batch: int
    train_length: int
    vocabulary_size: int
    model_overrides: dict = field(default_factory=dict)


SIZES = {
    # For the test suite: every case runs, in seconds.
    "tiny": Size(
        layer_shapes=((2, 4, 8),),
        num_heads=2,
        local_window=1,
        additive_units=8,
        loop_batch=2,
        loop_source_length=4,
        loop_steps=3,
        loop_state_depth=8,
        loop_memory_depth=6,
        loop_units=5,
        cache_batch=2,
        cache_depth=8,
        cache_lengths=(2, 4),
        search_batches=(2,),
        search_source_length=4,
        search_max_length=3,
        train_batch=2,
        train_length=3,
        vocabulary_size=13,
        model_overrides={
            "rnnencdec": {"embedding_dim": 6, "hidden_dim": 8, "readout_dim": 6},
            "rnnsearch": {
                "embedding_dim": 6,
                "hidden_dim": 8,
                "attention_units": 5,
                "maxout_units": 4,
            },
            "luong": {"embedding_dim": 6, "hidden_dim": 8, "num_layers": 1},
            "transformer": {
                "d_model": 8,
                "num_heads": 2,
                "num_encoder_layers": 1,
                "num_decoder_layers": 1,
                "feed_forward_dim": 12,
                "max_target_length": 16,
                "max_source_length": 16,
            },
        },
    ),
    # The sizes of real training and decoding: batch 32-64, lengths 16-128,
    # depths 128-512; the presets' own model sizes for decoding and training.
    "full": Size(
        layer_shapes=((32, 16, 128), (64, 64, 256), (32, 128, 512)),
        num_heads=8,
        local_window=8,
        # rnnsearch_small's attention size.
        additive_units=128,
        loop_batch=32,
        loop_source_length=50,
        loop_steps=50,
        # rnnsearch_multi30k's: a GRU state and bidirectional annotations.
        loop_state_depth=256,
        loop_memory_depth=512,
        loop_units=256,
        cache_batch=32,
        cache_depth=256,
        cache_lengths=(16, 64, 256),
        search_batches=(1, 32),
        search_source_length=20,
        search_max_length=30,
        train_batch=64,
        train_length=20,
        vocabulary_size=1000,
    ),
}
DEFAULT_SIZE = "full"


def random_tensor(shape, seed=0):
    """A float32 tensor of standard normal values, the same for every run."""
    from keras import ops

    values = np.random.default_rng(seed).standard_normal(shape).astype("float32")
    return ops.convert_to_tensor(values)


def tokens(shape, vocabulary_size, seed=0):
    """Random word ids (no special tokens), int32."""
    rng = np.random.default_rng(seed)
    return rng.integers(FIRST_WORD_ID, vocabulary_size, shape).astype("int32")


def translation_model(preset, size):
    """A preset's model at the benchmark size's vocabulary and overrides."""
    from zoo import registry

    recipe = registry.get_preset(preset)["recipe"]
    return registry.build(
        preset,
        source_vocabulary_size=size.vocabulary_size,
        target_vocabulary_size=size.vocabulary_size,
        **size.model_overrides.get(recipe, {}),
    )
