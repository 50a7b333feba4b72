"""Every registered preset, built tiny, trains, saves and computes in its
dtype policy (the contract itself: test_contract.py).

A new preset is tested by adding it to the registry: nothing here names one.
"""

import keras
import numpy as np
import pytest
from layer_checks import MIXED_PRECISION_TOLERANCE
from layer_checks import gradient_magnitudes
from layer_checks import to_numpy

import zoo.registry
from tiny_configs import SOURCE
from tiny_configs import TARGET_IN
from tiny_configs import TARGET_OUT
from tiny_configs import VOCABULARY
from tiny_configs import inputs
from tiny_configs import presets_under_test
from tiny_configs import presets_with_distinct_tiny_models
from tiny_configs import source_of
from tiny_configs import tiny_model
from zoo.recipes.decoding import greedy_search
from zoo.training.jit_compile import default_jit_compile
from zoo.recipes.seq2seq import reverse_valid_tokens

# Weights whose gradient is zero by construction: a bias added to every
# attention score of a row (softmax is shift-invariant).
ZERO_GRADIENT_BY_DESIGN = ("key/bias",)


def test_every_weight_gets_a_gradient_and_fit_runs(preset_name):
    model = tiny_model(preset_name)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    model.build()
    gradients = gradient_magnitudes(model, inputs(preset_name), TARGET_OUT, loss)
    missing = [
        path
        for path, size in gradients.items()
        if size == 0 and not path.endswith(ZERO_GRADIENT_BY_DESIGN)
    ]
    assert not missing, f"no gradient reached {missing}"
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss, jit_compile=default_jit_compile(model))
    history = model.fit(inputs(preset_name), TARGET_OUT, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def unknown_shape_batches(name):
    """The tiny batch as `fit` gets it from `zoo.data`: a `tf.data.Dataset`
    whose batch size and lengths are unknown when the train step is traced
    (images keep their fixed size)."""
    import tensorflow as tf

    features = inputs(name)

    def spec(key, value):
        dims = [None] + (list(value.shape[1:]) if key == "image" else [None])
        return tf.TensorSpec(dims, tf.as_dtype(value.dtype))

    signature = (
        {key: spec(key, value) for key, value in features.items()},
        tf.TensorSpec([None, None], tf.int32),
    )
    return tf.data.Dataset.from_generator(
        lambda: iter([(features, TARGET_OUT)]), output_signature=signature
    )


# Presets whose ops XLA compiles are a subset of another preset's, which the
# XLA test compiles instead: the dot and general scores are the general score
# of local-p without its window, and local-m is local-p without the predicted
# position; the GRU encoder-decoder is the reversed LSTM one without the
# reversal (a GRU cell's ops are an LSTM cell's; RNNsearch compiles a GRU).
# Compiling a train step is the sweep's cost.
XLA_OPS_COVERED_BY = {
    "luong_global_dot_small": "luong_local_p_general_small",
    "luong_global_general_small": "luong_local_p_general_small",
    "luong_local_m_general_small": "luong_local_p_general_small",
    "rnnencdec_small": "rnnencdec_reversed_small",
    # GNMT's ops are those of Luong's LSTM stack and of RNNsearch's
    # bidirectional encoder, additive attention and step loop, which the
    # test compiles for those presets (residuals add only an add).
    "gnmt_small": "luong_local_p_general_small",
    "gnmt_multi30k": "luong_local_p_general_small",
}


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the XLA test runs on TensorFlow only"
)
def test_the_xla_subset_presets_name_presets_that_run():
    assert set(XLA_OPS_COVERED_BY.values()) <= set(presets_with_distinct_tiny_models())
    assert set(XLA_OPS_COVERED_BY) <= set(zoo.registry.PRESETS)


def without_random_draws(name):
    """Overrides that make a preset's train step use no random number.

    TensorFlow's stateless random ops draw other numbers under XLA (they
    pick their algorithm per compiler), so hard attention's sampled
    locations differ between an XLA step and another one. With every
    caption taking the expected context, its XLA graph, the sampling and
    the REINFORCE loss included, must still give the same losses.
    """
    if zoo.registry.get_preset(name)["model"].get("attention") == "hard":
        return {"expected_context_probability": 1.0}
    return {}


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="jit_compile=True is XLA only on TensorFlow"
)
# Every distinct tiny model, not one per kind as the other sweeps here: the
# XLA while loop and its compiled ops are TensorFlow's own code, checked
# only here.
@pytest.mark.parametrize(
    "preset_name",
    [name for name in presets_with_distinct_tiny_models() if name not in XLA_OPS_COVERED_BY],
)
def test_xla_train_steps_match_the_uncompiled_ones(preset_name):
    # `zoo train --jit-compile on` for every preset: two XLA train steps
    # traced with unknown batch and lengths, as `fit` traces them on the
    # training data, give the losses of the uncompiled steps.
    reference = tiny_model(preset_name, **without_random_draws(preset_name))
    reference(inputs(preset_name))
    weights = reference.get_weights()
    losses = {}
    for jit_compile in (True, False):
        model = tiny_model(preset_name, **without_random_draws(preset_name))
        model(inputs(preset_name))
        model.set_weights(weights)
        # For the reason of `without_random_draws`, monotonic attention's
        # training noise (a layer setting, no recipe argument) is turned off.
        for layer in model._flatten_layers():
            if hasattr(layer, "sigmoid_noise"):
                layer.sigmoid_noise = 0.0
        model.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
            jit_compile=jit_compile,
        )
        # One batch an epoch; the second epoch's loss holds the first
        # step's gradient too.
        history = model.fit(unknown_shape_batches(preset_name), epochs=2, verbose=0)
        losses[jit_compile] = history.history["loss"]
    assert losses[True][0] != losses[True][1]
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-5)


def test_an_empty_batch_gives_empty_logits(preset_name):
    # A worker's share of a short last batch under multi-worker training,
    # in a compiled step as training runs it. Not the LSTM recipes on
    # TensorFlow: keras' LSTMCell itself fails on an empty batch there
    # ("Biases must be 1D: [0, 4 units]"). The cause is keras' TensorFlow
    # `ops.add` (keras 3.15.1, backend/tensorflow/numpy.py): it counts a size-0
    # axis as squeezable, so it takes the cell's second `[0, 4 units]`
    # addend for a bias and calls `tf.nn.bias_add`. Only a batch axis that
    # is statically 0 trips it, as here: a train step traced with an unknown
    # batch size, as `fit` traces it, runs an empty replica share fine.
    if keras.backend.backend() == "tensorflow" and zoo.registry.get_preset(preset_name)[
        "recipe"
    ] in ("rnnencdec", "luong", "gnmt", "show_attend_tell"):
        pytest.skip("keras' LSTMCell fails on an empty batch on TensorFlow")
    model = tiny_model(preset_name)
    model(inputs(preset_name))
    empty = {key: value[:0] for key, value in inputs(preset_name).items()}
    logits = model.predict_on_batch(empty)
    assert tuple(logits.shape) == (0, TARGET_IN.shape[1], VOCABULARY)


def test_a_model_dtype_policy_reaches_every_sublayer(preset_name):
    # `dtype=` on the model alone, with the global policy left at float32:
    # every sublayer must take the model's policy (docs/design.md, "Code like
    # Keras' own"), or the model silently computes in float32, or fails on
    # mixed float16/float32 inputs.
    policy = "mixed_float16"
    reference = tiny_model(preset_name)
    expected = to_numpy(reference(inputs(preset_name)))
    model = tiny_model(preset_name, dtype=policy)
    model(inputs(preset_name))
    # Containers compute nothing themselves: show_attend_tell's CNN is a
    # `keras.Sequential`, which takes no `dtype`, with its `InputLayer`.
    containers = (keras.Model, keras.layers.InputLayer)
    others = {
        layer.path: layer.dtype_policy.name
        for layer in model._flatten_layers(include_self=False)
        if layer.dtype_policy.name != policy and not isinstance(layer, containers)
    }
    assert not others, f"sublayers without the model's {policy} policy: {others}"
    model.set_weights(reference.get_weights())
    logits = model(inputs(preset_name))
    assert keras.backend.standardize_dtype(logits.dtype) == "float16"
    np.testing.assert_allclose(
        to_numpy(logits).astype("float32"), expected, atol=MIXED_PRECISION_TOLERANCE[policy]
    )


def presets_setting(argument):
    return [name for name in presets_under_test() if argument in zoo.registry.get_preset(name)["model"]]


@pytest.mark.parametrize("name", presets_setting("probability_fn"))
def test_the_preset_distribution_reaches_every_attention_layer(name):
    # Also in the model rebuilt from its config, as a reloaded run is. The
    # sublayers exist once the model is constructed: no call is needed.
    expected = zoo.registry.get_preset(name)["model"]["probability_fn"]
    model = tiny_model(name)
    for model in (model, type(model).from_config(model.get_config())):
        distributions = [
            layer.probability_fn
            for layer in model._flatten_layers(include_self=False)
            if hasattr(layer, "probability_fn")
        ]
        assert distributions and set(distributions) == {expected}, distributions


def test_config_round_trip(preset_name):
    model = tiny_model(preset_name)
    config = model.get_config()
    assert type(model).from_config(config).get_config() == config


def test_reverse_valid_tokens_keeps_padding_in_place():
    reversed_tokens = to_numpy(reverse_valid_tokens(SOURCE))
    np.testing.assert_array_equal(reversed_tokens, [[4, 9, 8, 7, 6, 5], [5, 4, 9, 0, 0, 0]])


def test_saved_weights_reload_to_the_same_translations(preset_name, tmp_path):
    model = tiny_model(preset_name)
    model.build()
    expected = greedy_search(model, source_of(preset_name), max_length=6)
    path = tmp_path / "model.weights.h5"
    model.save_weights(path)
    reloaded = type(model).from_config(model.get_config())
    reloaded.build()
    reloaded.load_weights(path)
    result = greedy_search(reloaded, source_of(preset_name), max_length=6)
    np.testing.assert_array_equal(to_numpy(result.tokens), to_numpy(expected.tokens))
    np.testing.assert_allclose(to_numpy(result.scores), to_numpy(expected.scores), atol=1e-5)
