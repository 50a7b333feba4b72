"""Luong's global attention with the dot, general and concat scores."""

import keras
from keras import ops

from zoo.layers.base_attention import BaseAttention
from zoo.layers.base_attention import additive_score
from zoo.layers.base_attention import clone_initializer
from zoo.layers.base_attention import is_positive_int
from zoo.layers.base_attention import project

SCORES = ("dot", "general", "concat")


@keras.saving.register_keras_serializable(package="zoo")
class LuongAttention(BaseAttention):
    """Luong (global) attention with the three scores of the paper.

    - `score="dot"`: `h_t^T h_s` (query and key of equal depth);
    - `score="general"`: `h_t^T W_a h_s`;
    - `score="concat"`: `v_a^T tanh(W_a [h_t; h_s])`, computed as
      `v_a^T tanh(W_q h_t + W_k h_s)`, which is the same thing.

    The weights are the softmax of the scores over the source positions (or
    their sparsemax, with `probability_fn="sparsemax"`) and the context is
    their weighted sum of the values. With `scale=True` the
    score is multiplied by a learned scalar (initialised to 1), as in
    TensorFlow Addons' scaled Luong attention.

    The key-only part of the score (`W_a h_s` for general, `W_k h_s` for
    concat, the keys themselves for dot) is computed once per source
    sequence with `project_keys` and passed as `projected_key` on every
    decoding step.

    Args:
        score: one of `"dot"`, `"general"`, `"concat"`.
        units: int, depth of the concat projection; the query depth when
            `None`. Only the concat score uses it.
        scale: bool, multiply the scores by a learned scalar.
        dropout: float in [0, 1), dropout rate on the attention weights.
        seed: optional int, seed of the dropout.
        kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer: as in `keras.layers.Dense`, for `W_a` and `v_a`.
        probability_fn: `"softmax"` or `"sparsemax"`, the distribution of
            the scores over the source positions.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: `[batch, Tq, dq]`, or `[batch, dq]` for one decoding step.
        value: `[batch, Tv, dv]`.
        key: optional `[batch, Tv, dk]`; `value` when not given.
        query_mask: optional boolean `[batch, Tq]`.
        value_mask: optional boolean `[batch, Tv]`.
        projected_key: optional output of `project_keys(key)`.
        return_attention_scores: also return the weights `[batch, Tq, Tv]`.
        training: whether dropout is active.

    Returns:
        The context `[batch, Tq, dv]` (`[batch, dv]` for a rank-2 query), and
        the attention weights when `return_attention_scores=True`.

    Examples:

    >>> attention = LuongAttention(score="general")
    >>> decoder_states = np.random.rand(2, 5, 8).astype("float32")
    >>> encoder_states = np.random.rand(2, 7, 8).astype("float32")
    >>> context = attention(decoder_states, encoder_states)
    >>> tuple(context.shape)
    (2, 5, 8)

    A decoding loop that projects the keys once (`W_a h_s`):

    >>> keys = attention.project_keys(encoder_states)
    >>> state = np.zeros((2, 8), "float32")
    >>> for step in range(3):
    ...     context = attention(state, encoder_states, projected_key=keys)

    Sparsemax weights: each row sums to one, and positions that score far
    below the best get exactly zero:

    >>> attention = LuongAttention(score="dot", probability_fn="sparsemax")
    >>> _, weights = attention(
    ...     decoder_states, 4 * encoder_states, return_attention_scores=True)
    >>> weights = keras.ops.convert_to_numpy(weights)
    >>> bool(np.allclose(weights.sum(-1), 1.0)), bool((weights == 0).any())
    (True, True)

    References:
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """

    def __init__(self, score="general", units=None, scale=False, **kwargs):
        super().__init__(**kwargs)
        if score not in SCORES:
            raise ValueError(
                f"`score` must be one of {', '.join(SCORES)}. "
                f"Received: score={score!r}"
            )
        if units is not None:
            if score != "concat":
                raise ValueError(
                    "`units` sets the depth of the concat score only; leave it "
                    f"None with score={score!r}. Received: units={units!r}"
                )
            if not is_positive_int(units):
                raise ValueError(
                    f"`units` must be a positive int or None. Received: units={units!r}"
                )
        self.score = score
        self.units = units
        self.scale = bool(scale)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = tuple(value_shape if key_shape is None else key_shape)
        query_depth = query_shape[-1]
        if self.score == "dot" and key_shape[-1] != query_depth:
            raise ValueError(
                "score='dot' needs a query and a key of the same depth; use "
                "score='general' for different depths. Received: "
                f"query depth {query_depth}, key depth {key_shape[-1]}"
            )
        if self.score == "general":
            # W_a maps a key into the query's space: score = h_t . (W_a h_s).
            self.key_dense = self._dense(query_depth, "key_dense")
            self.key_dense.build(key_shape)
        elif self.score == "concat":
            units = self.units or query_depth
            self.query_dense = self._dense(units, "query_dense")
            self.query_dense.build(tuple(query_shape))
            self.key_dense = self._dense(units, "key_dense")
            self.key_dense.build(key_shape)
            self.attention_v = self.add_weight(
                name="attention_v",
                shape=(units,),
                initializer=clone_initializer(self.kernel_initializer),
                regularizer=self.kernel_regularizer,
            )
        if self.scale:
            self.attention_scale = self.add_weight(
                name="attention_scale", shape=(), initializer="ones"
            )
        self.built = True

    def project_keys(self, key):
        self._check_built_for_keys()
        if self.score == "dot":
            return key
        return project(self.key_dense, key)

    def _score(self, query, projected_key):
        if self.score == "concat":
            scores = additive_score(
                project(self.query_dense, query), projected_key, self.attention_v
            )
        else:
            scores = ops.matmul(query, ops.swapaxes(projected_key, 1, 2))
        if self.scale:
            scores = scores * self.attention_scale
        return scores

    def get_config(self):
        config = super().get_config()
        config.update(
            {"score": self.score, "units": self.units, "scale": self.scale}
        )
        return config
