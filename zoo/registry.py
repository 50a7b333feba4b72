"""Named presets: a recipe, its model config, and how to train it.

Presets are data, kept apart from the model code (as in keras-hub): each is
a dict with the recipe name, the constructor arguments of the model
(`model`), the training settings (`training`, a `TrainingConfig`) and a
one-line description.
A preset may also hold `search`, the search settings it decodes with
unless a flag says otherwise (`search_of`).
The vocabulary sizes in `model` are filled in from the tokenizers at
training time. `zoo.build(name, **overrides)` turns one into a model; `zoo.presets()` lists them.
"""

import copy
import difflib
import importlib

from zoo.errors import ZooUserError
from zoo.inference.search_settings import SearchSettings
from zoo.training.config import TrainingConfig

# Recipe name -> "module:class" inside zoo.recipes, imported on demand so
# that listing presets loads no model code.
RECIPES = {
    "rnnencdec": "zoo.recipes.rnnencdec:RNNEncDec",
    "rnnsearch": "zoo.recipes.rnnsearch:RNNSearch",
    "luong": "zoo.recipes.luong:Luong",
    "gnmt": "zoo.recipes.gnmt:GNMT",
    "transformer": "zoo.recipes.transformer:Transformer",
    "show_attend_tell": "zoo.recipes.show_attend_tell:ShowAttendTell",
}
# What a recipe's source is: a sentence ("translation", the default) or an
# image ("captioning"). Training, loading and the CLI follow the task.
CAPTIONING_RECIPES = ("show_attend_tell",)

# Each preset's `TrainingConfig` names what differs from the defaults
# (`zoo.training.config`: WordPiece on the synthetic corpus and SentencePiece
# on a real one, batches of 64, gradients clipped at 1, a cosine decay, no
# label smoothing, no validation BLEU, jit_compile the recipe's default).

# The small presets: sized so that the embedded synthetic corpus trains in
# minutes on a CPU, and the demo and the tests train fast.
SMALL_TRAINING = TrainingConfig(
    train_size=8000,
    test_size=1000,
    epochs=5,
    # With gradients clipped, 1e-2 trains the small recurrent presets much
    # further than 3e-3 in the same epochs (docs/performance.md).
    learning_rate=1e-2,
)

MULTI30K_TRAINING = TrainingConfig(
    data="multi30k",
    vocabulary_size=3000,
    # Cased subwords: the BLEU everyone reports is cased.
    tokenizer="sentencepiece",
    max_length=64,
    # What the fairseq and OpenNMT recipes train with: smoothed labels, and
    # the validation split's BLEU each epoch (history.csv), which picks
    # `best.weights.h5`.
    label_smoothing=0.1,
    validation_bleu=True,
)

# How the Multi30k presets decode unless a flag says otherwise (`zoo
# translate`, `zoo evaluate`, `zoo export`): the search their results in
# docs/performance.md use, and the published Multi30k results report.
MULTI30K_SEARCH = {"beam": 5, "length_penalty": 0.6}
# The `SearchSettings` a preset's "search" may set (the rest are a request's).
PRESET_SEARCH_SETTINGS = ("beam", "length_penalty", "coverage_penalty", "stopping")

# Show, Attend and Tell on the embedded synthetic captioning set: 64x64
# images, captions of at most 15 words, a vocabulary of a few dozen words.
# Sized to train in minutes on a CPU.
SYNTHETIC_CAPTIONS_TRAINING = TrainingConfig(
    train_size=3000,  # images; each has 5 reference captions
    valid_size=200,
    test_size=500,
    image_size=64,
    vocabulary_size=200,
    epochs=5,
    # 1e-2 gave no better captions nor localisation (docs/performance.md).
    learning_rate=3e-3,
    max_length=24,
)

_SMALL_RNN = {"embedding_dim": 64, "hidden_dim": 128}

# The small captioner of the synthetic shapes, soft or hard attention.
_SHOW_ATTEND_TELL_SMALL = {
    "image_size": 64,
    "encoder": "small_cnn",
    # A 16x16 grid of 4-pixel cells, each annotation seeing 31 pixels
    # (three grid layers), because on a coarser grid the attention
    # peak often sits in the cell just outside a large object; the
    # grid layers are depthwise-separable so that the fine grid trains
    # as fast as a coarse one (docs/performance.md).
    "encoder_filters": [32, 64],
    "grid_layers": 3,
    "separable_grid": True,
    "feature_dim": 128,
    "embedding_dim": 64,
    "hidden_dim": 256,
    "attention_units": 128,
    "dropout": 0.1,
    # The paper's lambda = 1 pulls every location's total attention
    # towards 1, which spreads it near-uniformly when the grid has
    # many more locations than a caption has words, and it localised
    # worse than no penalty (docs/performance.md).
    "doubly_stochastic_lambda": 0.0,
    "max_target_length": 24,
}


def _luong_small(attention, score, **options):
    distribution = options.get("probability_fn", "softmax")
    return {
        "recipe": "luong",
        "description": f"Luong et al. 2015, {attention} attention, {score} score, "
        + ("" if distribution == "softmax" else f"{distribution} weights, ")
        + "input feeding, 1 x 128 LSTM; not the paper's: a bidirectional encoder, "
        "a maxout attentional layer, the decoder starting from zeros; synthetic data",
        "model": {
            **_SMALL_RNN,
            # The paper's stacked LSTMs with tanh(W_c [c; h]), started from the
            # encoder's states, let the attention settle on one source word
            # within a few Adam updates and never learned this corpus; each of
            # these four changes was needed (docs/experiments/2026-12-06-luong-attention-sink.md).
            "num_layers": 1,
            "bidirectional_encoder": True,
            "attentional_activation": "maxout",
            "initial_state": "zeros",
            "attention": attention,
            "score": score,
            # The paper's D: with 5, local-p's predicted centre did not find the
            # diagonal (docs/experiments/2026-12-06-luong-attention-sink.md).
            "window": 10,
            "input_feeding": True,
            "dropout": 0.1,
            **options,
        },
        "training": SMALL_TRAINING,
    }


def _luong_multi30k(attention):
    return {
        "recipe": "luong",
        "description": f"Luong et al. 2015 sized for Multi30k En-De: {attention} attention, "
        "general score, input feeding, 1 x 256 LSTM (the paper: 4 x 1000); not the "
        "paper's: a bidirectional encoder, a maxout attentional layer, the decoder "
        "starting from zeros",
        "model": {
            "embedding_dim": 256,
            "hidden_dim": 256,
            "num_layers": 1,
            "bidirectional_encoder": True,
            "attentional_activation": "maxout",
            "initial_state": "zeros",
            "attention": attention,
            "score": "general",
            "window": 10,
            "input_feeding": True,
            "dropout": 0.3,
        },
        "training": MULTI30K_TRAINING.overridden(epochs=20),
        "search": MULTI30K_SEARCH,
    }


PRESETS = {
    "rnnencdec_small": {
        "recipe": "rnnencdec",
        "description": "Cho et al. 2014 fixed-vector encoder-decoder, GRU 128; synthetic data",
        "model": {**_SMALL_RNN, "cell_type": "gru", "readout_dim": 128, "dropout": 0.1},
        # Through one vector it learns slower than RNNsearch: in 5 epochs it
        # has not learned even the short sentences, and the main job's table
        # would show no bottleneck (docs/performance.md).
        "training": SMALL_TRAINING.overridden(epochs=10),
    },
    "rnnencdec_reversed_small": {
        "recipe": "rnnencdec",
        "description": "Sutskever et al. 2014 style: LSTM 128, source reversed; synthetic data",
        "model": {
            **_SMALL_RNN,
            "cell_type": "lstm",
            "reverse_source": True,
            "readout_dim": 128,
            "dropout": 0.1,
        },
        "training": SMALL_TRAINING,
    },
    "rnnsearch_small": {
        "recipe": "rnnsearch",
        "description": "Bahdanau et al. 2014 RNNsearch, GRU 128, attention 128; synthetic data",
        "model": {
            **_SMALL_RNN,
            "attention_units": 128,
            "maxout_units": 128,
            "dropout": 0.1,
        },
        "training": SMALL_TRAINING,
    },
    # Raffel et al. 2017: attention that only moves forward, so it can copy
    # but not reorder (docs/recipes.md).
    "rnnsearch_monotonic_small": {
        "recipe": "rnnsearch",
        "description": "RNNsearch with Raffel et al. 2017 monotonic attention, GRU 128, "
        "attention 128; synthetic data",
        "model": {
            **_SMALL_RNN,
            "attention_units": 128,
            "maxout_units": 128,
            "dropout": 0.1,
            "attention": "monotonic",
        },
        "training": SMALL_TRAINING,
    },
    "luong_global_dot_small": _luong_small("global", "dot"),
    "luong_global_general_small": _luong_small("global", "general"),
    # Sparsemax (Martins and Astudillo, 2016) in place of the softmax: sparse
    # alignments, as OpenNMT-py's `global_attention_function sparsemax`.
    "luong_global_general_sparsemax_small": {
        **_luong_small("global", "general", probability_fn="sparsemax"),
        # Its attention learns more slowly than the softmax's, so it trains
        # longer (docs/experiments/2026-12-06-luong-attention-sink.md).
        "training": SMALL_TRAINING.overridden(epochs=8),
    },
    "luong_global_concat_small": _luong_small("global", "concat"),
    "luong_local_m_general_small": _luong_small("local-m", "general"),
    # A window of 20 (the paper's D is 10): with 10 the predicted centre
    # found the diagonal too slowly for the budget on sentences of up to 60
    # words (docs/experiments/2026-12-06-luong-attention-sink.md).
    "luong_local_p_general_small": _luong_small("local-p", "general", window=20),
    "gnmt_small": {
        "recipe": "gnmt",
        "description": "Wu et al. 2016 GNMT, 4+4 LSTM 128 (bidirectional bottom, residuals "
        "from layer 3), normalised additive attention 128; not the paper's: the softmax "
        "reads the context, the decoder starts from zeros; synthetic data",
        "model": {
            **_SMALL_RNN,
            "num_layers": 4,
            "attention_units": 128,
            "dropout": 0.1,
            # With the paper's output and the encoder's states handed to the
            # decoder, the attention settled on the first source word and the
            # preset never learned this corpus, as Luong's did
            # (docs/experiments/2026-12-06-luong-attention-sink.md).
            "output_context": True,
            "initial_state": "zeros",
        },
        "training": SMALL_TRAINING,
    },
    "transformer_small": {
        "recipe": "transformer",
        "description": "Vaswani et al. 2017, 2+2 layers, d_model 128, 4 heads; synthetic data",
        "model": {
            "d_model": 128,
            "num_heads": 4,
            "num_encoder_layers": 2,
            "num_decoder_layers": 2,
            "feed_forward_dim": 256,
            "dropout": 0.1,
            # Pre-LN: the paper's post-LN needs a learning-rate warm-up to
            # train at all at this scale.
            "norm_first": True,
            "max_target_length": 128,
            "max_source_length": 128,
        },
        "training": SMALL_TRAINING.overridden(learning_rate=2e-3),
    },
    "rnnsearch_50": {
        "recipe": "rnnsearch",
        "description": "RNNsearch-50 with the paper's sizes (620 / 1000 / 1000 / 500)",
        "model": {
            "embedding_dim": 620,
            "hidden_dim": 1000,
            "attention_units": 1000,
            "maxout_units": 500,
        },
        "training": MULTI30K_TRAINING.overridden(vocabulary_size=30000),
    },
    "rnnsearch_multi30k": {
        "recipe": "rnnsearch",
        "description": "RNNsearch sized for Multi30k En-De (256 / 256 / 256 / 256)",
        "model": {
            "embedding_dim": 256,
            "hidden_dim": 256,
            "attention_units": 256,
            "maxout_units": 256,
            "dropout": 0.3,
        },
        # Twice the shared budget: its validation BLEU still rose after
        # epoch 10, and 20 epochs fit in the 2 CPU hours the issue allows.
        "training": MULTI30K_TRAINING.overridden(epochs=20),
        "search": MULTI30K_SEARCH,
    },
    # Luong et al.'s global attention (general score) with input feeding at
    # rnnsearch_multi30k's width and budget, so the two attention decoders
    # compare on Multi30k trained the same way. With the paper's stacked
    # LSTMs, tanh attentional layer and encoder states handed to the decoder
    # it trained far behind RNNsearch; the three changes that made the
    # `_small` presets learn close the gap (docs/performance.md, "Luong on
    # Multi30k").
    "luong_multi30k": _luong_multi30k("global"),
    # Luong's best variant: local attention around a predicted position, with
    # the paper's window D = 10.
    "luong_local_p_multi30k": _luong_multi30k("local-p"),
    # The paper's 8+8 layers of 1024 are far beyond 2 CPU cores; half the
    # depth (still residual from layer 3) at rnnsearch_multi30k's width
    # trains its epochs within the 2 CPU hours (docs/performance.md).
    "gnmt_multi30k": {
        "recipe": "gnmt",
        "description": "GNMT sized for Multi30k En-De on 2 CPU cores: 4+4 LSTM 256, "
        "attention 256, the softmax reads the context, dropout 0.3, Adam at 3e-3 (the paper: "
        "8+8 of 1024, the top layer alone, Adam at 2e-4 then SGD)",
        "model": {
            "embedding_dim": 256,
            "hidden_dim": 256,
            "num_layers": 4,
            "attention_units": 256,
            # The Luong and RNNsearch presets' rate: at 0.2 the validation
            # loss rose over the last third of the epochs.
            "dropout": 0.3,
            # Not the paper's output: with the softmax reading the top layer
            # alone the attention settled on the first source word, and
            # reading the context too trained a better model
            # (docs/experiments/2026-12-04-four-recipes-multi30k.md,
            # "What sinks GNMT's attention").
            "output_context": True,
        },
        # The Luong and RNNsearch presets' 1e-3 trained this deeper stack at
        # half their pace; three times that rate kept up with them
        # (docs/experiments/2026-12-07-gnmt-multi30k-rate.md).
        "training": MULTI30K_TRAINING.overridden(learning_rate=3e-3, epochs=16),
        "search": MULTI30K_SEARCH,
    },
    # The shape of the fairseq Transformer-tiny that is the Multi30k anchor
    # (4+4 layers, d_model 128, 4 heads, feed-forward 256, dropout 0.3):
    # at 29k training pairs a small, strongly regularised model beats a wider
    # one, and it trains about twice as many epochs per hour on 2 CPU cores.
    "transformer_multi30k": {
        "recipe": "transformer",
        "description": "Transformer-tiny for Multi30k En-De (4+4 layers, d_model 128, "
        "the fairseq anchor's shape)",
        "model": {
            "d_model": 128,
            "num_heads": 4,
            "num_encoder_layers": 4,
            "num_decoder_layers": 4,
            "feed_forward_dim": 256,
            "dropout": 0.3,
            # One matrix embeds both languages and projects the output, over
            # one joint vocabulary (`shared_vocabulary` below), as the anchor
            # (fairseq's --share-all-embeddings) does.
            "share_all_embeddings": True,
            "norm_first": True,
            "max_target_length": 96,
            "max_source_length": 96,
        },
        # A warm-up, then a cosine decay to a tenth by the last update, which
        # ends the budget at a small rate; with the shared vocabulary it
        # scored above the inverse square root decay with separate ones on
        # the validation set (docs/performance.md).
        # Batches of 128 pairs are several times smaller than the anchor's
        # 8,192-token updates (docs/performance.md has the sizes and the
        # larger batches tried), so the peak rate is lower than its 5e-3.
        "training": MULTI30K_TRAINING.overridden(
            # German and English share most names and numbers: one joint
            # SentencePiece model, larger than either language's alone; 8,000
            # pieces scored above 4,000 on the validation set, at a slower
            # epoch (docs/performance.md).
            shared_vocabulary=True,
            vocabulary_size=8000,
            batch_size=128,
            # About as many epochs as the 2-core machines of the recent runs
            # train in the 2 hours the issue allows, in float32; slower
            # machines need `--epochs` lowered (docs/performance.md has the
            # times).
            epochs=120,
            learning_rate=2e-3,
            schedule="cosine",
            warmup_steps=1000,
            # The fairseq and tensor2tensor recipes decode with the mean of
            # the last few epochs' weights, which a noisy small-batch run
            # needs; the anchor averages its last 10.
            average_last=10,
        ),
        "search": MULTI30K_SEARCH,
    },
    "show_attend_tell_small": {
        "recipe": "show_attend_tell",
        "description": "Xu et al. 2015 soft attention, small CNN (16x16 grid), LSTM 256; "
        "synthetic shapes",
        "model": _SHOW_ATTEND_TELL_SMALL,
        "training": SYNTHETIC_CAPTIONS_TRAINING,
    },
    # Section 4.1: a sampled location per step, trained by REINFORCE; it
    # decodes with the expected context (docs/recipes.md).
    "show_attend_tell_hard_small": {
        "recipe": "show_attend_tell",
        "description": "Xu et al. 2015 stochastic hard attention, small CNN (16x16 grid), "
        "LSTM 256; synthetic shapes",
        "model": {**_SHOW_ATTEND_TELL_SMALL, "attention": "hard"},
        "training": SYNTHETIC_CAPTIONS_TRAINING,
    },
    "show_attend_tell_flickr8k": {
        "recipe": "show_attend_tell",
        "description": "Xu et al. 2015 on Flickr8k: VGG-19 conv5_4 (14x14x512), LSTM 1800, "
        "embedding 512 (the authors' arctic-captions settings); weights from a local file",
        "model": {
            "image_size": 224,
            "encoder": "VGG19",
            "encoder_layer": "block5_conv4",
            "encoder_weights": None,
            "embedding_dim": 512,
            "hidden_dim": 1800,
            "attention_units": 512,
            "dropout": 0.5,
            "doubly_stochastic_lambda": 1.0,
            "max_target_length": 40,
        },
        "training": TrainingConfig(
            data="flickr8k",
            image_size=224,
            vocabulary_size=10000,
            epochs=20,
            max_length=40,
        ),
    },
}


class UnknownPresetError(ZooUserError):
    """A preset name that is not in the registry."""


def presets():
    """The preset names, sorted, each with its one-line description."""
    return {name: PRESETS[name]["description"] for name in sorted(PRESETS)}


def get_preset(name):
    """A deep copy of the preset `name` (so callers may change it)."""
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name), PRESETS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownPresetError(
            f"unknown preset {name!r}{hint}; `zoo list` shows the {len(PRESETS)} presets"
        )
    preset = copy.deepcopy(PRESETS[name])
    if isinstance(preset["training"], dict):
        # A preset registered with plain settings, checked as the others are.
        preset["training"] = TrainingConfig.from_dict(preset["training"])
    preset["search"] = search_of(preset)
    return preset


def search_of(settings):
    """The search settings a preset (or a run's config.json) decodes with by
    default, checked, each one given: its "search" over `SearchSettings`'
    defaults (greedy). A run written before presets had them has none."""
    search = SearchSettings(**settings.get("search", {}))
    return {name: getattr(search, name) for name in PRESET_SEARCH_SETTINGS}


def task_of(recipe):
    """"captioning" for a recipe that reads images, else "translation"."""
    return "captioning" if recipe in CAPTIONING_RECIPES else "translation"


def recipe_class(recipe):
    module_name, class_name = RECIPES[recipe].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def build(name, **overrides):
    """Builds the model of preset `name`, with constructor arguments overridden.

    The vocabulary sizes default to the preset's training vocabulary size
    (a captioning recipe has only a target vocabulary).

    Example:
        >>> model = zoo.build("rnnsearch_small", source_vocabulary_size=500,
        ...                   target_vocabulary_size=600)
    """
    preset = get_preset(name)
    vocabulary_size = preset["training"].vocabulary_size
    vocabularies = {"target_vocabulary_size": vocabulary_size}
    if task_of(preset["recipe"]) == "translation":
        vocabularies["source_vocabulary_size"] = vocabulary_size
    return make_model(
        {"recipe": preset["recipe"], "model": {**vocabularies, **preset["model"], **overrides}}
    )


def make_model(config):
    """The model of a run's config ({"recipe", "model"}), not yet built: the
    one place a recipe is made, for `zoo.build`, training and `zoo.load`."""
    return recipe_class(config["recipe"])(**config["model"])


def build_model(config):
    """`make_model(config)`, built, with random weights."""
    model = make_model(config)
    model.build()
    return model
