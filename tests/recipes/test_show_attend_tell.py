"""Show, Attend and Tell: the doubly stochastic loss, the encoders, the options.

The contract (decode_step = teacher forcing, gradients, fit, reload) is held
by the preset sweep in test_recipes.py.
"""

import keras
import numpy as np
import pytest
from layer_checks import to_numpy

from zoo.recipes.show_attend_tell import ShowAttendTell

TARGET_IN = np.array([[2, 5, 6, 7], [2, 8, 0, 0]], "int32")
TARGET_OUT = np.array([[5, 6, 7, 3], [8, 3, 0, 0]], "int32")
IMAGES = np.random.default_rng(0).random((2, 16, 16, 3)).astype("float32")


def tiny(**overrides):
    config = {
        "target_vocabulary_size": 11,
        "image_size": 16,
        "encoder_filters": [4, 4],
        "feature_dim": 6,
        "embedding_dim": 6,
        "hidden_dim": 8,
        "attention_units": 5,
        **overrides,
    }
    return ShowAttendTell(**config)


def numpy_penalty(alpha, target_in, lam):
    """lambda * sum_b sum_i (1 - sum_t alpha_bti)^2 over real steps / #tokens."""
    mask = (target_in != 0)[:, :, None]
    per_location = np.sum(alpha * mask, axis=1)
    return lam * np.sum((1 - per_location) ** 2) / mask.sum()


def test_doubly_stochastic_loss_of_a_known_alpha():
    model = tiny(doubly_stochastic_lambda=0.5)
    alpha = np.zeros((2, 4, 16), "float32")
    alpha[0, :, 0] = 1.0  # example 0 looks at location 0 for its 4 steps
    alpha[1, :, 3] = 1.0  # example 1 at location 3; 2 real steps, 2 padding
    # Example 0: location 0 gets 4 (penalty 9), the 15 others 0 (1 each): 24.
    # Example 1: location 3 gets 2 (penalty 1), the 15 others: 15 -> 16.
    # lambda * (24 + 16) / 6 tokens.
    expected = 0.5 * (24 + 16) / 6
    assert float(to_numpy(model.doubly_stochastic_loss(alpha, TARGET_IN))) == pytest.approx(expected)
    assert numpy_penalty(alpha, TARGET_IN, 0.5) == pytest.approx(expected)


def test_the_penalty_changes_the_training_loss_by_its_value():
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    with_penalty = tiny(doubly_stochastic_lambda=1.0)
    without = tiny(doubly_stochastic_lambda=0.0)
    inputs = {"image": IMAGES, "target_in": TARGET_IN}
    with_penalty.build()
    without.build()
    without.set_weights(with_penalty.get_weights())
    for model in (with_penalty, without):
        model.compile(optimizer="sgd", loss=loss)
    difference = with_penalty.evaluate(inputs, TARGET_OUT, verbose=0) - without.evaluate(
        inputs, TARGET_OUT, verbose=0
    )
    alpha = to_numpy(with_penalty.attention_weights(inputs))
    assert difference == pytest.approx(numpy_penalty(alpha, TARGET_IN, 1.0), rel=1e-4)
    assert difference > 0


def test_the_grid_follows_the_encoder():
    model = tiny(image_size=32, encoder_filters=[4, 4, 4])
    assert model.grid_shape == (4, 4)
    state = model.encode(np.zeros((1, 32, 32, 3), "float32"))
    assert tuple(state["features"].shape) == (1, 16, 6)


def test_separable_grid_layers_train_and_survive_the_config():
    model = tiny(grid_layers=2, separable_grid=True)
    separable = [
        layer.name
        for layer in model.image_encoder.layers
        if isinstance(layer, keras.layers.SeparableConv2D)
    ]
    assert separable == ["grid_0", "annotations"]
    assert ShowAttendTell.from_config(model.get_config()).separable_grid
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=0))
    before = [to_numpy(w).copy() for w in model.image_encoder.trainable_weights]
    model.fit({"image": IMAGES, "target_in": TARGET_IN}, TARGET_OUT, verbose=0)
    after = model.image_encoder.trainable_weights
    assert all(not np.array_equal(b, to_numpy(a)) for b, a in zip(before, after))


@pytest.mark.tensorflow_only
def test_a_keras_applications_backbone_with_local_weights(tmp_path):
    model = tiny(image_size=32, encoder="MobileNetV2")
    model.build()
    assert model.grid_shape == (1, 1) and model.annotation_dim == 1280
    path = tmp_path / "backbone.weights.h5"
    model.image_encoder.save_weights(path)
    reloaded = tiny(image_size=32, encoder="MobileNetV2", encoder_weights=str(path))
    for saved, loaded in zip(model.image_encoder.weights, reloaded.image_encoder.weights):
        np.testing.assert_array_equal(to_numpy(saved), to_numpy(loaded))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"encoder": "NoSuchNet"}, "keras.applications model name"),
        ({"encoder": "MobileNetV2", "encoder_weights": "imagenet"}, "nothing is downloaded"),
        ({"doubly_stochastic_lambda": -1.0}, "doubly_stochastic_lambda"),
    ],
)
def test_bad_options_are_one_line_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny(image_size=32, **overrides)
