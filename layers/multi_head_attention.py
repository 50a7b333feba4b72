"""Multi-head scaled dot-product attention, with a key/value cache."""

import math

import keras
from keras import ops

from zoo.layers.base_attention import clone_initializer
from zoo.layers.base_attention import dims_disagree
from zoo.layers.base_attention import is_positive_int
from zoo.layers.base_attention import masked_softmax
from zoo.layers.base_attention import project
from zoo.layers.base_attention import projection_config
from zoo.layers.base_attention import shapes_disagree
from zoo.layers.base_attention import static_shape
from zoo.layers.base_attention import validate_dropout


def _one_query_step(query, causal_only):
    """Whether `_one_query_attention` computes this call: one float32 query
    position. A causal mask left to the fused kernel (`causal_only`) is not
    built, so that case stays with the kernel; half precision stays with the
    kernel too, whose products accumulate in float32."""
    return (
        not causal_only
        and query.shape[1] == 1
        and keras.backend.standardize_dtype(query.dtype) == "float32"
    )


@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention: `softmax(Q K^T / sqrt(d_k)) V` with H heads.

    The query, key and value are projected to `num_heads` heads
    (`Q_h = query W^Q_h`, `K_h = key W^K_h`, `V_h = value W^V_h`), each head
    attends with scaled dot products, and the heads are concatenated and
    projected back, `concat_h(head_h) W^O`, as in Vaswani et al.

    The weights have the names, shapes and creation order of
    `keras.layers.MultiHeadAttention` (sublayers `query`, `key`, `value`,
    `attention_output`), so `layer.set_weights(keras_mha.get_weights())`
    gives the same outputs. Unlike Keras' layer, a query row that may attend
    to no key (a padded query, or all keys masked) gets all-zero weights and a
    zero context (the output is then the output bias), never NaN or uniform
    weights, in float32, float16 and bfloat16.

    When no weights are requested, dropout is inactive and
    `value_dim == key_dim`, the attention runs in
    `keras.ops.dot_product_attention` (the backend's fused kernel); otherwise
    it is computed explicitly, with the softmax in float32. (jax's fused
    attention does not accept value heads of another depth than the keys.)

    A key/value cache, `[batch, 2, S, num_heads, key_dim]` (keys at index 0,
    values at index 1), serves step-by-step decoding:
    - self-attention: start from a zero cache of the maximum length and pass
      `cache_update_index=step`; the new keys and values are projected and
      written into the cache, and the query attends over the whole cache
      (`use_causal_mask=True` hides the positions after the current step);
    - cross-attention: project the source once with
      `project_key_value(memory)` and pass it as `cache` without
      `cache_update_index`; keys and values are then not projected again.

    Args:
        num_heads: positive int, the number of heads H.
        key_dim: positive int, the depth of each head of the query and key.
        value_dim: optional positive int, the depth of each head of the
            value; `key_dim` when not given.
        dropout: float in [0, 1), dropout rate on the attention weights.
        use_bias: bool, whether the four projections have biases.
        output_shape: optional int or tuple of ints, the shape of each output
            position; the query's depth when not given.
        seed: optional int, seed of the dropout.
        kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer: as in `keras.layers.EinsumDense`, for the four
            projections.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        query: `[batch, Tq, dq]`, or `[batch, dq]` for one decoding step (the
            output then has no Tq axis and the weights are
            `[batch, H, Tv]`).
        value: `[batch, Tv, dv]`. With `cache_update_index`, the new values
            (`[batch, T_new, dv]`, or `[batch, dv]` for one step) to write
            into the cache. With a `cache` and no `cache_update_index`, it is
            ignored and may be `None`.
        key: optional `[batch, Tv, dk]`; `value` when not given.
        query_mask: optional boolean `[batch, Tq]` (`[batch]` for a rank-2
            query). A masked query row gets zero weights and a zero context.
            Taken from the query's Keras mask when not given, and passed on as
            the output's mask.
        value_mask: optional boolean `[batch, Tv]`; a masked position gets
            exactly zero weight. Taken from the value's Keras mask when not
            given. With a cache it covers the cache, `[batch, S]`.
        key_mask: optional boolean, like `value_mask`, for the keys.
        attention_mask: optional boolean `[batch, Tq, Tv]` (`[batch, Tv]` for
            a rank-2 query; `Tv` is `S` with a cache); `True` where a query
            may attend to a key.
        use_causal_mask: bool, whether query position i may attend only to
            key positions j <= i. With `cache_update_index`, the query
            positions start at `cache_update_index`, so the positions of the
            cache not yet written are hidden.
        return_attention_scores: also return the attention weights
            `[batch, H, Tq, Tv]`, after the softmax and before dropout.
        training: whether dropout is active.
        cache: optional float `[batch, 2, S, H, key_dim]`, see above. Needs
            `key_dim == value_dim`.
        cache_update_index: optional int (or int scalar tensor), the position
            at which the new keys and values are written into `cache`.

    Returns:
        The output `[batch, Tq, *output_shape]` (`[batch, *output_shape]` for
        a rank-2 query); then the weights when `return_attention_scores=True`;
        then the updated cache when `cache` is given: `output`,
        `(output, weights)`, `(output, cache)` or `(output, weights, cache)`.

    Examples:

    Self-attention over a padded batch, and cross-attention:

    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.random.rand(2, 5, 8).astype("float32")
    >>> mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    >>> y = layer(x, x, query_mask=mask, value_mask=mask, use_causal_mask=True)
    >>> memory = np.random.rand(2, 7, 6).astype("float32")
    >>> cross = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> y, weights = cross(x, memory, return_attention_scores=True)
    >>> y.shape, weights.shape
    (TensorShape([2, 5, 8]), TensorShape([2, 2, 5, 7]))

    Step-by-step decoding with a self-attention cache and a cross-attention
    cache projected once; the outputs equal those of the full computation
    `layer(x, x, use_causal_mask=True)` and `cross(x, memory)`:

    >>> max_length = 5
    >>> self_cache = np.zeros((2, 2, max_length, 2, 4), "float32")
    >>> memory_cache = cross.project_key_value(memory)  # once per source
    >>> for step in range(max_length):
    ...     x_t = x[:, step, :]  # a real decoder embeds its last token here
    ...     h_t, self_cache = layer(
    ...         x_t, x_t[:, None, :], cache=self_cache,
    ...         cache_update_index=step, use_causal_mask=True)
    ...     c_t, _ = cross(h_t, None, cache=memory_cache)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        seed=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, number in (("num_heads", num_heads), ("key_dim", key_dim)):
            if not is_positive_int(number):
                raise ValueError(
                    f"`{name}` must be a positive int. Received: "
                    f"{name}={number!r}"
                )
        if value_dim is not None and not is_positive_int(value_dim):
            raise ValueError(
                "`value_dim` must be a positive int or None. Received: "
                f"value_dim={value_dim!r}"
            )
        if output_shape is not None:
            if is_positive_int(output_shape):
                output_shape = (output_shape,)
            elif not (
                isinstance(output_shape, (list, tuple))
                and output_shape
                and all(is_positive_int(d) for d in output_shape)
            ):
                raise ValueError(
                    "`output_shape` must be a positive int, a non-empty tuple "
                    f"of positive ints, or None. Received: "
                    f"output_shape={output_shape!r}"
                )
            output_shape = tuple(output_shape)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.dropout = validate_dropout(dropout)
        self.use_bias = bool(use_bias)
        # Not `output_shape`: that name would clash with the functional
        # models' use of layer attributes (as in Keras' own layer).
        self._output_shape = output_shape
        self.seed = seed
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.supports_masking = True
        self._scale = 1.0 / math.sqrt(float(key_dim))
        self._dropout_layer = keras.layers.Dropout(
            self.dropout, seed=seed, dtype=self.dtype_policy
        )

    def _projection(self, equation, output_shape, bias_axes, name):
        projection = keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            kernel_regularizer=self.kernel_regularizer,
            bias_regularizer=self.bias_regularizer,
            dtype=self.dtype_policy,
            name=name,
        )
        # The inputs may carry Keras masks (which this layer handles itself);
        # without this EinsumDense would warn that it drops them.
        projection.supports_masking = True
        return projection

    def build(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is None:
            raise ValueError(
                f"Layer '{self.name}' needs the value's depth to build. Call "
                "it once with a `value` (or call `layer.build(query_shape, "
                "value_shape)`) before calling it with a cache and no value."
            )
        key_shape = value_shape if key_shape is None else key_shape
        query_depth = query_shape[-1]
        # The same sublayers, equations and creation order as
        # keras.layers.MultiHeadAttention on rank-3 inputs, so the weights of
        # the two layers are interchangeable. A rank-2 (one step) query uses
        # the rank-3 projections with a time axis of 1.
        self.query_dense = self._projection(
            "abc,cde->abde", (None, self.num_heads, self.key_dim), "de", "query"
        )
        self.query_dense.build((None, None, query_depth))
        self.key_dense = self._projection(
            "abc,cde->abde", (None, self.num_heads, self.key_dim), "de", "key"
        )
        self.key_dense.build((None, None, key_shape[-1]))
        self.value_dense = self._projection(
            "abc,cde->abde", (None, self.num_heads, self.value_dim), "de", "value"
        )
        self.value_dense.build((None, None, value_shape[-1]))
        output_dims = self._output_dims(query_depth)
        letters = "efghijklmnopqrstuvwxyz"[: len(output_dims)]
        self.output_dense = self._projection(
            f"abcd,cd{letters}->ab{letters}",
            (None,) + output_dims,
            letters,
            "attention_output",
        )
        self.output_dense.build((None, None, self.num_heads, self.value_dim))
        self.built = True

    def _output_dims(self, query_depth):
        return self._output_shape if self._output_shape else (query_depth,)

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
            [project(self.key_dense, key), project(self.value_dense, value)], axis=1
        )

    def _check_cache_dims(self):
        if self.key_dim != self.value_dim:
            raise ValueError(
                "A key/value cache holds keys and values in one tensor, so it "
                "needs `key_dim == value_dim`. Received: "
                f"key_dim={self.key_dim}, value_dim={self.value_dim}"
            )

    def _validate(
        self,
        query,
        value,
        key,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        cache,
        cache_update_index,
    ):
        query_shape = static_shape(query)
        if len(query_shape) not in (2, 3):
            raise ValueError(
                "`query` must have rank 3, [batch, Tq, dq], or rank 2, "
                f"[batch, dq], for one step. Received: query.shape={query_shape}"
            )
        batch = query_shape[0]
        updating = cache is not None and cache_update_index is not None
        if cache is None and cache_update_index is not None:
            raise ValueError(
                "`cache_update_index` needs a `cache`. Received: cache=None, "
                f"cache_update_index={cache_update_index}"
            )
        if value is None and (cache is None or updating):
            raise ValueError(
                "`value` may be None only with a `cache` and no "
                "`cache_update_index` (precomputed keys and values)."
            )
        if cache is not None:
            self._check_cache_dims()
            cache_shape = static_shape(cache)
            expected = (batch, 2, None, self.num_heads, self.key_dim)
            if shapes_disagree(cache_shape, expected):
                raise ValueError(
                    "`cache` must have shape [batch, 2, S, num_heads, key_dim]"
                    f" = {list(expected)}. Received: cache.shape={cache_shape}"
                )
            source_length = cache_shape[2]
        else:
            source_length = None
        # Without a cache, or when writing into it, value (and key) are
        # projected and must be well formed.
        projected = cache is None or updating
        value_ranks = (2, 3) if updating and len(query_shape) == 2 else (3,)
        for name, tensor in (("value", value), ("key", key)):
            if tensor is None or not projected:
                continue
            shape = static_shape(tensor)
            if len(shape) not in value_ranks:
                raise ValueError(
                    f"`{name}` must have rank 3, [batch, Tv, depth]. Received: "
                    f"{name}.shape={shape}"
                )
            if dims_disagree(batch, shape[0]):
                raise ValueError(
                    f"`query` and `{name}` must have the same batch size. "
                    f"Received: query.shape={query_shape}, {name}.shape={shape}"
                )
        if key is not None and value is not None and projected:
            if shapes_disagree(static_shape(key)[:-1], static_shape(value)[:-1]):
                raise ValueError(
                    "`key` and `value` must have the same batch size and "
                    f"length. Received: key.shape={static_shape(key)}, "
                    f"value.shape={static_shape(value)}"
                )
        if cache is None:
            source_length = static_shape(value)[1]
        expected_masks = (
            ("query_mask", query_mask, query_shape[:-1]),
            ("value_mask", value_mask, (batch, source_length)),
            ("key_mask", key_mask, (batch, source_length)),
            ("attention_mask", attention_mask, query_shape[:-1] + (source_length,)),
        )
        for name, mask, expected in expected_masks:
            shape = static_shape(mask)
            if shape is None:
                continue
            # The attention mask may broadcast over the batch.
            if name == "attention_mask" and len(shape) == len(expected) and shape[0] == 1:
                expected = (1,) + expected[1:]
            if shapes_disagree(shape, expected):
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
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_update_index=None,
    ):
        self._validate(
            query,
            value,
            key,
            query_mask,
            value_mask,
            key_mask,
            attention_mask,
            cache,
            cache_update_index,
        )
        single_step = len(query.shape) == 2
        if single_step:
            query = ops.expand_dims(query, 1)
            if query_mask is not None:
                query_mask = ops.expand_dims(query_mask, 1)
            if attention_mask is not None:
                attention_mask = ops.expand_dims(attention_mask, 1)
        key = value if key is None else key

        projected_query = project(self.query_dense, query)
        if cache is None:
            projected_key = project(self.key_dense, key)
            projected_value = project(self.value_dense, value)
        elif cache_update_index is None:
            cache = ops.cast(cache, self.compute_dtype)
            projected_key, projected_value = cache[:, 0], cache[:, 1]
        else:
            if len(value.shape) == 2:
                value = ops.expand_dims(value, 1)
            if len(key.shape) == 2:
                key = ops.expand_dims(key, 1)
            cache = ops.cast(cache, self.compute_dtype)
            # One write into the whole cache: updating its key and value
            # halves apart and stacking them again copied the cache three
            # more times per step, which made the cached step of `zoo bench
            # decode` grow faster than the decoded length on JAX.
            new_entries = ops.stack(
                [project(self.key_dense, key), project(self.value_dense, value)], axis=1
            )
            cache = ops.slice_update(
                cache, [0, 0, cache_update_index, 0, 0], new_entries
            )
            projected_key, projected_value = cache[:, 0], cache[:, 1]

        dropout_active = self.dropout > 0.0 and bool(training)
        # jax's fused attention (and Keras' fallback for it) needs the value
        # heads as deep as the key heads.
        fusable = self.key_dim == self.value_dim
        explicit = return_attention_scores or dropout_active or not fusable
        # A causal mask alone goes to the fused kernel as `is_causal`; the
        # boolean mask is then not built at all (built and dropped, it cost
        # the eager torch step of `zoo bench layers` about 5%).
        causal_only = (
            not explicit
            and use_causal_mask
            and cache_update_index is None
            and all(m is None for m in (query_mask, value_mask, key_mask, attention_mask))
        )
        mask = None
        if not causal_only:
            first_query_position = 0 if cache_update_index is None else cache_update_index
            mask = self._attention_mask(
                projected_query,
                projected_key,
                query_mask,
                value_mask,
                key_mask,
                attention_mask,
                use_causal_mask,
                first_query_position,
            )
        if explicit:
            context, weights = self._explicit_attention(
                projected_query, projected_key, projected_value, mask, training
            )
        elif _one_query_step(projected_query, causal_only):
            context = self._one_query_attention(
                projected_query, projected_key, projected_value, mask
            )
            weights = None
        else:
            context = self._fused_attention(
                projected_query, projected_key, projected_value, mask, causal_only
            )
            weights = None
        output = project(self.output_dense, context)

        if single_step:
            output = ops.squeeze(output, 1)
            if weights is not None:
                weights = ops.squeeze(weights, 2)
        results = (output,)
        if return_attention_scores:
            results += (weights,)
        if cache is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def _attention_mask(
        self,
        query,
        key,
        query_mask,
        value_mask,
        key_mask,
        attention_mask,
        use_causal_mask,
        first_query_position,
    ):
        """The boolean `[batch or 1, Tq, Tv]` mask of allowed pairs, or None."""
        masks = []
        if query_mask is not None:
            masks.append(ops.expand_dims(ops.cast(query_mask, "bool"), -1))
        for source_mask in (value_mask, key_mask):
            if source_mask is not None:
                masks.append(ops.expand_dims(ops.cast(source_mask, "bool"), 1))
        if attention_mask is not None:
            masks.append(ops.cast(attention_mask, "bool"))
        if use_causal_mask:
            query_length = ops.shape(query)[1]
            key_length = ops.shape(key)[1]
            query_positions = ops.arange(query_length, dtype="int32") + ops.cast(
                first_query_position, "int32"
            )
            key_positions = ops.arange(key_length, dtype="int32")
            masks.append(
                ops.expand_dims(
                    ops.greater_equal(
                        ops.expand_dims(query_positions, 1),
                        ops.expand_dims(key_positions, 0),
                    ),
                    0,
                )
            )
        if not masks:
            return None
        mask = masks[0]
        for other in masks[1:]:
            mask = ops.logical_and(mask, other)
        return mask

    def _explicit_attention(self, query, key, value, mask, training):
        query = ops.multiply(query, ops.cast(self._scale, query.dtype))
        scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
        mask = None if mask is None else ops.expand_dims(mask, 1)
        weights = masked_softmax(scores, mask, axis=-1)
        dropped = weights
        if self.dropout > 0.0:
            dropped = self._dropout_layer(weights, training=training)
        context = ops.einsum("bhqk,bkhd->bqhd", dropped, value)
        return context, weights

    def _one_query_attention(self, query, key, value, mask):
        """Attention of a single query position `[batch, 1, H, depth]` over
        `[batch, S, H, depth]` keys and values (a decoding step over its
        cache), as products and sums over the keys' own layout.

        The fused kernel first transposes keys and values to `[batch, H, S,
        depth]`: at one query, that copy of the whole cache is most of the
        step's work (on JAX at B=32, d=256, S=256, two transposes took 10 of
        the step's 20 ms), while the products read the cache once, in place.
        The cached step of `zoo bench decode` at S=256, timed with and
        without this path: 21 -> 6.5 ms on JAX, 18 -> 11 ms on TensorFlow,
        level on torch; on JAX at S=16 it is 0.1 ms slower.
        """
        query = ops.multiply(query, ops.cast(self._scale, query.dtype))
        scores = ops.sum(query * key, axis=-1)  # [batch, S, H]
        if mask is not None:
            mask = ops.expand_dims(mask[:, 0], -1)  # [batch, S, 1]
        weights = masked_softmax(scores, mask, axis=1)
        return ops.sum(ops.expand_dims(weights, -1) * value, axis=1, keepdims=True)

    def _fused_attention(self, query, key, value, mask, is_causal):
        if mask is None:
            return ops.dot_product_attention(
                query, key, value, scale=self._scale, is_causal=is_causal
            )
        # The fused kernels give a row with no allowed key uniform weights or
        # NaN (it depends on the backend). Such a row is let attend to every
        # key, which keeps the kernel and its gradient finite, and its context
        # is then set to zero.
        row_allowed = ops.any(mask, axis=-1, keepdims=True)
        kernel_mask = ops.logical_or(mask, ops.logical_not(row_allowed))
        context = ops.dot_product_attention(
            query,
            key,
            value,
            mask=ops.expand_dims(kernel_mask, 1),
            scale=self._scale,
        )
        # [batch, Tq, 1] -> [batch, Tq, 1, 1] against [batch, Tq, H, depth].
        row_allowed = ops.expand_dims(row_allowed, -1)
        return ops.where(row_allowed, context, ops.zeros_like(context))

    def compute_mask(self, query, previous_mask=None):
        # The output has the query's positions, so it carries the query mask.
        return previous_mask

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        query_shape = tuple(query_shape)
        return query_shape[:-1] + tuple(self._output_dims(query_shape[-1]))

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_update_index=None,
    ):
        self._validate(
            query,
            value,
            key,
            query_mask,
            value_mask,
            key_mask,
            attention_mask,
            cache,
            cache_update_index,
        )
        results = (
            keras.KerasTensor(
                self.compute_output_shape(query.shape), dtype=self.compute_dtype
            ),
        )
        if return_attention_scores:
            source_length = value.shape[1] if cache is None else cache.shape[2]
            query_axes = () if len(query.shape) == 2 else (query.shape[1],)
            weights_shape = (
                (query.shape[0], self.num_heads) + query_axes + (source_length,)
            )
            results += (keras.KerasTensor(weights_shape, dtype=self.compute_dtype),)
        if cache is not None:
            results += (keras.KerasTensor(cache.shape, dtype=self.compute_dtype),)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_shape": self._output_shape,
                "seed": self.seed,
            }
        )
        config.update(projection_config(self))
        return config
