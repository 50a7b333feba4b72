"""Bahdanau's additive attention, with learned projections."""

import keras
from keras import ops

from zoo.layers.base_attention import BaseAttention
from zoo.layers.base_attention import additive_score
from zoo.layers.base_attention import clone_initializer
from zoo.layers.base_attention import is_positive_int
from zoo.layers.base_attention import project


@keras.saving.register_keras_serializable(package="zoo")
class AdditiveAttention(BaseAttention):
    """Additive (Bahdanau) attention: `e_ij = v_a^T tanh(W_a s_i + U_a h_j + b)`.

    The weights are `alpha_ij = softmax_j(e_ij)` (or sparsemax, with
    `probability_fn="sparsemax"`) and the context is
    `c_i = sum_j alpha_ij h_j` over the values. Unlike
    `keras.layers.AdditiveAttention`, the query and the keys are projected
    with learned `W_a` and `U_a` to `units` dimensions, as in the paper, so
    query and key may have different depths.

    With `normalize=True` the score vector is weight-normalised,
    `g * v_a / ||v_a||` with a learned scalar `g` (initialised to
    `sqrt(1 / units)`), as in TensorFlow Addons' normalized Bahdanau
    attention (Salimans and Kingma, 2016).

    The key projection `U_a h_j` does not depend on the query: compute it once
    per source sequence with `project_keys` and pass it as `projected_key` on
    every decoding step.

    Args:
        units: int, the depth of the projections (`v_a` has this size).
        use_bias: bool, whether the query projection has a bias `b` (inside
            the tanh).
        normalize: bool, weight-normalise `v_a`.
        dropout: float in [0, 1), dropout rate on the attention weights.
        seed: optional int, seed of the dropout.
        kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer: as in `keras.layers.Dense`, for `W_a`, `U_a`, `v_a`
            and `b`.
        probability_fn: `"softmax"` or `"sparsemax"`, the distribution of
            the scores over the source positions.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: `[batch, Tq, dq]`, or `[batch, dq]` for one decoding step.
        value: `[batch, Tv, dv]`.
        key: optional `[batch, Tv, dk]`; `value` when not given.
        query_mask: optional boolean `[batch, Tq]`; implicit Keras masks are
            honoured and the query mask is passed on to the output.
        value_mask: optional boolean `[batch, Tv]`.
        projected_key: optional output of `project_keys(key)`.
        return_attention_scores: also return the weights `[batch, Tq, Tv]`.
        training: whether dropout is active.

    Returns:
        The context `[batch, Tq, dv]` (`[batch, dv]` for a rank-2 query), and
        the attention weights when `return_attention_scores=True`.

    Examples:

    Teacher-forced, all target steps at once:

    >>> attention = AdditiveAttention(units=16)
    >>> decoder_states = np.random.rand(2, 5, 8).astype("float32")
    >>> encoder_states = np.random.rand(2, 7, 12).astype("float32")
    >>> context, weights = attention(
    ...     decoder_states, encoder_states, return_attention_scores=True)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 5, 12), (2, 5, 7))

    A decoding loop that projects the keys once:

    >>> attention = AdditiveAttention(units=16)
    >>> attention.build((None, 8), (None, None, 12))
    >>> keys = attention.project_keys(encoder_states)  # U_a h_j, once
    >>> state = np.zeros((2, 8), "float32")
    >>> for step in range(3):
    ...     context = attention(state, encoder_states, projected_key=keys)
    ...     state = state + 0.1  # a real decoder updates its RNN state here

    References:
        - [Bahdanau et al., 2014](https://arxiv.org/abs/1409.0473)
        - [Salimans and Kingma, 2016](https://arxiv.org/abs/1602.07868)
    """

    def __init__(self, units, use_bias=True, normalize=False, **kwargs):
        super().__init__(**kwargs)
        if not is_positive_int(units):
            raise ValueError(
                f"`units` must be a positive int. Received: units={units!r}"
            )
        self.units = units
        self.use_bias = bool(use_bias)
        self.normalize = bool(normalize)
        self.query_dense = self._dense(units, "query_dense", use_bias=use_bias)
        self.key_dense = self._dense(units, "key_dense")

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        self.query_dense.build(tuple(query_shape))
        self.key_dense.build(tuple(key_shape))
        self.attention_v = self.add_weight(
            name="attention_v",
            shape=(self.units,),
            initializer=clone_initializer(self.kernel_initializer),
            regularizer=self.kernel_regularizer,
        )
        if self.normalize:
            self.attention_g = self.add_weight(
                name="attention_g",
                shape=(),
                initializer=keras.initializers.Constant((1.0 / self.units) ** 0.5),
            )
        self.built = True

    def project_keys(self, key):
        self._check_built_for_keys()
        return project(self.key_dense, key)

    def _score_vector(self):
        if not self.normalize:
            return self.attention_v
        v = self.attention_v
        return self.attention_g * v * ops.rsqrt(ops.sum(ops.square(v)))

    def _score(self, query, projected_key):
        return additive_score(
            project(self.query_dense, query), projected_key, self._score_vector()
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "use_bias": self.use_bias,
                "normalize": self.normalize,
            }
        )
        return config
