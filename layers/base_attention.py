"""The call contract shared by the score-based attention layers.

`BaseAttention` holds everything that Bahdanau's and Luong's attention have in
common: argument checking, masks (explicit and implicit), the masked softmax
or sparsemax, dropout on the weights, the weighted sum of the values, the
single-step (rank-2 query) form, and the keys projected once per source
sequence. A subclass says only how a query and its projected keys give a
score.
"""

import keras
import numpy as np
from keras import ops

from zoo.layers._sparsemax import masked_sparsemax

# Neither NumPy nor Keras' public API has bfloat16's finfo; bfloat16 keeps
# float32's exponent and 7 fraction bits, so its lowest is -(2 - 2**-7) * 2**127.
BFLOAT16_LOWEST = -(2 - 2**-7) * 2.0**127


def lowest_value(dtype):
    """The most negative finite number of a float dtype.

    It stands for "no attention" in place of -inf (which turns a fully masked
    softmax row into NaN) and of constants such as -1e9 (which overflow to
    -inf in float16).
    """
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "bfloat16":
        return BFLOAT16_LOWEST
    return float(np.finfo(dtype).min)


def masked_softmax(scores, mask=None, axis=-1):
    """Softmax over `axis` in which a masked position gets exactly zero weight.

    A row whose positions are all masked gets all-zero weights, never NaN or
    Inf, in every float dtype. The mask constant is the lowest finite value of
    the scores' own dtype; the exponentials are taken in float32 (and the
    result cast back) so that float16 and bfloat16 keep their precision.

    Args:
        scores: float tensor of scores.
        mask: optional boolean tensor broadcastable to `scores`; `True` marks
            a position that may be attended to.
        axis: the axis to normalise over.

    Returns:
        A tensor of `scores`' shape and dtype.

    Example:

    >>> weights = masked_softmax(
    ...     np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], "float32"),
    ...     mask=np.array([[True, True, False], [False, False, False]]))
    >>> keras.ops.convert_to_numpy(weights).astype("float64").round(2).tolist()
    [[0.27, 0.73, 0.0], [0.0, 0.0, 0.0]]
    """
    dtype = keras.backend.standardize_dtype(scores.dtype)
    if mask is None:
        return ops.cast(ops.softmax(ops.cast(scores, "float32"), axis), dtype)
    mask = ops.cast(mask, "bool")
    scores = ops.where(mask, scores, ops.cast(lowest_value(dtype), dtype))
    weights = ops.softmax(ops.cast(scores, "float32"), axis)
    # In a fully masked row every score is the same constant and softmax is
    # uniform; multiplying by the mask makes that row zero.
    weights = weights * ops.cast(mask, "float32")
    return ops.cast(weights, dtype)


# The distributions an attention layer may turn its scores into, by the name
# its `probability_fn` argument takes; each gives exact zeros where masked.
PROBABILITY_FUNCTIONS = {"softmax": masked_softmax, "sparsemax": masked_sparsemax}


def validate_probability_fn(probability_fn):
    if not isinstance(probability_fn, str) or probability_fn not in PROBABILITY_FUNCTIONS:
        raise ValueError(
            "`probability_fn` must be one of "
            f"{', '.join(repr(name) for name in PROBABILITY_FUNCTIONS)}. "
            f"Received: probability_fn={probability_fn!r}"
        )
    return probability_fn


def additive_score(projected_query, projected_key, attention_v):
    """`v^T tanh(q_i + k_j)` for every query i and key j.

    Args:
        projected_query: `[batch, Tq, units]`.
        projected_key: `[batch, Tv, units]`.
        attention_v: `[units]`.

    Returns:
        Scores of shape `[batch, Tq, Tv]`.
    """
    if keras.backend.backend() == "torch" and all(
        keras.backend.standardize_dtype(x.dtype) == "float32"
        for x in (projected_query, projected_key)
    ):
        return _additive_score_by_sigmoid(projected_query, projected_key, attention_v)
    hidden = ops.tanh(
        ops.expand_dims(projected_query, 2) + ops.expand_dims(projected_key, 1)
    )
    return ops.einsum("bqvu,u->bqv", hidden, attention_v)


def _additive_score_by_sigmoid(projected_query, projected_key, attention_v):
    """`additive_score` through `tanh(z) = 2 sigmoid(2z) - 1`, for torch.

    The `[batch, Tq, Tv, units]` tensor is the largest an additive score
    computes, and torch's CPU tanh is so much slower than its sigmoid on it
    that tanh dominates an eager decoding step (`zoo bench decode`; the
    figures are in docs/performance.md). The factor 2 is taken on the small
    query and key tensors, and `2 v^T sigmoid(2z) - sum(v)` on the scores, so
    the large tensor sees only the add, the sigmoid and the product with v,
    as with tanh (each extra elementwise pass over it costs a fresh
    allocation). In float32 the result differs from tanh's by about 1e-6;
    half precision keeps tanh, where sigmoid near 0.5 would lose the small
    values' precision.
    """
    gates = ops.sigmoid(
        ops.expand_dims(2.0 * projected_query, 2) + ops.expand_dims(2.0 * projected_key, 1)
    )
    return 2.0 * ops.einsum("bqvu,u->bqv", gates, attention_v) - ops.sum(attention_v)


def project(projection, inputs):
    """`projection(inputs)` for a plain `Dense` or `EinsumDense` sublayer,
    computed from its weights without calling it.

    A Keras layer call's Python overhead is a large share of a small eager
    step on torch, and an attention decoding step pays it once per
    projection (`zoo bench layers`, `zoo bench decode`; docs/performance.md).
    Reading `kernel` keeps LoRA, and the mixed-precision cast of the
    attention layer's call (variables read inside it are cast). Quantized
    sublayers, and any with an activation, are called as usual.
    """
    activation = getattr(projection, "activation", None)
    if projection.quantization_mode is not None or activation not in (
        None,
        keras.activations.linear,
    ):
        return projection(inputs)
    if isinstance(projection, keras.layers.EinsumDense):
        outputs = ops.einsum(projection.equation, inputs, projection.kernel)
    elif len(inputs.shape) > 2 and keras.backend.backend() == "tensorflow":
        # keras' TensorFlow matmul takes `tf.tensordot` for a rank-3 input,
        # whose transpose has a computed permutation; inside a while loop its
        # gradient reads that permutation from the forward pass, which XLA
        # refuses as not a compile-time constant (`jit_compile=True`).
        # Flattening to one 2-D product is the same product without it.
        leading = ops.shape(inputs)[:-1]
        outputs = ops.matmul(ops.reshape(inputs, (-1, inputs.shape[-1])), projection.kernel)
        outputs = ops.reshape(outputs, (*leading, projection.kernel.shape[-1]))
    else:
        outputs = ops.matmul(inputs, projection.kernel)
    if projection.bias is not None:
        outputs = ops.add(outputs, projection.bias)
    return outputs


def is_positive_int(number):
    return isinstance(number, int) and not isinstance(number, bool) and number > 0


def validate_dropout(dropout):
    if isinstance(dropout, bool) or not (
        isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0
    ):
        raise ValueError(
            f"`dropout` must be a float in [0, 1). Received: dropout={dropout!r}"
        )
    return float(dropout)


def clone_initializer(initializer):
    """A new instance of `initializer`, for one weight.

    Keras 3 initializers are stateless: one instance used for two weights of
    the same shape gives both the same values (two identical projections).
    """
    return initializer.__class__.from_config(initializer.get_config())


def projection_config(layer):
    """The initializer and regularizer entries of a layer's `get_config`."""
    return {
        "kernel_initializer": keras.initializers.serialize(layer.kernel_initializer),
        "bias_initializer": keras.initializers.serialize(layer.bias_initializer),
        "kernel_regularizer": keras.regularizers.serialize(layer.kernel_regularizer),
        "bias_regularizer": keras.regularizers.serialize(layer.bias_regularizer),
    }


def static_shape(tensor):
    """The tensor's shape as a tuple (None for unknown dims), or None."""
    return tuple(tensor.shape) if tensor is not None else None


def dims_disagree(a, b):
    """Two dims are known and differ (an unknown dim agrees with anything)."""
    return a is not None and b is not None and a != b


def shapes_disagree(shape, expected):
    return len(shape) != len(expected) or any(
        dims_disagree(a, b) for a, b in zip(shape, expected)
    )


class BaseAttention(keras.layers.Layer):
    """Base class of the score-based attention layers.

    Subclasses implement `build`, `project_keys` (the part of the score that
    depends only on the keys, computed once per source sequence) and
    `_score(query, projected_key)`. This class does the rest, with the call
    contract of `keras.layers.MultiHeadAttention`.

    Args:
        dropout: float in [0, 1), dropout rate on the attention weights.
        seed: optional int, seed of the dropout.
        kernel_initializer: initializer of the projection kernels and of
            `v_a`.
        bias_initializer: initializer of the biases.
        kernel_regularizer: optional regularizer of the kernels.
        bias_regularizer: optional regularizer of the biases.
        probability_fn: `"softmax"` (the default) or `"sparsemax"`
            (Martins and Astudillo, 2016), the distribution the scores are
            turned into: sparsemax gives exactly zero weight to positions
            that score far enough below the best ones.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: `[batch, Tq, dq]`, or `[batch, dq]` for one decoding step (the
            output and the weights then have no Tq axis).
        value: `[batch, Tv, dv]`.
        key: optional `[batch, Tv, dk]`; `value` when not given.
        query_mask: optional boolean `[batch, Tq]` (`[batch]` for a rank-2
            query). A masked query row gets zero weights and a zero context.
            Taken from the query's Keras mask when not given, and passed on as
            the output's mask.
        value_mask: optional boolean `[batch, Tv]`; a masked source position
            gets exactly zero weight. Taken from the value's Keras mask when
            not given.
        projected_key: optional output of `project_keys(key)`; when given,
            `key` is not projected again (use it in decoding loops).
        return_attention_scores: also return the attention weights
            `[batch, Tq, Tv]` (`[batch, Tv]` for a rank-2 query), before
            dropout: the alignment matrix.
        training: whether dropout is active.

    Returns:
        The context `[batch, Tq, dv]` (`[batch, dv]` for a rank-2 query), and
        the weights when `return_attention_scores=True`.
    """

    def __init__(
        self,
        dropout=0.0,
        seed=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        probability_fn="softmax",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.dropout = validate_dropout(dropout)
        self.probability_fn = validate_probability_fn(probability_fn)
        self.seed = seed
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.supports_masking = True
        self._dropout_layer = keras.layers.Dropout(
            self.dropout, seed=seed, dtype=self.dtype_policy
        )

    def _dense(self, units, name, use_bias=False):
        """A projection sublayer with this layer's dtype and initializers."""
        return keras.layers.Dense(
            units,
            use_bias=use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            dtype=self.dtype_policy,
            name=name,
        )

    def _check_built_for_keys(self):
        if not self.built:
            raise ValueError(
                f"Layer '{self.name}' is not built, so its key projection does "
                "not exist yet. Call the layer once, or call "
                "`layer.build(query_shape, value_shape)`, before "
                "`project_keys`."
            )

    def project_keys(self, key):
        """Projects `key` `[batch, Tv, dk]` for the score, once per sequence.

        Pass the result as `projected_key=` on every decoding step.
        """
        raise NotImplementedError

    def _score(self, query, projected_key):
        """Scores `[batch, Tq, Tv]` of a rank-3 query against projected keys."""
        raise NotImplementedError

    def _probabilities(self, scores, mask=None):
        """`probability_fn` of the scores over the last axis, zero where masked."""
        return PROBABILITY_FUNCTIONS[self.probability_fn](scores, mask)

    def _attention_weights(self, query, projected_key, value_mask):
        """Attention weights `[batch, Tq, Tv]` of a rank-3 query."""
        mask = None if value_mask is None else ops.expand_dims(value_mask, 1)
        return self._probabilities(self._score(query, projected_key), mask)

    def _validate_inputs(self, query, value, key, query_mask, value_mask, projected_key):
        value_shape = static_shape(value)
        query_shape = static_shape(query)
        if len(value_shape) != 3:
            raise ValueError(
                f"`value` must have rank 3, [batch, Tv, dv]. Received: "
                f"value.shape={value_shape}"
            )
        if len(query_shape) not in (2, 3):
            raise ValueError(
                "`query` must have rank 3, [batch, Tq, dq], or rank 2, "
                f"[batch, dq], for one step. Received: query.shape={query_shape}"
            )
        if dims_disagree(query_shape[0], value_shape[0]):
            raise ValueError(
                "`query` and `value` must have the same batch size. Received: "
                f"query.shape={query_shape}, value.shape={value_shape}"
            )
        for name, tensor in (("key", key), ("projected_key", projected_key)):
            shape = static_shape(tensor)
            if shape is None:
                continue
            if len(shape) != 3 or shapes_disagree(shape[:2], value_shape[:2]):
                raise ValueError(
                    f"`{name}` must have shape [batch, Tv, depth] with the "
                    f"batch and length of `value`. Received: {name}.shape="
                    f"{shape}, value.shape={value_shape}"
                )
        for name, mask, expected in (
            ("query_mask", query_mask, query_shape[:-1]),
            ("value_mask", value_mask, value_shape[:2]),
        ):
            shape = static_shape(mask)
            if shape is None:
                continue
            if shapes_disagree(shape, expected):
                raise ValueError(
                    f"`{name}` must have shape {list(expected)} (batch and "
                    f"length of its input). Received: {name}.shape={shape}"
                )

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        projected_key=None,
        return_attention_scores=False,
        training=None,
    ):
        return self._attend(
            query,
            value,
            key=key,
            query_mask=query_mask,
            value_mask=value_mask,
            projected_key=projected_key,
            return_attention_scores=return_attention_scores,
            training=training,
        )

    def _attend(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        projected_key=None,
        return_attention_scores=False,
        training=None,
        **weight_kwargs,
    ):
        self._validate_inputs(query, value, key, query_mask, value_mask, projected_key)
        single_step = len(query.shape) == 2
        if single_step:
            query = ops.expand_dims(query, 1)
            if query_mask is not None:
                query_mask = ops.expand_dims(query_mask, 1)
        if projected_key is None:
            projected_key = self.project_keys(value if key is None else key)
        if value_mask is not None:
            value_mask = ops.cast(value_mask, "bool")

        weights = self._attention_weights(
            query, projected_key, value_mask, **weight_kwargs
        )
        if query_mask is not None:
            weights = weights * ops.cast(
                ops.expand_dims(query_mask, -1), weights.dtype
            )
        dropped = self._dropout_layer(weights, training=training) if self.dropout else weights
        context = ops.matmul(dropped, ops.cast(value, dropped.dtype))
        if single_step:
            context = ops.squeeze(context, 1)
            weights = ops.squeeze(weights, 1)
        if return_attention_scores:
            return context, weights
        return context

    def compute_mask(self, query, previous_mask=None):
        # The output has the query's positions, so it carries the query mask.
        return previous_mask

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        return tuple(query_shape[:-1]) + (value_shape[-1],)

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        projected_key=None,
        return_attention_scores=False,
        training=None,
        **kwargs,
    ):
        self._validate_inputs(query, value, key, query_mask, value_mask, projected_key)
        context = keras.KerasTensor(
            self.compute_output_shape(query.shape, value.shape),
            dtype=self.compute_dtype,
        )
        if not return_attention_scores:
            return context
        weights_shape = tuple(query.shape[:-1]) + (value.shape[1],)
        return context, keras.KerasTensor(weights_shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"dropout": self.dropout, "seed": self.seed, "probability_fn": self.probability_fn}
        )
        config.update(projection_config(self))
        return config
