"""Monotonic attention over Luong's multiplicative energy (Raffel et al., 2017)."""

import keras

from zoo.layers._monotonic import MonotonicAttentionMixin
from zoo.layers.luong_attention import LuongAttention


@keras.saving.register_keras_serializable(package="zoo")
class LuongMonotonicAttention(MonotonicAttentionMixin, LuongAttention):
    """Monotonic attention with Luong's energies plus a learned bias `r`:
    `e_ij = h_i^T W_a h_j + r` (`score="general"`, the default, as in
    TensorFlow Addons), `h_i^T h_j + r` (`"dot"`) or
    `v_a^T tanh(W_q h_i + W_k h_j) + r` (`"concat"`); with `scale=True` the
    score is multiplied by a learned scalar before `r` is added.

    Each step i scans the memory left to right from where step i - 1
    stopped and stops at position j with probability `p_ij = sigmoid(e_ij)`,
    as in `BahdanauMonotonicAttention`, which describes the `"parallel"`
    (training: the expected alignment in closed form, with the numerically
    stable log-space cumulative product) and `"hard"` (decoding: one-hot at
    the first position at or after the previous step's with a positive
    energy) modes, the pre-sigmoid noise and the previous alignment.

    Args:
        score: `"dot"`, `"general"` or `"concat"`, as in `LuongAttention`.
        units: int, depth of the concat score; the query depth when `None`.
        scale: bool, multiply the scores by a learned scalar.
        mode: `"parallel"` or `"hard"`, the default of the call's `mode`.
        sigmoid_noise: float >= 0, the standard deviation of the noise
            added to the energies in training.
        sigmoid_noise_seed: optional int, the seed of that noise.
        score_bias_init: float, the initial value of `r` (TensorFlow Addons'
            default 0; the paper suggests a negative value such as -4).
        mass_preservation: bool, stop at the last unmasked memory position
            at the latest (fairseq's `--mass-preservation`): the mass that
            would stop nowhere goes there, so every step of a row with memory
            attends somewhere and its alignment sums to one. False (the
            paper's): a step that stops nowhere gets a zero context.
        dropout: float in [0, 1), dropout rate on the attention weights.
        seed: optional int, seed of the dropout.
        kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer: as in `keras.layers.Dense`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: `[batch, Tq, dq]`, or `[batch, dq]` for one decoding step.
        value: `[batch, Tv, dv]`, the memory.
        key: optional `[batch, Tv, dk]`; `value` when not given.
        query_mask: optional boolean `[batch, Tq]`; a masked step gets zero
            weights and leaves the alignment unchanged for the next step.
        value_mask: optional boolean `[batch, Tv]`; a masked position gets
            exactly zero weight; a fully masked row gets zeros.
        projected_key: optional output of `project_keys(key)`.
        previous_alignment: optional `[batch, Tv]`, the alignment of the
            step before the (first) query; `initial_alignment` when None.
        mode: optional `"parallel"` or `"hard"`; the layer's `mode` when
            None.
        energy_noise: optional standard-normal draws shaped like the
            energies (`[batch, Tq, Tv]`, or `[batch, Tv]` for a rank-2
            query), used as the noise in training instead of a draw of the
            layer's own (`draw_energy_noise`). The attention decoders draw
            every step's noise before their loop over the steps, where a
            draw of the layer's could not run in JAX's compiled train step.
        return_attention_scores: also return the alignment `[batch, Tq, Tv]`
            (`[batch, Tv]` for a rank-2 query), before dropout.
        training: whether the noise and dropout are active.

    Returns:
        The context `[batch, Tq, dv]` (`[batch, dv]` for a rank-2 query), and
        the alignment when `return_attention_scores=True`.

    Example:

    >>> attention = LuongMonotonicAttention(score="general", mode="hard")
    >>> decoder_states = np.random.rand(2, 4, 6).astype("float32")
    >>> encoder_states = np.random.rand(2, 5, 6).astype("float32")
    >>> _, alignment = attention(
    ...     decoder_states, encoder_states, return_attention_scores=True)
    >>> alignment = keras.ops.convert_to_numpy(alignment)
    >>> bool(np.all((alignment == 0) | (alignment == 1)))
    True
    >>> bool(np.all(alignment.sum(-1) <= 1))
    True

    References:
        - [Raffel et al., 2017](https://arxiv.org/abs/1704.00784), "Online
          and Linear-Time Attention by Enforcing Monotonic Alignments".
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """
