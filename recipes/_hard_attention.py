"""Stochastic "hard" attention (Xu et al. 2015, section 4.1): sampling a
location from the attention weights, and the REINFORCE surrogate that trains
the weights from the caption's likelihood.

The pieces are small functions so that a test can check the estimator on a
toy whose expected gradient is known exactly (tests/recipes/
test_hard_attention.py), and a decoder that `ShowAttendTell(attention=
"hard")` runs: `SampledAttentionDecoder`.
"""

import keras
from keras import ops

from zoo.layers import BahdanauDecoder

# Guards the logarithm of a weight that is zero (a location sparsemax left
# out, or one that underflowed): its term of the entropy is 0, and a sample
# never lands on it.
_TINY = 1e-12


def sample_locations(attention, noise):
    """The location each row of `attention` picks for its uniform `noise`.

    Inverse-CDF sampling: row r takes the first location whose cumulative
    weight exceeds `noise[r]`, so a location is picked with probability its
    weight, one uniform number per row (the draw itself happens before the
    decoder's loop, see `ShowAttendTell`).

    Args:
        attention: `[..., L]` weights, each row summing to 1.
        noise: `[...]` uniform numbers in [0, 1).

    Returns:
        int32 `[...]`, indices in [0, L).

    Example:

    >>> alpha = np.array([[0.2, 0.5, 0.3]], "float32")
    >>> [int(sample_locations(alpha, np.array([u], "float32"))[0])
    ...  for u in (0.1, 0.3, 0.69, 0.75, 0.99)]
    [0, 1, 1, 2, 2]
    """
    cumulative = ops.cumsum(ops.cast(attention, "float32"), axis=-1)
    noise = ops.expand_dims(ops.cast(noise, "float32"), -1)
    # The number of locations whose cumulative weight is <= u is the index of
    # the first one above it; rounding can leave the last cumulative weight
    # just under 1, hence the clip.
    below = ops.sum(ops.cast(cumulative <= noise, "int32"), axis=-1)
    return ops.minimum(below, ops.shape(attention)[-1] - 1)


def attention_entropy(attention, step_mask=None):
    """`H[s] = sum_t -sum_i alpha_ti log alpha_ti` of each example, float32 `[B]`.

    Args:
        attention: `[B, T, L]` weights.
        step_mask: optional boolean `[B, T]`, False on padding steps.
    """
    alpha = ops.cast(attention, "float32")
    per_step = -ops.sum(alpha * ops.log(ops.maximum(alpha, _TINY)), axis=-1)
    if step_mask is not None:
        per_step = per_step * ops.cast(step_mask, "float32")
    return ops.sum(per_step, axis=-1)


def hard_attention_surrogate(
    sample_log_prob, entropy, reward, baseline, reward_weight, entropy_weight
):
    """The objective whose gradient is the paper's estimator for the locations.

    `reward_weight * (reward - baseline) * log p(s|a) + entropy_weight * H[s]`,
    with the reward and the baseline held constant (`stop_gradient`), so
    that its gradient is `lambda_r (log p(y|s,a) - b) grad log p(s|a) +
    lambda_e grad H[s]`, the second and third terms of equation 12 (Xu et
    al. 2015). Its average over sampled locations is an unbiased estimate of
    `lambda_r grad E_s[reward] + lambda_e grad H`; the baseline changes the
    variance, not the mean, since `E_s[grad log p(s|a)] = 0`. The first term
    of equation 12, `grad log p(y|s,a)`, is the cross-entropy that `fit`
    already minimises.

    Args:
        sample_log_prob: `[B]`, `log p(s|a) = sum_t log alpha_t[s_t]` of the
            sampled locations.
        entropy: `[B]`, `H[s]` of the weights they were sampled from
            (`attention_entropy`).
        reward: `[B]`, `log p(y|s,a)`, the caption's log-likelihood given
            the sampled locations.
        baseline: scalar, `b`, the moving average of the reward.
        reward_weight: float, lambda_r.
        entropy_weight: float, lambda_e.

    Returns:
        float32 `[B]`, to be maximised (a loss adds its negative).
    """
    advantage = ops.stop_gradient(
        ops.cast(reward, "float32") - ops.cast(baseline, "float32")
    )
    return reward_weight * advantage * ops.cast(
        sample_log_prob, "float32"
    ) + entropy_weight * ops.cast(entropy, "float32")


def next_tokens(target_in, pad_id, eos_id):
    """`target_out` from `target_in`: `[BOS] y1 .. yn [PAD]..` -> `y1 .. yn [EOS] [PAD]..`.

    The pairs of `zoo.data` are so built (`zoo.data.caption_pipeline`), and
    the surrogate loss needs the targets inside `call`, which sees only the
    inputs.
    """
    real = ops.not_equal(target_in, pad_id)
    following = ops.concatenate(
        [target_in[:, 1:], ops.full_like(target_in[:, :1], pad_id)], axis=1
    )
    following_real = ops.not_equal(following, pad_id)
    last = ops.logical_and(real, ops.logical_not(following_real))
    return ops.where(last, ops.full_like(target_in, eos_id), following)


@keras.saving.register_keras_serializable(package="zoo")
class SampledAttentionDecoder(BahdanauDecoder):
    """A `BahdanauDecoder` over a `SpatialSoftAttention` whose context is,
    on request, the annotation vector of a sampled location.

    Each step's input is `[x_t; u_t; e_t]`: the embedding, a uniform number
    `u_t` and a flag `e_t`. With `e_t = 1` the step is the soft decoder's
    (the gated expected context `beta_t sum_i alpha_ti a_i`); with `e_t = 0`
    it samples `s_t ~ alpha_t` (`sample_locations`) and the context is
    `beta_t a_{s_t}`. The output is `[h_t; z_t; log alpha_t[s_t]]` (0 in
    the last column when `e_t = 1`): REINFORCE needs the log-probability of
    the location the step used, which only the step knows. The attention it
    returns is `alpha_t`, the distribution.

    Args:
        cell, attention, **kwargs: see `BahdanauDecoder`
            (`output_context` is always True).
    """

    def __init__(self, cell, attention, **kwargs):
        kwargs.pop("output_context", None)
        super().__init__(cell, attention, output_context=True, **kwargs)

    def _cell_input_size(self, inputs_size, memory_size):
        return inputs_size - 2 + memory_size

    def _output_size(self, memory_size):
        return super()._output_size(memory_size) + 1

    def _step(self, inputs, states, memory, projected_memory, memory_mask, step, training):
        inputs, noise, expected = inputs[..., :-2], inputs[..., -2], inputs[..., -1:]
        query = states[self._query_index()]
        soft_context, alpha = self._attend(
            query, memory, projected_memory, memory_mask, step, training
        )
        location = sample_locations(alpha, noise)
        positions = ops.expand_dims(ops.arange(ops.shape(alpha)[-1], dtype="int32"), 0)
        chosen = ops.cast(ops.equal(positions, ops.expand_dims(location, -1)), memory.dtype)
        sampled_context = ops.einsum("bl,bld->bd", chosen, memory)
        gate = self.attention.gate_dense
        if gate is not None:
            sampled_context = sampled_context * gate(query)
        use_expected = ops.cast(expected, "bool")
        context = ops.where(use_expected, ops.cast(soft_context, memory.dtype), sampled_context)
        chosen_weight = ops.sum(ops.cast(alpha, "float32") * ops.cast(chosen, "float32"), -1)
        log_prob = ops.where(
            use_expected, 0.0, ops.expand_dims(ops.log(ops.maximum(chosen_weight, _TINY)), -1)
        )
        output, new_states = self._run_cell(
            ops.concatenate([inputs, ops.cast(context, inputs.dtype)], axis=-1),
            states,
            training,
        )
        output = ops.concatenate(
            [output, ops.cast(context, output.dtype), ops.cast(log_prob, output.dtype)], axis=-1
        )
        return output, new_states, alpha

    def get_config(self):
        config = super().get_config()
        config.pop("output_context", None)
        return config
