"""Gradient accumulation (`gradient_accumulation_steps`): N batches of B
update the weights as one batch of N * B does, learning rate included, also
across a checkpoint taken inside an accumulation."""

import keras
import numpy as np
import pytest

from zoo.training import checkpoints
from zoo.training import distributed
from zoo.training.config import TrainingConfig
from zoo.training.config import TrainingError
from zoo.training.losses import TokenCrossentropy
from zoo.training.schedules import learning_rate_schedule
from zoo.training.schedules import optimizer

pytestmark = pytest.mark.tensorflow_only  # TokenCrossentropy's replica sum

VOCABULARY, LENGTH, PAIRS = 7, 3, 16
RANDOM = np.random.default_rng(0)
# One-hot tokens into a Dense layer, not an Embedding: on TensorFlow Keras'
# Adam squares an Embedding's sparse gradient (IndexedSlices) by occurrence
# of a token, before their sum, while an accumulated gradient is dense.
INPUTS = np.eye(VOCABULARY, dtype="float32")[RANDOM.integers(1, VOCABULARY, (PAIRS, LENGTH))]
# No padding: every batch has as many target tokens, see the test below.
TARGETS = RANDOM.integers(1, VOCABULARY, (PAIRS, LENGTH))


def token_classifier(optimizer_of_run):
    """A tiny model of each token's next token, compiled with
    `optimizer_of_run` and the runs' loss."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((LENGTH, VOCABULARY)),
            keras.layers.Dense(4, use_bias=False),
            keras.layers.Dense(VOCABULARY),
        ]
    )
    model.compile(optimizer=optimizer_of_run, loss=TokenCrossentropy())
    return model


def compiled_model(batch_size, accumulation):
    """The tiny model compiled as a run compiles its model: Adam with the
    run's schedule (a warm-up, then the cosine decay) and clipping."""
    training = TrainingConfig(
        batch_size=batch_size, gradient_accumulation_steps=accumulation, epochs=2,
        learning_rate=0.05, warmup_steps=2,
    )
    schedule = learning_rate_schedule(training, batches_per_epoch=PAIRS // batch_size)
    return token_classifier(optimizer(training, schedule))


def fit(model, batch_size, start=0, epochs=1):
    model.fit(
        INPUTS[start:], TARGETS[start:], batch_size=batch_size, epochs=epochs, shuffle=False,
        verbose=0,
    )
    return model


def assert_same_weights(model, expected):
    for got, want in zip(model.get_weights(), expected.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def one_big_batch():
    """Two epochs of batches of 4: 8 updates."""
    return fit(compiled_model(4, 1), 4, epochs=2)


def test_two_batches_of_two_update_as_one_batch_of_four(one_big_batch):
    accumulated = fit(compiled_model(2, 2), 2, epochs=2)
    assert int(accumulated.optimizer.iterations) == int(one_big_batch.optimizer.iterations) == 8
    assert_same_weights(accumulated, one_big_batch)


def test_a_run_resumed_inside_an_accumulation_goes_on_exactly(one_big_batch, tmp_path):
    # The accumulated gradients are optimizer variables: a step checkpoint
    # keeps them, halfway through an update.
    interrupted = fit(compiled_model(2, 2), 2, epochs=1)
    interrupted.fit(INPUTS[:6], TARGETS[:6], batch_size=2, shuffle=False, verbose=0)
    checkpoints.save_checkpoint(interrupted, tmp_path, epochs_done=1, steps_done=3)
    resumed = compiled_model(2, 2)
    resumed.build((None, LENGTH, VOCABULARY))
    checkpoints.restore(resumed, checkpoints.latest_checkpoint(tmp_path))
    assert_same_weights(fit(resumed, 2, start=6), one_big_batch)


def test_accumulation_averages_each_batchs_token_mean():
    # The loss of a batch is the mean over ITS tokens, so an update is the
    # mean of the batches' own gradients: the mean of the updates each batch
    # makes alone. One big batch weighs each token alike instead, so the two
    # agree only when the batches have as many tokens (as above).
    targets = TARGETS[:4].copy()
    targets[:2, 1:] = 0  # padding: 2 tokens in the first batch, 6 in the second

    def sgd_model(accumulation):
        return token_classifier(
            keras.optimizers.SGD(0.5, gradient_accumulation_steps=accumulation)
        )

    accumulated = sgd_model(2)
    accumulated.fit(INPUTS[:4], targets, batch_size=2, shuffle=False, verbose=0)
    alone = []
    for first in (0, 2):
        model = sgd_model(None)
        model.fit(INPUTS[first:first + 2], targets[first:first + 2], batch_size=2, verbose=0)
        alone.append(model.get_weights())
    for got, *each in zip(accumulated.get_weights(), *alone):
        np.testing.assert_allclose(got, np.mean(each, axis=0), rtol=1e-5, atol=1e-6)


def test_a_tensorflow_strategy_of_several_devices_refuses_accumulation():
    # Keras all-reduces inside the optimizer's cond, which TensorFlow
    # refuses; the refusal comes before anything is written.
    class TwoReplicas:
        num_replicas_in_sync = 2

    with pytest.raises(TrainingError) as error:
        distributed.check_gradient_accumulation(TwoReplicas(), 2)
    assert "--gradient-accumulation-steps 1" in str(error.value)
    assert "\n" not in str(error.value)
    distributed.check_gradient_accumulation(TwoReplicas(), 1)
    distributed.check_gradient_accumulation(None, 4)
