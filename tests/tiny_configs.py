"""The smallest config of each recipe, shared by the tests that build every
family (the preset sweep, the contract check, the ONNX export), and the tiny
batch the sweep feeds them."""

import keras
import numpy as np

import zoo.registry

# The smallest sizes of each recipe; the preset's other settings (attention
# type, score, cell, input feeding, ...) are kept.
TINY = {
    "rnnencdec": {"embedding_dim": 6, "hidden_dim": 8, "readout_dim": 6},
    "rnnsearch": {"embedding_dim": 6, "hidden_dim": 8, "attention_units": 5, "maxout_units": 4},
    "luong": {"embedding_dim": 6, "hidden_dim": 8, "num_layers": 2, "window": 2},
    # Three layers: the third is the first residual one.
    "gnmt": {"embedding_dim": 6, "hidden_dim": 8, "num_layers": 3, "attention_units": 5},
    "transformer": {
        "d_model": 8,
        "num_heads": 2,
        "num_encoder_layers": 1,
        "num_decoder_layers": 1,
        "feed_forward_dim": 12,
        "max_target_length": 16,
        "max_source_length": 16,
    },
    "show_attend_tell": {
        "image_size": 16,
        "encoder": "small_cnn",
        "encoder_filters": [4, 4],
        "feature_dim": 6,
        "encoder_weights": None,
        "encoder_layer": None,
        "embedding_dim": 6,
        "hidden_dim": 8,
        "attention_units": 5,
        # Hard attention samples its locations: a fixed seed, so that two
        # models of one config train alike (the XLA test compares them).
        "sampling_seed": 0,
    },
}

VOCABULARY = 13
SOURCE = np.array([[5, 6, 7, 8, 9, 4], [9, 4, 5, 0, 0, 0]], "int32")
TARGET_IN = np.array([[2, 5, 6, 7, 8], [2, 8, 9, 0, 0]], "int32")
TARGET_OUT = np.array([[5, 6, 7, 8, 3], [8, 9, 3, 0, 0]], "int32")
# Captioning presets read 16x16 images: a 4x4 grid of 16 locations.
IMAGES = np.random.default_rng(0).random((2, 16, 16, 3)).astype("float32")
LOCATIONS = 16


def is_captioning(name):
    return zoo.registry.task_of(zoo.registry.get_preset(name)["recipe"]) == "captioning"


def tiny_model(name, **kwargs):
    recipe = zoo.registry.get_preset(name)["recipe"]
    vocabularies = {"target_vocabulary_size": VOCABULARY}
    if not is_captioning(name):
        vocabularies["source_vocabulary_size"] = VOCABULARY
    return zoo.registry.build(name, **vocabularies, **TINY[recipe], dropout=0.0, **kwargs)


def source_of(name):
    return IMAGES if is_captioning(name) else SOURCE


def tiny_model_config(name):
    """The constructor arguments `tiny_model(name)` builds from, sizes aside."""
    preset = zoo.registry.get_preset(name)
    return {**preset["model"], **TINY[preset["recipe"]], "dropout": 0.0}


def presets_with_distinct_tiny_models():
    """Every preset whose tiny model differs from the ones before it
    (presets that differ only in sizes, e.g. `rnnsearch_small` and
    `rnnsearch_multi30k`, give the same tiny model, so the same test)."""
    first_of_config = {}
    for name in sorted(zoo.registry.PRESETS):
        recipe = zoo.registry.get_preset(name)["recipe"]
        first_of_config.setdefault((recipe, repr(sorted(tiny_model_config(name).items()))), name)
    return sorted(first_of_config.values())


def presets_under_test():
    """On every backend, one preset per recipe and attention distribution
    (`probability_fn`, monotonic attention, whose stops are code of their
    own, or hard attention, whose sampling and REINFORCE loss are); on
    torch, also every other preset of `presets_with_distinct_tiny_models`.

    The presets of one recipe differ only in options whose backend-specific
    code is the same (sparsemax's sort is not): the attention modes and
    scores, cells, reversal, initial states, grid layers and shared
    embeddings are numpy-checked on every backend by the layer and formula
    tests. So each distinct tiny model is swept once, on torch, whose eager
    steps cost the least, and the kinds on all three backends. TensorFlow's
    own code for some options, the XLA while loop, is compiled for every
    distinct model by test_recipes.py's XLA test.
    """
    first_of_kind = {}
    for name in sorted(zoo.registry.PRESETS):
        preset = zoo.registry.get_preset(name)
        kind = (
            preset["recipe"],
            preset["model"].get("probability_fn", "softmax"),
            preset["model"].get("attention") if preset["model"].get("attention") in (
                "monotonic", "hard"
            ) else None,
        )
        first_of_kind.setdefault(kind, name)
    names = set(first_of_kind.values())
    if keras.backend.backend() == "torch":
        names |= set(presets_with_distinct_tiny_models())
    return sorted(names)


def inputs(name):
    if is_captioning(name):
        return {"image": IMAGES, "target_in": TARGET_IN}
    return {"source": SOURCE, "target_in": TARGET_IN}


def tiny_training_preset(**training):
    """A preset that trains a tiny RNNsearch on a few synthetic pairs in a
    few batches an epoch, `training` over its settings."""
    return {
        "recipe": "rnnsearch",
        "description": "a tiny RNNsearch on a few synthetic pairs",
        "model": TINY["rnnsearch"],
        "training": {
            **zoo.registry.SMALL_TRAINING.to_dict(),
            "train_size": 32, "valid_size": 8, "test_size": 0, "vocabulary_size": 60,
            **training,
        },
    }
