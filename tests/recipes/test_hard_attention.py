"""Show, Attend and Tell's stochastic hard attention (Xu et al. 2015, 4.1):
the sampler, the REINFORCE estimator on a toy whose expected gradient is
known exactly, and the recipe's sampled steps, baseline and test-time path.

The preset sweep (test_recipes.py) trains `show_attend_tell_hard_small` with
`fit` on every backend, and holds decode_step to teacher forcing.
"""

import numpy as np
import pytest
from keras import ops
from layer_checks import to_numpy
from layer_checks import vector_jacobian_product

from tiny_configs import TINY
from tiny_configs import TARGET_IN
from tiny_configs import TARGET_OUT
from zoo.recipes._hard_attention import attention_entropy
from zoo.recipes._hard_attention import hard_attention_surrogate
from zoo.recipes._hard_attention import next_tokens
from zoo.recipes._hard_attention import sample_locations
from zoo.recipes.show_attend_tell import ShowAttendTell

SAMPLES = 20000
# The toy: a categorical choice among four locations with fixed rewards.
LOGITS = np.array([0.5, -0.3, 0.2, 0.0], "float32")
REWARDS = np.array([1.0, 0.0, 2.0, 0.5], "float32")


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def exact_gradient(logits, rewards, reward_weight, entropy_weight):
    """d/d logits of `reward_weight E_{s~p}[r_s] + entropy_weight H[p]`,
    p = softmax(logits), by hand."""
    p = softmax(logits.astype("float64"))
    entropy = -np.sum(p * np.log(p))
    expected_reward = reward_weight * p * (rewards - np.sum(p * rewards))
    return expected_reward - entropy_weight * p * (np.log(p) + entropy)


def sampled_gradients(rewards, baseline, reward_weight, entropy_weight, seed=0):
    """One surrogate gradient per sample `[SAMPLES, L]`: each sample has its
    own copy of the logits, so one backward pass gives them all."""
    locations = np.random.default_rng(seed).choice(len(LOGITS), SAMPLES, p=softmax(LOGITS))
    logits = np.tile(LOGITS, (SAMPLES, 1))

    def surrogate(logits):
        alpha = ops.softmax(logits, axis=-1)
        chosen = ops.take_along_axis(alpha, ops.convert_to_tensor(locations[:, None]), axis=-1)
        return hard_attention_surrogate(
            ops.log(chosen[:, 0]),
            attention_entropy(ops.expand_dims(alpha, 1)),
            ops.convert_to_tensor(rewards[locations]),
            baseline,
            reward_weight,
            entropy_weight,
        )

    return vector_jacobian_product(surrogate, logits, np.ones(SAMPLES))


def test_sampled_locations_follow_the_weights():
    alpha = np.array([0.1, 0.0, 0.5, 0.4], "float32")
    noise = np.random.default_rng(0).random(SAMPLES).astype("float32")
    locations = to_numpy(sample_locations(np.tile(alpha, (SAMPLES, 1)), noise))
    frequencies = np.bincount(locations, minlength=4) / SAMPLES
    # Four standard errors of a frequency near 0.5 over 20000 draws.
    np.testing.assert_allclose(frequencies, alpha, atol=0.015)
    assert frequencies[1] == 0.0  # a zero weight is never picked


def test_the_average_sampled_gradient_is_the_exact_gradient():
    # E_s[lambda_r (r_s - b) grad log p_s + lambda_e grad H] =
    # lambda_r grad sum_s p_s r_s + lambda_e grad H, whatever b.
    gradients = sampled_gradients(REWARDS, baseline=0.9, reward_weight=1.0, entropy_weight=0.5)
    expected = exact_gradient(LOGITS, REWARDS, 1.0, 0.5)
    # Its standard error is below 0.004 (|r - b| <= 1.1): 0.02 is five of them.
    np.testing.assert_allclose(gradients.mean(0), expected, atol=0.02)
    assert np.abs(expected).max() > 0.1


def test_the_baseline_keeps_the_mean_and_lowers_the_variance():
    # Rewards near 10, as log-likelihoods are all of one sign: without a
    # baseline every sampled location is pushed the same way, and only the
    # average over many samples cancels it out.
    rewards = REWARDS + 10.0
    baseline = float(np.sum(softmax(LOGITS) * rewards))
    with_baseline = sampled_gradients(rewards, baseline, 1.0, 0.0)
    without = sampled_gradients(rewards, 0.0, 1.0, 0.0)
    expected = exact_gradient(LOGITS, rewards, 1.0, 0.0)
    np.testing.assert_allclose(with_baseline.mean(0), expected, atol=0.02)
    assert np.all(with_baseline.var(0) < 0.05 * without.var(0))


def test_the_reward_and_the_baseline_get_no_gradient():
    # The reward log p(y|s,a) depends on the model: a gradient through it
    # would add lambda_r log p(s) grad log p(y|s,a), which is no estimator.
    log_prob = np.array([-1.0, -2.0], "float32")
    entropy = np.array([0.5, 0.3], "float32")
    reward = np.array([-3.0, -4.0], "float32")

    # Each function adds its argument once, so that its gradient is connected
    # (TensorFlow gives None for a disconnected one) and known: 1 per element.
    def of_reward(r):
        return hard_attention_surrogate(log_prob, entropy, r, 1.0, 1.0, 0.1) + r

    def of_baseline(b):
        return hard_attention_surrogate(log_prob, entropy, reward, b, 1.0, 0.1) + b

    np.testing.assert_array_equal(vector_jacobian_product(of_reward, reward, [1.0, 1.0]), 1.0)
    np.testing.assert_array_equal(vector_jacobian_product(of_baseline, 1.0, [1.0, 1.0]), 2.0)


def test_next_tokens_are_the_pipeline_targets():
    np.testing.assert_array_equal(to_numpy(next_tokens(TARGET_IN, 0, 3)), TARGET_OUT)


# The recipe ---------------------------------------------------------------

IMAGES = np.random.default_rng(1).random((8, 16, 16, 3)).astype("float32")
CAPTIONS_IN = np.tile(TARGET_IN, (4, 1))
CAPTIONS_OUT = np.tile(TARGET_OUT, (4, 1))


def tiny(**overrides):
    return ShowAttendTell(13, **{**TINY["show_attend_tell"], "attention": "hard", **overrides})


def caption_log_likelihoods(logits, target_out):
    log_p = logits - np.log(np.sum(np.exp(logits), -1, keepdims=True))
    token = np.take_along_axis(log_p, target_out[..., None], -1)[..., 0]
    return np.sum(token * (target_out != 0), axis=1)


def test_a_sampled_step_reads_one_annotation_and_its_log_probability():
    model = tiny()
    state = model.encode(IMAGES[:2])
    embedded = model.embed_targets(np.full((2,), 2, "int32"))
    noise = np.array([[0.03], [0.97]], "float32")

    def step(expected):
        flags = np.full((2, 1), expected, "float32")
        return model.decoder.step(
            ops.concatenate([embedded, noise, flags], axis=-1),
            [state["hidden"], state["cell"]],
            state["features"],
            projected_memory=state["projected_features"],
        )

    features = to_numpy(state["features"])
    gate = to_numpy(model.decoder.attention.gate_dense(state["hidden"]))
    hidden = model.hidden_dim
    outputs, _, alpha = step(0.0)
    outputs, alpha = to_numpy(outputs), to_numpy(alpha)
    locations = [int(np.sum(np.cumsum(row) <= u)) for row, u in zip(alpha, noise[:, 0])]
    rows = np.arange(2)
    np.testing.assert_allclose(
        outputs[:, hidden:-1], gate * features[rows, locations], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(outputs[:, -1], np.log(alpha[rows, locations]), rtol=1e-5)
    # The expected context, and no sample, when the flag says so.
    outputs, _, alpha = step(1.0)
    outputs, alpha = to_numpy(outputs), to_numpy(alpha)
    expected = gate * np.einsum("bl,bld->bd", alpha, features)
    np.testing.assert_allclose(outputs[:, hidden:-1], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(outputs[:, -1], 0.0)


def test_training_samples_and_moves_the_baseline():
    model = tiny(doubly_stochastic_lambda=0.0)
    inputs = {"image": IMAGES, "target_in": CAPTIONS_IN}
    baselines, logits = [], []
    for _ in range(2):
        logits.append(to_numpy(model(inputs, training=True)))
        # The surrogate adds its gradient, not its value, to the loss.
        assert [float(to_numpy(loss)) for loss in model.losses] == [0.0]
        baselines.append(float(to_numpy(model.reward_baseline)))
        mean_reward = np.mean(caption_log_likelihoods(logits[-1], CAPTIONS_OUT))
        # The first batch sets the baseline, later ones move it by a tenth.
        expected = mean_reward if len(baselines) == 1 else 0.9 * baselines[0] + 0.1 * mean_reward
        assert baselines[-1] == pytest.approx(expected, rel=1e-5)
    # Other locations, and captions, sampled the second time.
    assert np.abs(logits[0] - logits[1]).max() > 1e-3


def test_at_test_time_a_hard_model_decodes_as_a_soft_one():
    # The expected context: a soft model with the same weights takes the
    # same steps (decode_step = teacher forcing is the preset sweep's).
    hard = tiny(name="captioner")
    soft = ShowAttendTell(13, **{**TINY["show_attend_tell"], "name": "captioner"})
    tokens = np.full((2,), 2, "int32")

    def two_steps(model):
        logits, state, attention = model.decode_step(tokens, model.encode(IMAGES[:2]), 0)
        logits, state, attention = model.decode_step(tokens + 3, state, 1)
        return to_numpy(logits), to_numpy(attention)

    two_steps(soft)  # builds its weights
    expected = two_steps(hard)
    hard_weights = {w.path: w for w in hard.weights}
    for weight in soft.weights:
        weight.assign(hard_weights[weight.path])
    for got, want in zip(two_steps(soft), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"attention": "stochastic"}, "`attention` must be one of 'soft', 'hard'"),
        ({"reinforce_weight": -0.1}, "reinforce_weight"),
        ({"entropy_weight": True}, "entropy_weight"),
        ({"expected_context_probability": 1.5}, "expected_context_probability"),
        ({"sampling_seed": 1.5}, "sampling_seed"),
    ],
)
def test_bad_hard_attention_options_are_one_line_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny(**overrides)
