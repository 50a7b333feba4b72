"""The Transformer: Vaswani et al. (2017), attention is all you need.

Over 500 lines: the encoder and decoder blocks are private to this recipe
(no other model uses them), so they stay beside it.
"""

import math

import keras
import numpy as np
from keras import ops

from zoo.layers import MultiHeadAttention
from zoo.recipes.seq2seq import Seq2SeqRecipe
from zoo.recipes.seq2seq import source_mask

# The paper does not give its epsilon; 1e-6 is tensor2tensor's (the code the
# paper's results come from). Keras' default, 1e-3, is large next to the
# variance of small activations.
LAYER_NORM_EPSILON = 1e-6


def sinusoidal_positions(length, depth):
    """The paper's fixed positional encodings, `[length, depth]` float32.

    `PE(pos, 2i) = sin(pos / 10000^(2i / depth))` and
    `PE(pos, 2i + 1) = cos(pos / 10000^(2i / depth))`, interleaved as in
    section 3.5 (so an odd `depth` is fine: the last column is a sine).
    """
    positions = np.arange(length, dtype="float64")[:, None]
    columns = np.arange(depth)
    rates = np.power(10000.0, -(2 * (columns // 2)) / depth)
    angles = positions * rates[None, :]
    table = np.where(columns % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype("float32")


def _check_positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")


class _SublayerConnection(keras.layers.Layer):
    """The residual connection and layer normalisation around a sublayer.

    Post-LN (the paper): `LayerNorm(x + Dropout(sublayer(x)))`.
    Pre-LN: `x + Dropout(sublayer(LayerNorm(x)))`.
    Use `normalize_input` before the sublayer and `residual` after it.
    """

    def __init__(self, norm_first, dropout, **kwargs):
        super().__init__(**kwargs)
        self.norm_first = norm_first
        self.norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="norm"
        )
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.norm.build(input_shape)
        self.built = True

    def normalize_input(self, x):
        return self.norm(x) if self.norm_first else x

    def residual(self, x, sublayer_output, training=None):
        y = x + self.dropout(sublayer_output, training=training)
        return y if self.norm_first else self.norm(y)


class _FeedForward(keras.layers.Layer):
    """`FFN(x) = max(0, x W_1 + b_1) W_2 + b_2`, position by position."""

    def __init__(self, d_model, feed_forward_dim, **kwargs):
        super().__init__(**kwargs)
        self.inner = keras.layers.Dense(
            feed_forward_dim, activation="relu", dtype=self.dtype_policy, name="inner"
        )
        self.outer = keras.layers.Dense(d_model, dtype=self.dtype_policy, name="outer")
        self.feed_forward_dim = feed_forward_dim

    def build(self, input_shape):
        self.inner.build(input_shape)
        self.outer.build(tuple(input_shape[:-1]) + (self.feed_forward_dim,))
        self.built = True

    def call(self, x):
        return self.outer(self.inner(x))


def _attention(d_model, num_heads, name, dtype_policy):
    # As in the paper (and tensor2tensor), the four projections W^Q, W^K,
    # W^V and W^O are plain matrices. A key bias would be dead weight anyway:
    # it adds the same q . b to every score of a row, which softmax ignores,
    # so its gradient is exactly zero.
    return MultiHeadAttention(
        num_heads=num_heads,
        key_dim=d_model // num_heads,
        use_bias=False,
        dtype=dtype_policy,
        name=name,
    )


class _EncoderBlock(keras.layers.Layer):
    """Self-attention over the source, then the feed-forward network."""

    def __init__(self, d_model, num_heads, feed_forward_dim, dropout, norm_first, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.self_attention = _attention(d_model, num_heads, "self_attention", self.dtype_policy)
        self.feed_forward = _FeedForward(
            d_model, feed_forward_dim, dtype=self.dtype_policy, name="feed_forward"
        )
        self.attention_residual = _SublayerConnection(
            norm_first, dropout, dtype=self.dtype_policy, name="attention_residual"
        )
        self.feed_forward_residual = _SublayerConnection(
            norm_first, dropout, dtype=self.dtype_policy, name="feed_forward_residual"
        )

    def build(self, input_shape=None):
        shape = (None, None, self.d_model)
        self.self_attention.build(shape, shape)
        self.feed_forward.build(shape)
        self.attention_residual.build(shape)
        self.feed_forward_residual.build(shape)
        self.built = True

    def call(self, x, mask, training=None):
        h = self.attention_residual.normalize_input(x)
        # Only the keys are masked: a padded query row computes something
        # that nothing downstream reads (cross-attention masks it as a key).
        attended = self.self_attention(h, h, value_mask=mask, training=training)
        x = self.attention_residual.residual(x, attended, training=training)
        h = self.feed_forward_residual.normalize_input(x)
        return self.feed_forward_residual.residual(x, self.feed_forward(h), training=training)


class _DecoderBlock(keras.layers.Layer):
    """Causal self-attention, cross-attention to the source, feed-forward.

    The cross-attention always reads the source through the keys and values
    that `project_key_value` computed once (in `Transformer.encode`), on the
    teacher-forced path as on the step-by-step one, so both paths share it.
    """

    def __init__(self, d_model, num_heads, feed_forward_dim, dropout, norm_first, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.self_attention = _attention(d_model, num_heads, "self_attention", self.dtype_policy)
        self.cross_attention = _attention(d_model, num_heads, "cross_attention", self.dtype_policy)
        self.feed_forward = _FeedForward(
            d_model, feed_forward_dim, dtype=self.dtype_policy, name="feed_forward"
        )
        self.self_attention_residual = _SublayerConnection(
            norm_first, dropout, dtype=self.dtype_policy, name="self_attention_residual"
        )
        self.cross_attention_residual = _SublayerConnection(
            norm_first, dropout, dtype=self.dtype_policy, name="cross_attention_residual"
        )
        self.feed_forward_residual = _SublayerConnection(
            norm_first, dropout, dtype=self.dtype_policy, name="feed_forward_residual"
        )

    def build(self, input_shape=None):
        shape = (None, None, self.d_model)
        self.self_attention.build(shape, shape)
        self.cross_attention.build(shape, shape)
        self.feed_forward.build(shape)
        for residual in (
            self.self_attention_residual,
            self.cross_attention_residual,
            self.feed_forward_residual,
        ):
            residual.build(shape)
        self.built = True

    def call(
        self,
        x,
        cross_cache,
        memory_mask,
        self_cache=None,
        step=None,
        return_attention_scores=False,
        training=None,
    ):
        """Runs the block on all target positions, or on one.

        Args:
            x: `[B, T, d_model]` (all positions, causal), or `[B, d_model]`
                for the one position `step` (then `self_cache` is required).
            cross_cache: `[B, 2, S, H, key_dim]`, the projected source.
            memory_mask: bool `[B, S]`, True on real source tokens.
            self_cache: `[B, 2, max_target_length, H, key_dim]`, the keys and
                values of the positions before `step`.
            step: int or int32 scalar tensor, the position of `x`.
            return_attention_scores: also return the cross-attention weights
                `[B, H, T, S]` (`[B, H, S]` for one position).

        Returns:
            `(output, weights or None, updated self_cache or None)`.
        """
        h = self.self_attention_residual.normalize_input(x)
        if self_cache is None:
            attended = self.self_attention(h, h, use_causal_mask=True, training=training)
        else:
            # The causal mask, counted from `step`, hides the slots of the
            # cache not written yet.
            attended, self_cache = self.self_attention(
                h,
                ops.expand_dims(h, 1),
                cache=self_cache,
                cache_update_index=step,
                use_causal_mask=True,
            )
        x = self.self_attention_residual.residual(x, attended, training=training)

        h = self.cross_attention_residual.normalize_input(x)
        results = self.cross_attention(
            h,
            None,
            value_mask=memory_mask,
            cache=cross_cache,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        attended = results[0]
        weights = results[1] if return_attention_scores else None
        x = self.cross_attention_residual.residual(x, attended, training=training)

        h = self.feed_forward_residual.normalize_input(x)
        x = self.feed_forward_residual.residual(x, self.feed_forward(h), training=training)
        return x, weights, self_cache


@keras.saving.register_keras_serializable(package="zoo")
class Transformer(Seq2SeqRecipe):
    """The Transformer translator of Vaswani et al. (2017).

    - Embeddings: token embeddings scaled by `sqrt(d_model)` plus the paper's
      fixed sinusoidal positional encodings (section 3.5; the paper found
      learned ones no better, and fixed ones need no weights), then dropout.
      The embeddings start from `N(0, d_model^-1/2)`, so the scaled embedding
      has unit variance, like the encodings it is added to.
    - Encoder: `num_encoder_layers` blocks of self-attention and a
      position-wise feed-forward network; padded source positions are masked
      as keys.
    - Decoder: `num_decoder_layers` blocks of causal self-attention,
      cross-attention to the encoder output, and the feed-forward network.
    - Every attention is a `zoo.layers.MultiHeadAttention` with
      `key_dim = d_model // num_heads` and, as in the paper, no biases in the
      projections.
    - Each sublayer sits in a residual connection with dropout and layer
      normalisation: post-LN, `LayerNorm(x + Dropout(sublayer(x)))`, as in
      the paper, or pre-LN, `x + Dropout(sublayer(LayerNorm(x)))` with a
      final LayerNorm after each stack (`norm_first=True`), which trains
      without learning-rate warm-up and more reliably at small scale (Xiong
      et al., 2020).

    The decoding contract (`encode`, `decode_step`) runs the decoder one
    position at a time with a key/value cache: `encode` projects the encoder
    output once into each decoder layer's cross-attention keys and values and
    allocates each layer's self-attention cache, `[B, 2, max_target_length,
    H, key_dim]`; `decode_step` writes the new position's keys and values at
    index `step`. So at most `max_target_length` positions can be decoded (and
    teacher-forced); `max_source_length` bounds the source.

    The attention that `decode_step` and `attention_weights` return (the
    alignment plotted and used by the coverage penalty) is the
    cross-attention of the last decoder layer, averaged over its heads.

    Args:
        source_vocabulary_size, target_vocabulary_size: vocabulary sizes.
        d_model: int, the model width (512 in the base model).
        num_heads: int, the number of attention heads (8); must divide
            `d_model`.
        num_encoder_layers, num_decoder_layers: int, the stack depths (6).
        feed_forward_dim: int, the inner size of the feed-forward network
            (2048).
        dropout: float, the residual dropout P_drop, on each sublayer's
            output and on the embedding sums (0.1).
        max_target_length: int, the most target positions (the size of the
            self-attention cache and of the target positional table).
        max_source_length: int, the most source positions.
        share_target_embeddings: bool, whether the output projection is the
            transpose of the target embedding matrix (section 3.4; the paper
            also shares it with the source through a joint vocabulary).
        share_all_embeddings: bool, whether the source and the target also
            share one embedding matrix, which is then the output projection
            as well (fairseq's `--share-all-embeddings`); needs one joint
            vocabulary, so the two vocabulary sizes must be equal.
        norm_first: bool, pre-LN when True, the paper's post-LN when False.
        **kwargs: see `Seq2SeqRecipe`.

    Examples:

    >>> model = Transformer(20, 20, d_model=16, num_heads=2,
    ...                     num_encoder_layers=1, num_decoder_layers=1,
    ...                     feed_forward_dim=32, max_target_length=8)
    >>> source = np.array([[5, 6, 7, 3], [8, 9, 3, 0]], "int32")
    >>> target_in = np.array([[2, 5, 6], [2, 8, 0]], "int32")
    >>> model({"source": source, "target_in": target_in}).shape  # [B, T, V]
    TensorShape([2, 3, 20])
    >>> state = model.encode(source)
    >>> logits, state, attention = model.decode_step(
    ...     np.array([2, 2], "int32"), state, 0)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
        - [Xiong et al., 2020](https://arxiv.org/abs/2002.04745) (pre-LN)
    """

    # XLA makes the TensorFlow train step faster but compiles once per batch
    # shape, and the presets train too few steps per length bucket to repay
    # that (`zoo bench train`; docs/performance.md): off by default, and
    # `zoo train --jit-compile on` for a training of many more steps per
    # length bucket.
    xla_on_tensorflow = False

    # The contract's declarations (zoo.recipes.contract): the decoder's
    # self-attention caches are the only entries a step changes, and they
    # hold one slot per target position on axis 2.
    @property
    def constant_state_keys(self):
        cross = tuple(f"cross_cache_{i}" for i in range(self.num_decoder_layers))
        return ("memory", "source_mask") + cross

    @property
    def step_cache_axes(self):
        return {f"self_cache_{i}": 2 for i in range(self.num_decoder_layers)}

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        d_model=512,
        num_heads=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        feed_forward_dim=2048,
        dropout=0.1,
        max_target_length=256,
        max_source_length=256,
        share_target_embeddings=False,
        share_all_embeddings=False,
        norm_first=False,
        **kwargs,
    ):
        for name, value in (
            ("d_model", d_model),
            ("num_heads", num_heads),
            ("num_encoder_layers", num_encoder_layers),
            ("num_decoder_layers", num_decoder_layers),
            ("feed_forward_dim", feed_forward_dim),
            ("max_target_length", max_target_length),
            ("max_source_length", max_source_length),
        ):
            _check_positive_int(name, value)
        if d_model % num_heads:
            raise ValueError(
                "`d_model` must be divisible by `num_heads` (each head gets "
                f"d_model // num_heads dimensions). Received: d_model={d_model}, "
                f"num_heads={num_heads}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout!r}")
        if share_all_embeddings and source_vocabulary_size != target_vocabulary_size:
            raise ValueError(
                "`share_all_embeddings` needs one joint vocabulary, but the source has "
                f"{source_vocabulary_size} entries and the target {target_vocabulary_size}. "
                "Train with a shared vocabulary (`zoo train --shared-vocabulary`)."
            )
        super().__init__(
            source_vocabulary_size,
            target_vocabulary_size,
            max_target_length=max_target_length,
            **kwargs,
        )
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.feed_forward_dim = feed_forward_dim
        self.dropout = dropout
        self.max_source_length = max_source_length
        self.share_all_embeddings = bool(share_all_embeddings)
        self.share_target_embeddings = bool(share_target_embeddings) or self.share_all_embeddings
        self.norm_first = bool(norm_first)
        self.key_dim = d_model // num_heads

        # A constant, not a weight: nothing learns it and nothing saves it.
        self._positions = sinusoidal_positions(
            max(max_source_length, max_target_length), d_model
        )
        self._embedding_scale = math.sqrt(d_model)
        policy = self.dtype_policy
        embedding_initializer = keras.initializers.RandomNormal(stddev=d_model**-0.5)
        # The source embedding is created first, as before the option came:
        # a weights file names its layers in the order they were made.
        self.source_embedding = keras.layers.Embedding(
            source_vocabulary_size,
            d_model,
            embeddings_initializer=embedding_initializer,
            dtype=policy,
            name="source_embedding",
        )
        if self.share_all_embeddings:
            # One layer under two names: Keras tracks, trains and saves it once.
            self.target_embedding = self.source_embedding
        else:
            self.target_embedding = keras.layers.Embedding(
                target_vocabulary_size,
                d_model,
                embeddings_initializer=embedding_initializer,
                dtype=policy,
                name="target_embedding",
            )
        self.source_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.target_dropout = keras.layers.Dropout(dropout, dtype=policy)
        block_arguments = (d_model, num_heads, feed_forward_dim, dropout, self.norm_first)
        self.encoder_blocks = [
            _EncoderBlock(*block_arguments, dtype=policy, name=f"encoder_block_{i}")
            for i in range(num_encoder_layers)
        ]
        self.decoder_blocks = [
            _DecoderBlock(*block_arguments, dtype=policy, name=f"decoder_block_{i}")
            for i in range(num_decoder_layers)
        ]
        # Pre-LN leaves each stack's output unnormalised; the final norms do it.
        if self.norm_first:
            self.encoder_norm = keras.layers.LayerNormalization(
                epsilon=LAYER_NORM_EPSILON, dtype=policy, name="encoder_norm"
            )
            self.decoder_norm = keras.layers.LayerNormalization(
                epsilon=LAYER_NORM_EPSILON, dtype=policy, name="decoder_norm"
            )
        if not self.share_target_embeddings:
            self.output_projection = keras.layers.Dense(
                target_vocabulary_size, dtype=policy, name="output_projection"
            )

    def build(self, input_shape=None):
        shape = (None, None, self.d_model)
        self.source_embedding.build((None, None))
        self.target_embedding.build((None, None))
        for block in self.encoder_blocks + self.decoder_blocks:
            block.build(shape)
        if self.norm_first:
            self.encoder_norm.build(shape)
            self.decoder_norm.build(shape)
        if not self.share_target_embeddings:
            self.output_projection.build(shape)
        self.built = True

    # Pieces ----------------------------------------------------------------

    def _embed(self, embedding, tokens, positions, dropout, training):
        """`sqrt(d_model) E[tokens] + PE[positions]`, then dropout."""
        table = ops.cast(self._positions, self.compute_dtype)
        embedded = embedding(tokens) * ops.cast(self._embedding_scale, self.compute_dtype)
        return dropout(embedded + ops.take(table, positions, axis=0), training=training)

    def _check_length(self, name, tensor, limit, limit_name):
        length = tensor.shape[1]
        if length is not None and length > limit:
            raise ValueError(
                f"`{name}` has {length} positions, more than `{limit_name}`="
                f"{limit}. Build the model with a larger `{limit_name}`."
            )

    def _encode_source(self, source, training=None):
        """The entries of the state that every target position reads."""
        self._check_length("source", source, self.max_source_length, "max_source_length")
        mask = source_mask(source, self.pad_id)
        positions = ops.arange(ops.shape(source)[1], dtype="int32")
        x = self._embed(self.source_embedding, source, positions, self.source_dropout, training)
        for block in self.encoder_blocks:
            x = block(x, mask, training=training)
        if self.norm_first:
            x = self.encoder_norm(x)
        state = {"memory": x, "source_mask": mask}
        for i, block in enumerate(self.decoder_blocks):
            state[f"cross_cache_{i}"] = block.cross_attention.project_key_value(x)
        return state

    def output_logits(self, features, training=None):
        if self.norm_first:
            features = self.decoder_norm(features)
        if self.share_target_embeddings:
            embeddings = ops.cast(self.target_embedding.embeddings, self.compute_dtype)
            return ops.matmul(features, ops.transpose(embeddings))
        return self.output_projection(features)

    def _decode_all(self, target_in, state, return_attention_scores=False, training=None):
        """Teacher-forced decoder: logits `[B, T, V]` and the last layer's
        cross-attention `[B, T, S]` (None unless asked for)."""
        self._check_length("target_in", target_in, self.max_target_length, "max_target_length")
        positions = ops.arange(ops.shape(target_in)[1], dtype="int32")
        x = self._embed(self.target_embedding, target_in, positions, self.target_dropout, training)
        last = len(self.decoder_blocks) - 1
        weights = None
        for i, block in enumerate(self.decoder_blocks):
            x, weights, _ = block(
                x,
                state[f"cross_cache_{i}"],
                state["source_mask"],
                return_attention_scores=return_attention_scores and i == last,
                training=training,
            )
        attention = None if weights is None else ops.mean(weights, axis=1)
        return self.output_logits(x, training=training), attention

    # The contract -----------------------------------------------------------

    def call(self, inputs, training=None):
        state = self._encode_source(inputs["source"], training=training)
        logits, _ = self._decode_all(inputs["target_in"], state, training=training)
        return logits

    def encode(self, source, training=None):
        """Runs the encoder once and prepares the decoding state.

        Returns:
            A flat dict of batch-first tensors: `memory` `[B, S, d_model]`,
            `source_mask` bool `[B, S]`, and for each decoder layer i
            `cross_cache_i` `[B, 2, S, H, key_dim]` (the projected encoder
            output) and `self_cache_i` `[B, 2, max_target_length, H,
            key_dim]` (zeros; `decode_step` fills it).
        """
        state = self._encode_source(source, training=training)
        batch = ops.shape(source)[0]
        cache_shape = (batch, 2, self.max_target_length, self.num_heads, self.key_dim)
        for i in range(len(self.decoder_blocks)):
            state[f"self_cache_{i}"] = ops.zeros(cache_shape, self.compute_dtype)
        return state

    def decode_step(self, previous_tokens, state, step):
        """One target position: `previous_tokens` `[B]` at position `step`.

        `step` (a python int or an int32 scalar tensor, as in a while loop)
        must be below `max_target_length`.

        Returns:
            `(logits [B, V], new_state, attention [B, S])`, the attention being
            the last decoder layer's cross-attention averaged over heads.
        """
        step = ops.convert_to_tensor(step, "int32")
        x = self._embed(
            self.target_embedding, previous_tokens, step, self.target_dropout, training=False
        )
        new_state = dict(state)
        last = len(self.decoder_blocks) - 1
        for i, block in enumerate(self.decoder_blocks):
            x, weights, new_state[f"self_cache_{i}"] = block(
                x,
                state[f"cross_cache_{i}"],
                state["source_mask"],
                self_cache=state[f"self_cache_{i}"],
                step=step,
                return_attention_scores=i == last,
                training=False,
            )
        return self.output_logits(x), new_state, ops.mean(weights, axis=1)

    def attention_weights(self, inputs):
        """The teacher-forced alignment `[B, T, S]`: the last decoder layer's
        cross-attention, averaged over heads."""
        state = self._encode_source(inputs["source"])
        return self._decode_all(inputs["target_in"], state, return_attention_scores=True)[1]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "num_encoder_layers": self.num_encoder_layers,
                "num_decoder_layers": self.num_decoder_layers,
                "feed_forward_dim": self.feed_forward_dim,
                "dropout": self.dropout,
                "max_source_length": self.max_source_length,
                "share_target_embeddings": self.share_target_embeddings,
                "share_all_embeddings": self.share_all_embeddings,
                "norm_first": self.norm_first,
            }
        )
        return config
