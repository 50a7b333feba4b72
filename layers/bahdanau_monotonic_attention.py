"""Monotonic attention over Bahdanau's additive energy (Raffel et al., 2017)."""

import keras

from zoo.layers._monotonic import MonotonicAttentionMixin
from zoo.layers.additive_attention import AdditiveAttention


@keras.saving.register_keras_serializable(package="zoo")
class BahdanauMonotonicAttention(MonotonicAttentionMixin, AdditiveAttention):
    """Monotonic attention with the additive energy
    `e_ij = v_a^T tanh(W_a s_i + U_a h_j + b) + r`.

    Each step i scans the memory left to right from where step i - 1
    stopped and stops at position j with probability `p_ij = sigmoid(e_ij)`;
    the context is the memory at the stop (zeros where it never stops,
    unless `mass_preservation`), so attention never moves back and decoding
    can stream. `r` is a learned
    scalar bias (`score_bias_init`); with `normalize=True`, `v_a` is
    weight-normalised (`g v_a / ||v_a||`), which with `r` is the paper's
    modified energy.

    - `mode="parallel"` (training): the expected alignment
      `alpha_ij = p_ij prod_{k<j}(1 - p_ik) sum_{k<=j} alpha_{i-1,k} / prod_{l<k}(1 - p_il)`,
      for all positions at once with cumulative sums and a cumulative
      product taken in log space (`exp(cumsum(log(1 - p)))`, clipped), the
      paper's numerically stable form. Its rows sum to at most one. The
      closed form divides by `prod_{l<k}(1 - p_il)`, floored at 1e-10 as in
      TensorFlow Addons, so previous-step mass that lies after a position
      where the step has already stopped with near certainty (that product
      below 1e-10) is dropped rather than carried on.
    - `mode="hard"` (decoding): `alpha_i` is one-hot at the first position
      at or after step i - 1's whose energy is positive (`p > 0.5`), or all
      zeros when there is none (and then at every later step).

    With `sigmoid_noise > 0`, Gaussian noise of that standard deviation is
    added to the energies in training only, which pushes `p` towards 0 or 1
    so that training matches hard decoding; the paper uses unit variance.

    The layer needs the previous step's alignment: pass it as
    `previous_alignment` (the weights the last call returned); before the
    first step it is a one-hot at position 0 (`initial_alignment`), the
    default. A rank-3 query runs the steps one after the other from it.

    Args:
        units: int, the depth of the projections (`v_a` has this size).
        use_bias: bool, whether the query projection has a bias `b`.
        normalize: bool, weight-normalise `v_a`.
        mode: `"parallel"` or `"hard"`, the default of the call's `mode`.
        sigmoid_noise: float >= 0, the standard deviation of the noise
            added to the energies in training.
        sigmoid_noise_seed: optional int, the seed of that noise.
        score_bias_init: float, the initial value of `r`. TensorFlow Addons'
            default is 0; a negative value (the paper suggests -4) makes
            early stops unlikely at the start of training, which long
            memories need.
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
        value_mask: optional boolean `[batch, Tv]`; a masked position is
            never stopped at and gets exactly zero weight; a fully masked
            row gets zeros.
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
            (`[batch, Tv]` for a rank-2 query), before dropout: the next
            step's `previous_alignment`.
        training: whether the noise and dropout are active.

    Returns:
        The context `[batch, Tq, dv]` (`[batch, dv]` for a rank-2 query), and
        the alignment when `return_attention_scores=True`.

    Examples:

    Teacher-forced, the expected alignment of every step:

    >>> attention = BahdanauMonotonicAttention(units=8, score_bias_init=-1.0)
    >>> decoder_states = np.random.rand(2, 4, 6).astype("float32")
    >>> encoder_states = np.random.rand(2, 5, 6).astype("float32")
    >>> context, alignment = attention(
    ...     decoder_states, encoder_states, return_attention_scores=True)
    >>> tuple(context.shape), tuple(alignment.shape)
    ((2, 4, 6), (2, 4, 5))

    Hard decoding, one step at a time, the alignment carried along; each
    step attends to one position, never behind the last (or to none, from
    then on: counted as position 5 here):

    >>> keys = attention.project_keys(encoder_states)
    >>> alignment = attention.initial_alignment(2, 5)
    >>> positions = []
    >>> for step in range(4):
    ...     context, alignment = attention(
    ...         decoder_states[:, step], encoder_states, projected_key=keys,
    ...         previous_alignment=alignment, mode="hard",
    ...         return_attention_scores=True)
    ...     weights = keras.ops.convert_to_numpy(alignment)
    ...     positions.append(np.where(weights.sum(-1) > 0, weights.argmax(-1), 5))
    >>> bool(np.all(np.diff(np.stack(positions), axis=0) >= 0))
    True

    References:
        - [Raffel et al., 2017](https://arxiv.org/abs/1704.00784), "Online
          and Linear-Time Attention by Enforcing Monotonic Alignments".
        - [Bahdanau et al., 2014](https://arxiv.org/abs/1409.0473)
    """
