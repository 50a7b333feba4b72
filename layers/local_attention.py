"""Luong's local attention: local-m and local-p with the Gaussian window."""

import keras
from keras import ops

from zoo.layers.base_attention import clone_initializer
from zoo.layers.base_attention import is_positive_int
from zoo.layers.base_attention import project
from zoo.layers.luong_attention import LuongAttention

MODES = ("local-m", "local-p")


@keras.saving.register_keras_serializable(package="zoo")
class LocalAttention(LuongAttention):
    """Luong's local attention over a window of `2 * window + 1` positions.

    Each target step t attends only to the source positions within
    `window` (D in the paper) of a centre p_t:

    - `mode="local-m"` (monotonic): `p_t = t`, the query's own position; the
      weights are the softmax of the scores inside the window.
    - `mode="local-p"` (predictive): `p_t = S * sigmoid(v_p^T tanh(W_p h_t))`,
      where S is the example's true (unpadded) source length; the softmax
      inside the window is multiplied by the Gaussian
      `exp(-(s - p_t)^2 / (2 sigma^2))` with `sigma = window / 2`, so the
      weights of a step sum to less than one, as in the paper.

    With `probability_fn="sparsemax"` the softmax inside the window is
    replaced by sparsemax over the same positions; for local-p the Gaussian
    multiplies the sparsemax weights as it multiplies the softmax ones (the
    paper applies it after the distribution, so any distribution composes
    with it), and a position sparsemax gives zero stays zero.

    Positions outside `[p_t - D, p_t + D]` and padded positions get exactly
    zero weight. The scores are Luong's `dot`, `general` or `concat`. The
    weights are computed over the whole source and masked outside the window,
    which costs O(Tq * Tv) like global attention but keeps every shape static.

    For one decoding step (a rank-2 query) local-m needs the step index:
    pass `step=t`. With a rank-3 query, `step` (default 0) is the position of
    the first query, so a chunk of steps can be attended at once.

    Args:
        mode: `"local-m"` or `"local-p"`.
        window: positive int, the half-width D of the window.
        score: `"dot"`, `"general"` or `"concat"`, as in `LuongAttention`.
        units: depth of the concat score (see `LuongAttention`).
        position_units: depth of `W_p` for local-p; the query depth when
            `None`.
        scale: bool, multiply the scores by a learned scalar.
        dropout: float in [0, 1), dropout rate on the attention weights.
        seed: optional int, seed of the dropout.
        kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer: as in `keras.layers.Dense`.
        probability_fn: `"softmax"` or `"sparsemax"`, the distribution
            inside the window.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: `[batch, Tq, dq]`, or `[batch, dq]` for one decoding step.
        value: `[batch, Tv, dv]`.
        key: optional `[batch, Tv, dk]`; `value` when not given.
        query_mask: optional boolean `[batch, Tq]`.
        value_mask: optional boolean `[batch, Tv]`; it also gives S for
            local-p.
        projected_key: optional output of `project_keys(key)`.
        step: int or scalar tensor, the target position of the (first)
            query; needed by local-m for a rank-2 query.
        return_attention_scores: also return the weights `[batch, Tq, Tv]`.
        training: whether dropout is active.

    Returns:
        The context `[batch, Tq, dv]` (`[batch, dv]` for a rank-2 query), and
        the attention weights when `return_attention_scores=True`.

    Examples:

    >>> attention = LocalAttention(mode="local-p", window=2, score="general")
    >>> decoder_states = np.random.rand(2, 5, 8).astype("float32")
    >>> encoder_states = np.random.rand(2, 9, 8).astype("float32")
    >>> context, weights = attention(
    ...     decoder_states, encoder_states, return_attention_scores=True)
    >>> tuple(weights.shape)
    (2, 5, 9)

    A local-m decoding loop, keys projected once:

    >>> attention = LocalAttention(mode="local-m", window=2)
    >>> attention.build((None, 8), (None, None, 8))
    >>> keys = attention.project_keys(encoder_states)
    >>> state = np.zeros((2, 8), "float32")
    >>> for t in range(3):
    ...     context = attention(state, encoder_states, projected_key=keys, step=t)

    References:
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025), section 3.2.
    """

    def __init__(
        self,
        mode="local-p",
        window=10,
        score="general",
        units=None,
        position_units=None,
        scale=False,
        **kwargs,
    ):
        super().__init__(score=score, units=units, scale=scale, **kwargs)
        if mode not in MODES:
            raise ValueError(
                f"`mode` must be one of {', '.join(MODES)}. Received: mode={mode!r}"
            )
        if not is_positive_int(window):
            raise ValueError(
                f"`window` must be a positive int. Received: window={window!r}"
            )
        if position_units is not None and (
            mode != "local-p"
            or not is_positive_int(position_units)
        ):
            raise ValueError(
                "`position_units` must be a positive int, and only local-p "
                f"uses it. Received: position_units={position_units!r}, "
                f"mode={mode!r}"
            )
        self.mode = mode
        self.window = window
        self.position_units = position_units

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if self.mode == "local-p":
            units = self.position_units or query_shape[-1]
            self.position_dense = self._dense(units, "position_dense")
            self.position_dense.build(tuple(query_shape))
            self.position_v = self.add_weight(
                name="position_v",
                shape=(units,),
                initializer=clone_initializer(self.kernel_initializer),
                regularizer=self.kernel_regularizer,
            )

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        projected_key=None,
        step=None,
        return_attention_scores=False,
        training=None,
    ):
        if self.mode == "local-m" and step is None and len(query.shape) == 2:
            raise ValueError(
                "local-m attention centres its window on the target position, "
                "so a single-step (rank-2) query needs `step=`. Received: "
                "step=None"
            )
        return self._attend(
            query,
            value,
            key=key,
            query_mask=query_mask,
            value_mask=value_mask,
            projected_key=projected_key,
            return_attention_scores=return_attention_scores,
            training=training,
            step=step,
        )

    def window_centres(self, query, value_mask, source_length, step=None):
        """The window centres p_t, float32 `[batch or 1, Tq, 1]`."""
        if self.mode == "local-m":
            positions = ops.arange(ops.shape(query)[1], dtype="float32")
            if step is not None:
                positions = positions + ops.cast(step, "float32")
            return ops.reshape(positions, (1, -1, 1))
        if value_mask is None:
            length = ops.cast(source_length, "float32")
        else:
            length = ops.sum(ops.cast(value_mask, "float32"), axis=1)
            length = ops.reshape(length, (-1, 1, 1))
        hidden = ops.tanh(project(self.position_dense, query))
        logit = ops.einsum("bqu,u->bq", hidden, self.position_v)
        return length * ops.expand_dims(ops.sigmoid(ops.cast(logit, "float32")), -1)

    def _attention_weights(self, query, projected_key, value_mask, step=None):
        source_length = ops.shape(projected_key)[1]
        centres = self.window_centres(query, value_mask, source_length, step)
        positions = ops.reshape(
            ops.arange(source_length, dtype="float32"), (1, 1, -1)
        )
        distance = positions - centres  # [batch or 1, Tq, Tv]
        mask = ops.abs(distance) <= self.window
        if value_mask is not None:
            mask = ops.logical_and(mask, ops.expand_dims(value_mask, 1))
        weights = self._probabilities(self._score(query, projected_key), mask)
        if self.mode == "local-m":
            return weights
        sigma = self.window / 2.0
        gaussian = ops.exp(-ops.square(distance) / (2.0 * sigma**2))
        return weights * ops.cast(gaussian, weights.dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mode": self.mode,
                "window": self.window,
                "position_units": self.position_units,
            }
        )
        return config
