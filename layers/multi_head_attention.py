"""Keras' multi-head attention, with a key/value cache for step decoding.

Over 500 lines: one public layer a file, and most of it is that one class's
docstring, its argument checks and the cached step path Keras lacks.
"""

import keras
from keras import ops

from zoo.layers.base_attention import is_positive_int
from zoo.layers.base_attention import masked_softmax
from zoo.layers.base_attention import project
from zoo.layers.base_attention import shapes_disagree
from zoo.layers.base_attention import static_shape
from zoo.layers.base_attention import validate_dropout


@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention`, with a key/value cache for decoding.

    Multi-head scaled dot-product attention, `softmax(Q K^T / sqrt(d_k)) V`
    per head, the heads concatenated and projected back (Vaswani et al.). It
    is Keras' layer (every argument, weight, mask and `_compute_attention`
    override of Keras' works the same), and adds what Keras' lacks for
    decoding one position at a time:
    - a key/value cache, `[batch, 2, S, num_heads, key_dim]` (keys at index
      0, values at index 1), as in keras-hub's `CachedMultiHeadAttention`:
      - self-attention: start from a zero cache of the maximum length and pass
        `cache_update_index=step`; the new keys and values are projected and
        written into the cache, and the query attends over the whole cache
        (`use_causal_mask=True` counts the query positions from
        `cache_update_index`, which hides the slots not written yet);
      - cross-attention: project the source once with
        `project_key_value(memory)` and pass it as `cache` without
        `cache_update_index`; keys and values are then not projected again;
    - a rank-2 query `[batch, dq]` is one position (the output then has no
      time axis, the scores are `[batch, H, S]`);
    - an explicit `query_mask` (Keras' layer reads only the query's Keras
      mask), and a query row that may attend to no key (a padded query, or all
      keys masked) gets all-zero weights and a zero context (its output is
      the output bias), never uniform weights or NaN, in every float dtype.

    Args:
        num_heads, key_dim, value_dim, use_bias, output_shape, attention_axes,
        sliding_window, flash_attention, kernel_initializer,
        bias_initializer, kernel_regularizer, bias_regularizer,
        activity_regularizer, kernel_constraint, bias_constraint, use_gate,
        seed: as in `keras.layers.MultiHeadAttention`.
        dropout: float in [0, 1), dropout rate on the attention weights.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: `[batch, Tq, dq]` (or higher rank, as in Keras), or `[batch,
            dq]` for one position.
        value: `[batch, Tv, dv]`. With `cache_update_index`, the new values
            (`[batch, T_new, dv]`, or `[batch, dv]` for one step) written into
            the cache. With a `cache` and no `cache_update_index`, it is
            ignored and may be `None`.
        key: optional, like `value`; `value` when not given.
        query_mask: optional boolean `[batch, Tq]` (`[batch]` for a rank-2
            query); the query's Keras mask when not given.
        value_mask, key_mask: optional boolean `[batch, Tv]`, the value's and
            key's Keras masks when not given. With a cache they cover the
            cache, `[batch, S]`.
        attention_mask: optional boolean, `[batch, Tq, Tv]` or broadcastable
            to `[batch, H, Tq, Tv]` (`[batch, S]` for a rank-2 query; `Tv` is
            `S` with a cache); `True` where a query may attend to a key.
        return_attention_scores, training, use_causal_mask: as in Keras.
        cache: optional float `[batch, 2, S, H, key_dim]`, see above. Needs
            `key_dim == value_dim`.
        cache_update_index: optional int (or int scalar tensor), the position
            at which the new keys and values are written into `cache`.

    Returns:
        The output `[batch, Tq, *output_shape]` (`[batch, *output_shape]` for
        a rank-2 query); then the weights `[batch, H, Tq, Tv]` when
        `return_attention_scores=True`; then the updated cache when `cache`
        is given: `output`, `(output, weights)`, `(output, cache)` or
        `(output, weights, cache)`.

    Examples:

    Self-attention over a padded batch, and cross-attention:

    >>> import numpy as np
    >>> from keras import ops
    >>> from zoo.layers import MultiHeadAttention
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.random.rand(2, 5, 8).astype("float32")
    >>> mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    >>> y = layer(x, x, query_mask=mask, value_mask=mask, use_causal_mask=True)
    >>> memory = np.random.rand(2, 7, 6).astype("float32")
    >>> cross = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> y, weights = cross(x, memory, return_attention_scores=True)
    >>> tuple(y.shape), tuple(weights.shape)
    ((2, 5, 8), (2, 2, 5, 7))

    Step-by-step decoding with a self-attention cache and a cross-attention
    cache projected once; each step's output equals that position of the
    computation over the whole sequence:

    >>> max_length = 5
    >>> self_cache = np.zeros((2, 2, max_length, 2, 4), "float32")
    >>> memory_cache = cross.project_key_value(memory)  # once per source
    >>> for step in range(max_length):
    ...     x_t = x[:, step, :]  # a real decoder embeds its last token here
    ...     h_t, self_cache = layer(
    ...         x_t, x_t[:, None, :], cache=self_cache,
    ...         cache_update_index=step, use_causal_mask=True)
    ...     c_t, _ = cross(h_t, None, cache=memory_cache)
    >>> h = layer(x, x, use_causal_mask=True)
    >>> np.allclose(ops.convert_to_numpy(h_t), ops.convert_to_numpy(h[:, -1]), atol=1e-5)
    True
    >>> c = cross(h, memory)
    >>> np.allclose(ops.convert_to_numpy(c_t), ops.convert_to_numpy(c[:, -1]), atol=1e-5)
    True

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    def __init__(self, num_heads, key_dim, dropout=0.0, output_shape=None, **kwargs):
        # Keras accepts any dropout, and any iterable as `output_shape`.
        dropout = validate_dropout(dropout)
        if output_shape is not None and not (
            is_positive_int(output_shape)
            or (
                isinstance(output_shape, (list, tuple))
                and output_shape
                and all(is_positive_int(d) for d in output_shape)
            )
        ):
            raise ValueError(
                "Invalid `output_shape`: expected a positive int or a non-empty "
                f"tuple of positive ints. Received: output_shape={output_shape!r}"
            )
        super().__init__(
            num_heads, key_dim, dropout=dropout, output_shape=output_shape, **kwargs
        )

    def build(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is None:
            raise ValueError(
                f"Layer '{self.name}' needs the value's depth to build. Call "
                "it once with a `value` (or call `layer.build(query_shape, "
                "value_shape)`) before calling it with a cache and no value."
            )
        # A rank-2 query (and the new keys and values of one step) is one
        # position of a sequence, so the projections are built for sequences.
        query_shape, value_shape, key_shape = (
            _as_sequence_shape(shape) for shape in (query_shape, value_shape, key_shape)
        )
        super().build(query_shape, value_shape, key_shape)
        # This layer handles the inputs' Keras masks itself; unlike Keras' call,
        # it leaves them on the caller's tensors, so the sublayers accept them
        # without warning that they drop them.
        for sublayer in self._flatten_layers(include_self=False):
            sublayer.supports_masking = True

    def _project(self, projection, inputs):
        # `project` skips the sublayer's call, and with it an activity
        # regularizer's loss.
        if projection.activity_regularizer is not None:
            return projection(inputs)
        return project(projection, inputs)

    def project_key_value(self, value, key=None):
        """Projects a source sequence once into a cross-attention cache.

        Args:
            value: `[batch, S, dv]`, e.g. the encoder's outputs.
            key: optional `[batch, S, dk]`; `value` when not given.

        Returns:
            The cache `[batch, 2, S, num_heads, key_dim]` to pass as `cache=`
            (without `cache_update_index`) on every decoding step.
        """
        if not self.built:
            raise ValueError(
                f"Layer '{self.name}' is not built, so its projections do not "
                "exist yet. Call the layer once, or call "
                "`layer.build(query_shape, value_shape)`, before "
                "`project_key_value`."
            )
        self._check_cache_dims()
        key = value if key is None else key
        for name, tensor in (("value", value), ("key", key)):
            if len(tensor.shape) != 3:
                raise ValueError(
                    f"`{name}` must have rank 3, [batch, S, depth]. Received: "
                    f"{name}.shape={tuple(tensor.shape)}"
                )
        return ops.stack(
            [self._project(self._key_dense, key), self._project(self._value_dense, value)],
            axis=1,
        )

    def _check_cache_dims(self):
        if self._key_dim != self._value_dim:
            raise ValueError(
                "A key/value cache holds keys and values in one tensor, so it "
                "needs `key_dim == value_dim`. Received: "
                f"key_dim={self._key_dim}, value_dim={self._value_dim}"
            )

    def _check_inputs(self, query, value, key, query_mask, value_mask, key_mask, cache, index):
        """What Keras' layer leaves to the backend's errors: the cache and
        the masks of a sequence query."""
        updating = cache is not None and index is not None
        if cache is None and index is not None:
            raise ValueError(
                "`cache_update_index` should not be set if `cache` is `None`. "
                f"Received: cache=None, cache_update_index={index}"
            )
        if value is None and (cache is None or updating):
            raise ValueError(
                "`value` may be None only with a `cache` and no "
                "`cache_update_index` (precomputed keys and values)."
            )
        query_shape = static_shape(query)
        batch = query_shape[0]
        if cache is not None:
            self._check_cache_dims()
            expected = (batch, 2, None, self._num_heads, self._key_dim)
            cache_shape = static_shape(cache)
            if shapes_disagree(cache_shape, expected):
                raise ValueError(
                    "`cache` must have shape [batch, 2, S, num_heads, key_dim]"
                    f" = {list(expected)}. Received: cache.shape={cache_shape}"
                )
            source_length = cache_shape[2]
        for name, tensor in (("value", value), ("key", key)):
            if tensor is None or (cache is not None and not updating):
                continue
            shape = static_shape(tensor)
            if len(shape) < (2 if updating else 3):
                raise ValueError(
                    f"`{name}` must have rank 3, [batch, Tv, depth]. Received: "
                    f"{name}.shape={shape}"
                )
            if shapes_disagree(shape[:1], (batch,)):
                raise ValueError(
                    f"`query` and `{name}` must have the same batch size. "
                    f"Received: query.shape={query_shape}, {name}.shape={shape}"
                )
        if cache is None:
            source_length = static_shape(value)[1]
            expected_rank = max(len(query_shape), 3)
            if len(static_shape(value)) != expected_rank:
                raise ValueError(
                    "`query` and `value` must have the same rank, as Keras' "
                    "layer attends over axes they share (a rank-2 query is one "
                    f"position). Received: query.shape={query_shape}, "
                    f"value.shape={static_shape(value)}"
                )
        if len(query_shape) > 3:
            return  # Keras' masks of higher-rank inputs.
        expected_masks = (
            ("query_mask", query_mask, query_shape[:-1]),
            ("value_mask", value_mask, (batch, source_length)),
            ("key_mask", key_mask, (batch, source_length)),
        )
        for name, mask, expected in expected_masks:
            shape = static_shape(mask)
            if shape is not None and shapes_disagree(shape, expected):
                where = " (with a cache, S is the cache's length)" if cache is not None else ""
                raise ValueError(
                    f"`{name}` must have shape {list(expected)}{where}. "
                    f"Received: {name}.shape={shape}"
                )

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
    ):
        self._check_inputs(
            query, value, key, query_mask, value_mask, key_mask, cache, cache_update_index
        )
        one_position = len(query.shape) == 2
        if one_position:
            query = ops.expand_dims(query, 1)
            if query_mask is not None:
                query_mask = ops.expand_dims(query_mask, 1)
            if attention_mask is not None and len(attention_mask.shape) == 2:
                attention_mask = ops.expand_dims(attention_mask, 1)
        key = value if key is None else key

        # `gate`, `query` = [B, T, N, H]; `key`, `value` = [B, S, N, H].
        gate = self._project(self._gate_dense, query) if self._use_gate else None
        projected_query = self._project(self._query_dense, query)
        if cache is None:
            projected_key = self._project(self._key_dense, key)
            projected_value = self._project(self._value_dense, value)
        else:
            cache = ops.cast(cache, self.compute_dtype)
            if cache_update_index is not None:
                if len(value.shape) == 2:
                    value = ops.expand_dims(value, 1)
                if len(key.shape) == 2:
                    key = ops.expand_dims(key, 1)
                # One write into the whole cache: updating its key and value
                # halves apart and stacking them again copies the cache three
                # more times per step.
                new_entries = ops.stack(
                    [self._project(self._key_dense, key), self._project(self._value_dense, value)],
                    axis=1,
                )
                cache = ops.slice_update(cache, [0, 0, cache_update_index, 0, 0], new_entries)
            projected_key, projected_value = cache[:, 0], cache[:, 1]

        # A causal mask alone goes to the fused kernel as `is_causal` (as in
        # Keras' call, which skips it for any subclass of Keras' layer, ours
        # included); a subclass that overrides `_compute_attention` gets the
        # mask.
        causal_only = (
            use_causal_mask
            and cache_update_index is None
            and self._sliding_window is None
            and all(m is None for m in (query_mask, value_mask, key_mask, attention_mask))
            and type(self)._compute_attention is MultiHeadAttention._compute_attention
        )
        mask = None
        if not causal_only:
            # With a cache being written, the query positions start at
            # `cache_update_index`, where Keras' causal mask starts at 0.
            positions = {}
            if cache_update_index is not None:
                positions = {"first_query_position": cache_update_index}
            mask = self._compute_attention_mask(
                query,
                projected_key,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                use_causal_mask=use_causal_mask,
                **positions,
            )
        attention_kwargs = {"use_causal_mask": True} if causal_only else {}
        output, scores = self._compute_attention(
            projected_query,
            projected_key,
            projected_value,
            mask,
            training,
            return_attention_scores,
            **attention_kwargs,
        )
        if gate is not None:
            output = ops.multiply(output, gate)
        output = self._project(self._output_dense, output)

        if one_position:
            output = ops.squeeze(output, 1)
            if scores is not None:
                scores = ops.squeeze(scores, 2)
        results = (output,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def _compute_attention_mask(
        self,
        query,
        value,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        first_query_position=None,
    ):
        if first_query_position is None:
            return super()._compute_attention_mask(
                query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
            )
        # Keras' merge of the masks, with the causal and sliding-window masks
        # of queries that start at `first_query_position`.
        masks = []
        if query_mask is not None:
            masks.append(ops.expand_dims(ops.cast(query_mask, "bool"), -1))
        for source_mask in (value_mask, key_mask):
            if source_mask is not None:
                masks.append(ops.expand_dims(ops.cast(source_mask, "bool"), -2))
        query_positions = ops.arange(ops.shape(query)[1], dtype="int32") + ops.cast(
            first_query_position, "int32"
        )
        offsets = ops.expand_dims(query_positions, 1) - ops.arange(
            ops.shape(value)[1], dtype="int32"
        )
        if use_causal_mask:
            masks.append(ops.expand_dims(ops.greater_equal(offsets, 0), 0))
        if self._sliding_window is not None:
            masks.append(ops.expand_dims(ops.less(ops.abs(offsets), self._sliding_window), 0))
        if attention_mask is not None:
            masks.append(ops.cast(attention_mask, "bool"))
        if not masks:
            return None
        mask = masks[0]
        for other in masks[1:]:
            mask = ops.logical_and(mask, other)
        return mask

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        sequence = len(query.shape) == 4 and tuple(self._attention_axes) == (1,)
        if not sequence:
            return super()._compute_attention(
                query, key, value, attention_mask, training, return_attention_scores,
                use_causal_mask,
            )
        row_allowed = None
        if attention_mask is not None:
            # As a 4-D [batch or 1, heads or 1, Tq, Tv] mask, with the causal
            # mask in it: torch's fused kernel refuses a mask with `is_causal`.
            attention_mask = ops.cast(attention_mask, "bool")
            while len(attention_mask.shape) < 4:
                attention_mask = ops.expand_dims(attention_mask, -3)
            if use_causal_mask:
                causal = self._compute_causal_mask(query, key)
                attention_mask = ops.logical_and(attention_mask, causal[:, None])
                use_causal_mask = False
            # A row with no allowed key is let attend to every key, which
            # keeps the kernels and their gradients finite (the fused ones
            # give NaN or uniform weights), and its result is then zeroed.
            row_allowed = ops.any(attention_mask, axis=-1, keepdims=True)
            attention_mask = ops.logical_or(attention_mask, ops.logical_not(row_allowed))
        if self._one_query_applies(query, return_attention_scores, use_causal_mask):
            output = _one_query_attention(
                query, key, value, attention_mask, self._inverse_sqrt_key_dim
            )
            scores = None
        elif (
            keras.backend.backend() == "jax"
            and self._key_dim != self._value_dim
            and not (return_attention_scores or self._flash_attention)
        ):
            # jax's fused kernel needs value heads as deep as the key heads;
            # asking for the scores takes Keras' explicit path.
            output, _ = super()._compute_attention(
                query, key, value, attention_mask, training, True, use_causal_mask
            )
            scores = None
        else:
            output, scores = super()._compute_attention(
                query, key, value, attention_mask, training, return_attention_scores,
                use_causal_mask,
            )
        if row_allowed is not None:
            # [B|1, N|1, T, 1] -> [B|1, T, N|1, 1], the layout of the output.
            output_allowed = ops.transpose(row_allowed, (0, 2, 1, 3))
            output = ops.where(output_allowed, output, ops.zeros_like(output))
            if scores is not None:
                scores = ops.where(row_allowed, scores, ops.zeros_like(scores))
        return output, scores

    def _one_query_applies(self, query, return_attention_scores, use_causal_mask):
        """Whether `_one_query_attention` computes this call: one float32 query
        position of Keras' fused path. Half precision stays with the kernel,
        whose products accumulate in float32."""
        return (
            query.shape[1] == 1
            and not (return_attention_scores or use_causal_mask or self._flash_attention)
            and self._dropout == 0.0
            and keras.backend.standardize_dtype(query.dtype) == "float32"
        )

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is None:  # with a cache
            query_shape = tuple(query_shape)
            return query_shape[:-1] + (self._output_shape or query_shape[-1:])
        return super().compute_output_shape(query_shape, value_shape, key_shape)

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
    ):
        self._check_inputs(
            query, value, key, query_mask, value_mask, key_mask, cache, cache_update_index
        )
        value_shape = None if cache is not None else value.shape
        key_shape = None if key is None or cache is not None else key.shape
        output_shape = self.compute_output_shape(query.shape, value_shape, key_shape)
        results = (keras.KerasTensor(output_shape, dtype=self.compute_dtype),)
        if return_attention_scores:
            if cache is None:
                source_shape = (value if key is None else key).shape
            else:
                source_shape = (cache.shape[0], cache.shape[2], None)
            results += (
                keras.KerasTensor(
                    self._scores_shape(query.shape, source_shape), dtype=self.compute_dtype
                ),
            )
        if cache is not None:
            results += (keras.KerasTensor(cache.shape, dtype=self.compute_dtype),)
        return results[0] if len(results) == 1 else results

    def _scores_shape(self, query_shape, source_shape):
        """The shape of the scores, from Keras' einsum of the projections:
        batch dims and heads, then the query's and the key's attention axes.
        (Keras' own `compute_output_spec` gives `[B, H, Tq, Tq]`.)"""
        one_position = len(query_shape) == 2
        heads = (self._num_heads, self._key_dim)
        projected_query = _as_sequence_shape(tuple(query_shape))[:-1] + heads
        projected_key = tuple(source_shape[:-1]) + heads
        attention_axes = self._attention_axes
        batch_axes = [i for i in range(len(projected_query) - 1) if i not in attention_axes]
        shape = (
            tuple(projected_query[i] for i in batch_axes)
            + tuple(projected_query[i] for i in attention_axes)
            + tuple(projected_key[i] for i in attention_axes)
        )
        if one_position:  # [B, H, 1, S] -> [B, H, S]
            shape = shape[:2] + shape[3:]
        return shape


def _as_sequence_shape(shape):
    """A rank-2 `[batch, depth]` shape as one position, `[batch, 1, depth]`."""
    if shape is not None and len(shape) == 2:
        return (shape[0], 1, shape[1])
    return shape


def _one_query_attention(query, key, value, mask, scale):
    """Attention of a single query position `[batch, 1, H, depth]` over
    `[batch, S, H, depth]` keys and values (a decoding step over its cache),
    as products and sums over the keys' own layout.

    The fused kernel first transposes keys and values to `[batch, H, S,
    depth]`: at one query, that copy of the whole cache is most of the step's
    work, while the products read the cache once, in place (`zoo bench
    decode`, the cached step). `mask` is a boolean `[batch or 1, H or 1, 1,
    S]` with an allowed key in every row, or None.
    """
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    scores = ops.sum(query * key, axis=-1)  # [batch, S, H]
    if mask is not None:
        mask = ops.transpose(mask[:, :, 0, :], (0, 2, 1))  # [batch|1, S, H|1]
    weights = masked_softmax(scores, mask, axis=1)
    return ops.sum(ops.expand_dims(weights, -1) * value, axis=1, keepdims=True)
