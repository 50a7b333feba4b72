"""The soft attention of Show, Attend and Tell over an image's feature grid."""

import keras
from keras import ops

from zoo.layers.additive_attention import AdditiveAttention
from zoo.layers.base_attention import is_positive_int
from zoo.layers.base_attention import validate_dropout
from zoo.layers.base_attention import validate_probability_fn


def flatten_grid(features):
    """`[batch, H, W, D]` -> `[batch, H * W, D]`; `[batch, L, D]` unchanged."""
    if len(features.shape) == 3:
        return features
    if len(features.shape) != 4:
        raise ValueError(
            "`features` must have shape [batch, H, W, D] or [batch, L, D]. "
            f"Received: features.shape={tuple(features.shape)}"
        )
    _, height, width, depth = features.shape
    if height is None or width is None or depth is None:
        shape = ops.shape(features)
        height, width, depth = shape[1], shape[2], shape[3]
    return ops.reshape(features, (-1, height * width, depth))


def doubly_stochastic_penalty(attention, target_mask=None):
    """Xu et al.'s penalty `sum_i (1 - sum_t alpha_ti)^2`, per example.

    Each step's weights sum to one over the locations i; the penalty pushes
    the weights of each location, summed over the caption, towards one too,
    so that the decoder looks at every part of the image over the caption.

    Args:
        attention: `[batch, T, L]` weights of T steps over L locations.
        target_mask: optional boolean `[batch, T]`, False on padding steps
            (their weights are left out of the sum over t).

    Returns:
        float32 `[batch]`.

    Example: one caption looks twice at the first location and never at the
    second, the other spreads its two steps evenly:

    >>> attention = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]]])
    >>> keras.ops.convert_to_numpy(doubly_stochastic_penalty(attention)).tolist()
    [2.0, 0.0]
    """
    attention = ops.cast(attention, "float32")
    if target_mask is not None:
        attention = attention * ops.expand_dims(ops.cast(target_mask, "float32"), -1)
    return ops.sum(ops.square(1.0 - ops.sum(attention, axis=1)), axis=-1)


@keras.saving.register_keras_serializable(package="zoo")
class SpatialSoftAttention(keras.layers.Layer):
    """Soft attention over image locations, with Xu et al.'s gate.

    At step t the decoder state `h_{t-1}` scores every annotation vector
    `a_i` of the L = H x W feature grid with the additive (Bahdanau) score
    `e_ti = v^T tanh(W h_{t-1} + U a_i)`, the weights are
    `alpha_t = softmax(e_t)` (or `sparsemax(e_t)`, with
    `probability_fn="sparsemax"`), and the context is gated by a scalar
    `beta_t = sigmoid(f_beta(h_{t-1}))`:
    `z_t = beta_t * sum_i alpha_ti a_i` (section 4.2.1 of the paper: the gate
    lets the decoder put less weight on the image for words like "a" and
    "of").

    The score is `AdditiveAttention`'s; `U a_i` does not depend on the step,
    so compute it once per image with `project_features` and pass it as
    `projected_features` at every step. Use `doubly_stochastic_penalty` on
    the weights of a caption for the paper's regulariser.

    Args:
        units: int, the size of the attention MLP (`v` has this size).
        use_gate: bool, multiply the context by `beta_t`.
        dropout: float in [0, 1), dropout on the attention weights.
        probability_fn: `"softmax"` or `"sparsemax"`, the distribution of
            the scores over the locations.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: `[batch, dq]`, the decoder state of one step (or
            `[batch, T, dq]` for T steps at once).
        features: `[batch, H, W, D]` or `[batch, L, D]`, the annotations.
        projected_features: optional output of `project_features(features)`.
        return_attention_scores: also return the weights `alpha`.
        training: whether dropout is active.

    Returns:
        The gated context `[batch, D]` (`[batch, T, D]`), and the weights
        `[batch, L]` (`[batch, T, L]`) when `return_attention_scores=True`.

    Example:

    >>> attention = SpatialSoftAttention(units=32)
    >>> grid = np.random.rand(2, 4, 4, 16).astype("float32")
    >>> h = np.random.rand(2, 24).astype("float32")
    >>> attention.build((None, 24), grid.shape)
    >>> keys = attention.project_features(grid)  # once per image
    >>> context, alpha = attention(
    ...     h, grid, projected_features=keys, return_attention_scores=True)
    >>> tuple(context.shape), tuple(alpha.shape)
    ((2, 16), (2, 16))

    References:
        - [Xu et al., 2015](https://arxiv.org/abs/1502.03044)
    """

    def __init__(self, units, use_gate=True, dropout=0.0, probability_fn="softmax", **kwargs):
        super().__init__(**kwargs)
        if not is_positive_int(units):
            raise ValueError(f"`units` must be a positive int. Received: units={units!r}")
        self.units = units
        self.use_gate = bool(use_gate)
        self.dropout = validate_dropout(dropout)
        self.probability_fn = validate_probability_fn(probability_fn)
        self.attention = AdditiveAttention(
            units,
            dropout=dropout,
            probability_fn=probability_fn,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.gate_dense = (
            keras.layers.Dense(1, activation="sigmoid", dtype=self.dtype_policy, name="gate")
            if self.use_gate
            else None
        )

    def build(self, query_shape, features_shape):
        features_shape = tuple(features_shape)
        flat_shape = (
            features_shape
            if len(features_shape) == 3
            else (features_shape[0], None, features_shape[-1])
        )
        self.attention.build(tuple(query_shape), flat_shape)
        if self.gate_dense is not None:
            self.gate_dense.build(tuple(query_shape))
        self.built = True

    def project_features(self, features):
        """`U a_i` for every location, `[batch, L, units]`, once per image."""
        return self.attention.project_keys(flatten_grid(features))

    def call(
        self,
        query,
        features,
        projected_features=None,
        return_attention_scores=False,
        training=None,
    ):
        features = flatten_grid(features)
        context, weights = self.attention(
            query,
            features,
            projected_key=projected_features,
            return_attention_scores=True,
            training=training,
        )
        if self.gate_dense is not None:
            context = context * self.gate_dense(query)
        if return_attention_scores:
            return context, weights
        return context

    def compute_output_shape(self, query_shape, features_shape):
        return tuple(query_shape[:-1]) + (features_shape[-1],)

    def compute_output_spec(
        self, query, features, projected_features=None, return_attention_scores=False, training=None
    ):
        context = keras.KerasTensor(
            self.compute_output_shape(query.shape, features.shape), dtype=self.compute_dtype
        )
        if not return_attention_scores:
            return context
        shape = features.shape
        locations = shape[1] if len(shape) == 3 else (
            None if None in shape[1:3] else shape[1] * shape[2]
        )
        weights = keras.KerasTensor(tuple(query.shape[:-1]) + (locations,), dtype=self.compute_dtype)
        return context, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "use_gate": self.use_gate,
                "dropout": self.dropout,
                "probability_fn": self.probability_fn,
            }
        )
        return config
