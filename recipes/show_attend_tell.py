"""Show, Attend and Tell: Xu et al. (2015), image captioning with soft or
stochastic hard attention."""

import importlib

import keras
from keras import ops

from zoo.layers import BahdanauDecoder
from zoo.layers import SpatialSoftAttention
from zoo.layers import doubly_stochastic_penalty
from zoo.recipes._hard_attention import SampledAttentionDecoder
from zoo.recipes._hard_attention import attention_entropy
from zoo.recipes._hard_attention import hard_attention_surrogate
from zoo.recipes._hard_attention import next_tokens
from zoo.recipes.seq2seq import AttentionDecoderModel

SMALL_CNN = "small_cnn"
ATTENTION_TYPES = ("soft", "hard")
# b <- 0.9 b + 0.1 log p(y|s,a): the paper's moving average (section 4.1).
BASELINE_DECAY = 0.9


@keras.saving.register_keras_serializable(package="zoo")
class AddCoordinates(keras.layers.Layer):
    """Appends two channels holding each pixel's x and y in [-1, 1].

    CoordConv (Liu et al. 2018): convolutions are translation-invariant, so
    without these channels an annotation vector says what is in its cell
    but hardly where the cell is, and a caption's "left of" / "above" could
    only be guessed from zero-padding effects at the borders.
    """

    def call(self, images):
        shape = ops.shape(images)
        height, width = shape[1], shape[2]
        ys = ops.linspace(-1.0, 1.0, height)
        xs = ops.linspace(-1.0, 1.0, width)
        grid_y = ops.broadcast_to(ops.reshape(ys, (1, -1, 1, 1)), (shape[0], height, width, 1))
        grid_x = ops.broadcast_to(ops.reshape(xs, (1, 1, -1, 1)), (shape[0], height, width, 1))
        return ops.concatenate(
            [images, ops.cast(grid_x, images.dtype), ops.cast(grid_y, images.dtype)], axis=-1
        )

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (input_shape[-1] + 2,)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def small_cnn(
    filters, feature_dim, grid_layers=1, separable_grid=False, dtype=None, name="image_encoder"
):
    """A CNN trained from scratch: stride-2 3x3 convolutions, then
    `grid_layers` 3x3 ones at the grid's resolution, over the image and its
    pixel coordinates (`AddCoordinates`).

    With n stride-2 layers a 64x64 image gives a grid of 64 / 2^n squared
    `feature_dim`-dimensional annotation vectors (3 layers: 8x8, L = 64).
    Each vector sees a window of `2 ** (n + 1) - 1 + 2 ** (n + 1) *
    grid_layers` pixels: with 3 stride-2 layers, 31 for one grid layer and
    47 for two; with 2, 31 for three grid layers. `separable_grid` makes the
    grid layers depthwise-separable, which keeps the window for about a
    ninth of the multiplications (they dominate on a 16x16 grid). `dtype` is
    the dtype policy of every layer (the global policy when None).
    """
    layers = [AddCoordinates(dtype=dtype, name="coordinates")]
    for i, width in enumerate(filters):
        layers += _conv_block(width, 2, f"conv_{i}", dtype=dtype)
    for i in range(grid_layers):
        layers += _conv_block(
            feature_dim,
            1,
            "annotations" if i == grid_layers - 1 else f"grid_{i}",
            separable=separable_grid,
            dtype=dtype,
        )
    return keras.Sequential(layers, name=name)


def _conv_block(filters, strides, name, separable=False, dtype=None):
    # Batch normalisation: trained from scratch, the CNN learns colours and
    # shapes in far fewer steps with it.
    convolution = keras.layers.SeparableConv2D if separable else keras.layers.Conv2D
    return [
        convolution(
            filters, 3, strides=strides, padding="same", use_bias=False, dtype=dtype, name=name
        ),
        keras.layers.BatchNormalization(dtype=dtype, name=f"{name}_norm"),
        keras.layers.ReLU(dtype=dtype, name=f"{name}_relu"),
    ]


def application_backbone(name, image_size, weights=None, layer=None):
    """A `keras.applications` model without its top, and its preprocessing.

    Args:
        name: the application's class name, e.g. "MobileNetV2" or "VGG19".
        image_size: int, the square input size.
        weights: None (random) or the path of a local weights file; nothing
            is ever downloaded.
        layer: optional name of the layer whose output is the feature grid
            (e.g. "block5_conv4" for the paper's 14x14 VGG-19 features);
            the last layer when None.

    Returns:
        (model, preprocess): `preprocess` maps pixels in [0, 255] to what the
        application expects.
    """
    constructor = getattr(keras.applications, name, None)
    if constructor is None or not callable(constructor):
        raise ValueError(
            f"`encoder` must be {SMALL_CNN!r} or a keras.applications model name "
            f"such as 'MobileNetV2'. Received: encoder={name!r}"
        )
    if weights is not None and str(weights) in ("imagenet",):
        raise ValueError(
            "`encoder_weights` must be None or a local weights file: nothing is "
            "downloaded at run time. Received: encoder_weights='imagenet'"
        )
    backbone = constructor(
        include_top=False, weights=weights, input_shape=(image_size, image_size, 3)
    )
    if layer is not None:
        backbone = keras.Model(backbone.input, backbone.get_layer(layer).output, name=name)
    return backbone, _application_preprocess(constructor)


def _application_preprocess(constructor):
    """The `preprocess_input` of the keras.applications module that defines
    `constructor` (every application module has one)."""
    for module_name in dir(keras.applications):
        module = getattr(keras.applications, module_name)
        if getattr(module, constructor.__name__, None) is constructor:
            return module.preprocess_input
    module = importlib.import_module(constructor.__module__)
    return getattr(module, "preprocess_input", lambda pixels: pixels)


@keras.saving.register_keras_serializable(package="zoo")
class ShowAttendTell(AttentionDecoderModel):
    """The captioner of Xu et al. (2015), with "soft" or "hard" attention.

    - Encoder: a CNN turns the image into L = H x W annotation vectors
      `a_i` (a small CNN trained from scratch, or any `keras.applications`
      backbone with random or local weights).
    - Initial state: `h_0 = f_init_h(mean_i a_i)`, `c_0 = f_init_c(mean_i a_i)`.
    - Each step attends from `h_{t-1}` with `SpatialSoftAttention` (the
      additive score, the gate `beta_t = sigmoid(f_beta(h_{t-1}))`), then
      `h_t, c_t = LSTM([E y_{t-1}; z_t], h_{t-1}, c_{t-1})`: a
      `BahdanauDecoder` over the feature grid.
    - Deep output: `p(y_t) = softmax(L_o(E y_{t-1} + L_h h_t + L_z z_t))`,
      with dropout before `L_o`.
    - The doubly stochastic regulariser `lambda * sum_i (1 - sum_t alpha_ti)^2`
      is added to the loss of `fit` (`add_loss`). Keras averages the
      cross-entropy over the target tokens of a batch, so the penalty of the
      batch's captions is divided by the same token count: the total is the
      paper's objective, `sum of -log p + lambda * penalty` over captions,
      per target token.

    With `attention="hard"` (section 4.1), training (`call(...,
    training=True)`, what `fit` runs) samples at each step a location
    `s_t ~ alpha_t` and the context is that one annotation vector, gated:
    `z_t = beta_t a_{s_t}`; for a caption chosen with probability
    `expected_context_probability` (0.5, the paper's) the step keeps the
    expected context `beta_t sum_i alpha_ti a_i` instead. The uniform
    numbers of every step are drawn before the decoder's loop (`fit`'s
    compiled JAX train step refuses a random draw inside it) and the step
    samples by inverse CDF. The locations get no gradient from the
    cross-entropy, so `add_loss` adds the negative of the paper's estimator
    for them (equation 12, `hard_attention_surrogate`), over the sampled
    captions, per target token like the penalty:
    `-(lambda_r (log p(y|s,a) - b) log p(s|a) + lambda_e H[s])`, the reward
    `log p(y|s,a)` held constant; `b` is the non-trainable weight
    `reward_baseline`, a moving average of the batch's mean caption
    log-likelihood updated at each training call (`b <- 0.9 b + 0.1 log p`,
    starting from the first batch's). The caption targets come from
    `target_in` as `zoo.data` builds them (`target_out` is `target_in`
    shifted left, with EOS after the last token). Everywhere else (`call`
    without training, `decode_step`, greedy and beam search,
    `attention_weights`, the exported models) the model uses the expected
    context, as the authors' code does at test time (arctic-captions'
    `build_sampler` without sampling), so teacher forcing and decoding
    compute the same thing, the 0.5 of expected-context captions trains
    that path, and a hard model decodes exactly as a soft one with its
    weights.

    Inputs are `{"image": float [B, image_size, image_size, 3] in [0, 1],
    "target_in": int [B, T]}`; the output is logits `[B, T, V]`.

    Args:
        target_vocabulary_size: int, caption vocabulary size.
        image_size: int, the square input size.
        encoder: "small_cnn" or a `keras.applications` class name.
        encoder_filters: the small CNN's stride-2 layer widths.
        feature_dim: D, the small CNN's annotation size.
        grid_layers: the small CNN's 3x3 layers at the grid resolution
            (each widens what an annotation vector sees by the grid's cell
            size times 2, see `small_cnn`).
        separable_grid: bool, make those layers depthwise-separable.
        encoder_weights: None, or a local weights file for an application.
        encoder_layer: optional name of the application layer to take the
            grid from.
        embedding_dim: m, the word embedding size.
        hidden_dim: n, the LSTM size.
        attention_units: the attention MLP size.
        dropout: float, dropout on embeddings and before `L_o`.
        doubly_stochastic_lambda: float >= 0, lambda (1.0 in the paper).
        attention: `"soft"` (deterministic, section 4.2) or `"hard"`
            (stochastic, section 4.1).
        reinforce_weight: float >= 0, lambda_r, the weight of the
            REINFORCE term of `attention="hard"` (0.1: the authors' code
            divides that term by 10; the paper gives no value).
        entropy_weight: float >= 0, lambda_e, the weight of its entropy
            term (the paper gives no value; 0.01 is untuned).
        expected_context_probability: float in [0, 1], the probability that
            a caption trains with the expected context instead of sampled
            locations (`attention="hard"`).
        sampling_seed: optional int, the seed of the locations' draws.
        **kwargs: see `AttentionDecoderModel`.

    References:
        - [Xu et al., 2015](https://arxiv.org/abs/1502.03044)
    """

    recurrent_state_keys = ("hidden", "cell")
    # The contract's declarations (zoo.recipes.contract); `image_size` and
    # `grid_shape` are set by the constructor.
    constant_state_keys = ("features", "projected_features")
    attention_state_key = "features"

    def __init__(
        self,
        target_vocabulary_size,
        image_size=64,
        encoder=SMALL_CNN,
        encoder_filters=(32, 64, 128),
        feature_dim=128,
        grid_layers=1,
        separable_grid=False,
        encoder_weights=None,
        encoder_layer=None,
        embedding_dim=64,
        hidden_dim=256,
        attention_units=128,
        dropout=0.0,
        doubly_stochastic_lambda=1.0,
        attention="soft",
        reinforce_weight=0.1,
        entropy_weight=0.01,
        expected_context_probability=0.5,
        sampling_seed=None,
        **kwargs,
    ):
        super().__init__(target_vocabulary_size, **kwargs)
        if attention not in ATTENTION_TYPES:
            raise ValueError(
                f"`attention` must be one of {', '.join(repr(a) for a in ATTENTION_TYPES)}. "
                f"Received: attention={attention!r}"
            )
        for name, value in (
            ("doubly_stochastic_lambda", doubly_stochastic_lambda),
            ("reinforce_weight", reinforce_weight),
            ("entropy_weight", entropy_weight),
        ):
            if not _is_number(value) or value < 0:
                raise ValueError(f"`{name}` must be a float >= 0. Received: {name}={value!r}")
        if not _is_number(expected_context_probability) or not (
            0 <= expected_context_probability <= 1
        ):
            raise ValueError(
                "`expected_context_probability` must be a float in [0, 1]. Received: "
                f"expected_context_probability={expected_context_probability!r}"
            )
        if sampling_seed is not None and (
            isinstance(sampling_seed, bool) or not isinstance(sampling_seed, int)
        ):
            raise ValueError(
                f"`sampling_seed` must be None or an int. Received: sampling_seed={sampling_seed!r}"
            )
        self.image_size = image_size
        self.encoder = encoder
        self.encoder_filters = [int(f) for f in encoder_filters]
        self.feature_dim = feature_dim
        self.grid_layers = grid_layers
        self.separable_grid = bool(separable_grid)
        self.encoder_weights = encoder_weights
        self.encoder_layer = encoder_layer
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.attention_units = attention_units
        self.dropout = dropout
        self.doubly_stochastic_lambda = float(doubly_stochastic_lambda)
        self.attention_type = attention
        self.reinforce_weight = float(reinforce_weight)
        self.entropy_weight = float(entropy_weight)
        self.expected_context_probability = float(expected_context_probability)
        self.sampling_seed = sampling_seed

        if encoder == SMALL_CNN:
            self.image_encoder = small_cnn(
                self.encoder_filters,
                feature_dim,
                grid_layers,
                self.separable_grid,
                dtype=self.dtype_policy,
            )
            self._preprocess = None
        else:
            # keras.applications constructors take no dtype: the backbone
            # follows the global policy.
            self.image_encoder, self._preprocess = application_backbone(
                encoder, image_size, encoder_weights, encoder_layer
            )
        grid = self.image_encoder.compute_output_shape((None, image_size, image_size, 3))
        self.grid_shape = (int(grid[1]), int(grid[2]))
        self.annotation_dim = int(grid[3])

        policy = self.dtype_policy
        self.target_embedding = keras.layers.Embedding(
            target_vocabulary_size, embedding_dim, dtype=policy, name="target_embedding"
        )
        self.initial_hidden = keras.layers.Dense(
            hidden_dim, activation="tanh", dtype=policy, name="init_h"
        )
        self.initial_cell = keras.layers.Dense(
            hidden_dim, activation="tanh", dtype=policy, name="init_c"
        )
        # The same sublayers and weight names for both kinds of attention, so
        # that a hard model's weights load into a soft one and back.
        decoder_class = SampledAttentionDecoder if attention == "hard" else BahdanauDecoder
        self.decoder = decoder_class(
            keras.layers.LSTMCell(hidden_dim, dtype=policy, name="decoder_cell"),
            SpatialSoftAttention(attention_units, dtype=policy, name="attention"),
            dtype=policy,
            name="decoder",
        )
        if attention == "hard":
            self.sampling_seed_generator = keras.random.SeedGenerator(sampling_seed)
            self.reward_baseline = self.add_weight(
                shape=(), initializer="zeros", trainable=False, dtype="float32",
                name="reward_baseline",
            )
            # How many training calls updated the baseline: the first sets it.
            self.reward_baseline_updates = self.add_weight(
                shape=(), initializer="zeros", trainable=False, dtype="float32",
                name="reward_baseline_updates",
            )
        self.hidden_to_output = keras.layers.Dense(embedding_dim, dtype=policy, name="L_h")
        self.context_to_output = keras.layers.Dense(embedding_dim, dtype=policy, name="L_z")
        self.output_projection = keras.layers.Dense(
            target_vocabulary_size, dtype=policy, name="L_o"
        )
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy)

    def build(self, input_shape=None):
        # One call on a dummy batch builds every weight (see Seq2SeqRecipe).
        self.call(
            {
                "image": ops.zeros((1, self.image_size, self.image_size, 3)),
                "target_in": ops.ones((1, 1), "int32") * self.bos_id,
            }
        )
        self.built = True

    def encode(self, image, training=None):
        """Images `[B, H, W, 3]` in [0, 1] -> the decoder's state."""
        image = ops.cast(image, self.compute_dtype)
        if self._preprocess is not None:
            image = self._preprocess(image * 255.0)
        grid = self.image_encoder(image, training=training)
        features = ops.reshape(grid, (-1, self.grid_shape[0] * self.grid_shape[1], self.annotation_dim))
        mean = ops.mean(features, axis=1)
        if not self.decoder.built:
            # The sampled-attention decoder reads [E y; u; e] (SampledAttentionDecoder).
            inputs_size = self.embedding_dim + (2 if self.hard_attention else 0)
            self.decoder.build((None, None, inputs_size), (None, None, self.annotation_dim))
        return {
            "features": features,
            "projected_features": self.decoder.project_memory(features),
            "hidden": self.initial_hidden(mean),
            "cell": self.initial_cell(mean),
        }

    def embed_targets(self, tokens, training=None):
        return self.embedding_dropout(self.target_embedding(tokens), training=training)

    @property
    def hard_attention(self):
        return self.attention_type == "hard"

    def recurrent_step(self, embedded, state, step):
        if self.hard_attention:
            # The expected context at test time: u = 0, e = 1.
            ones = ops.ones_like(embedded[:, :1])
            embedded_in = ops.concatenate([embedded, 0.0 * ones, ones], axis=-1)
        else:
            embedded_in = embedded
        outputs, (hidden, cell), alpha = self.decoder.step(
            embedded_in,
            [state["hidden"], state["cell"]],
            state["features"],
            projected_memory=state["projected_features"],
            step=step,
        )
        if self.hard_attention:
            outputs = outputs[..., :-1]
        # outputs = [h_t; z_t]: the deep output reads [E y_{t-1}; h_t; z_t].
        features = ops.concatenate([embedded, outputs], axis=-1)
        return features, dict(state, hidden=hidden, cell=cell), alpha

    def run_recurrence(self, embedded, state, training=None):
        features, attention, _, _ = self._run_decoder(embedded, state, training=training)
        return features, attention

    def _run_decoder(self, embedded, state, training=None):
        """`run_recurrence`, and for sampled hard attention (`attention="hard"`,
        training) the `log alpha_t[s_t]` of each step `[B, T]` and which
        captions sampled `[B]` (float 0/1); None and None otherwise."""
        sampling = self.hard_attention and bool(training)
        decoder_inputs = embedded
        sampled = None
        if self.hard_attention:
            ones = ops.ones_like(embedded[..., :1])
            if sampling:
                batch_shape = ops.shape(embedded)[:2]
                noise = keras.random.uniform(
                    batch_shape, seed=self.sampling_seed_generator, dtype="float32"
                )
                coin = keras.random.uniform(
                    batch_shape[:1], seed=self.sampling_seed_generator, dtype="float32"
                )
                sampled = ops.cast(coin >= self.expected_context_probability, "float32")
                expected = ops.expand_dims(1.0 - sampled, -1) * ops.cast(ones[..., 0], "float32")
                columns = [ops.expand_dims(noise, -1), ops.expand_dims(expected, -1)]
                columns = [ops.cast(column, embedded.dtype) for column in columns]
            else:
                columns = [0.0 * ones, ones]
            decoder_inputs = ops.concatenate([embedded] + columns, axis=-1)
        outputs, attention = self.decoder(
            decoder_inputs,
            state["features"],
            initial_state=[state["hidden"], state["cell"]],
            projected_memory=state["projected_features"],
            return_attention=True,
            xla=self.step_loop_compiles_with_xla,
            training=training,
        )
        log_prob = None
        if self.hard_attention:
            log_prob = ops.cast(outputs[..., -1], "float32") if sampling else None
            outputs = outputs[..., :-1]
        features = ops.concatenate([ops.cast(embedded, outputs.dtype), outputs], axis=-1)
        return features, attention, log_prob, sampled

    def output_logits(self, features, training=None):
        embedded = features[..., : self.embedding_dim]
        hidden = features[..., self.embedding_dim : self.embedding_dim + self.hidden_dim]
        context = features[..., self.embedding_dim + self.hidden_dim :]
        deep = embedded + self.hidden_to_output(hidden) + self.context_to_output(context)
        return self.output_projection(self.output_dropout(deep, training=training))

    def call(self, inputs, training=None):
        target_in = inputs["target_in"]
        state = self.encode(inputs["image"], training=training)
        embedded = self.embed_targets(target_in, training=training)
        features, attention, log_prob, sampled = self._run_decoder(
            embedded, state, training=training
        )
        if self.doubly_stochastic_lambda:
            self.add_loss(self.doubly_stochastic_loss(attention, target_in))
        logits = self.output_logits(features, training=training)
        if log_prob is not None:
            self.add_loss(self.hard_attention_loss(logits, attention, log_prob, sampled, target_in))
        return logits

    def hard_attention_loss(self, logits, attention, log_prob, sampled, target_in):
        """The negative REINFORCE surrogate of the sampled captions, divided
        by the number of target tokens, less its own value (the loss is 0,
        its gradient the estimator's); and the baseline's update.

        Args:
            logits: `[B, T, V]`, the training call's, with sampled locations.
            attention: `[B, T, L]`, the distributions the locations were
                sampled from.
            log_prob: `[B, T]`, `log alpha_t[s_t]` of each step.
            sampled: `[B]`, 1.0 for a caption with sampled locations, 0.0 for
                one with the expected context (no REINFORCE term).
            target_in: `[B, T]` ids; PAD steps are left out.
        """
        mask = ops.not_equal(target_in, self.pad_id)
        step_mask = ops.cast(mask, "float32")
        targets = next_tokens(target_in, self.pad_id, self.eos_id)
        token_log_likelihood = -keras.losses.sparse_categorical_crossentropy(
            targets, ops.cast(logits, "float32"), from_logits=True
        )
        reward = ops.sum(token_log_likelihood * step_mask, axis=1)
        surrogate = hard_attention_surrogate(
            ops.sum(log_prob * step_mask, axis=1),
            attention_entropy(attention, mask),
            reward,
            ops.convert_to_tensor(self.reward_baseline),
            self.reinforce_weight,
            self.entropy_weight,
        )
        self._update_reward_baseline(ops.mean(ops.stop_gradient(reward)))
        tokens = ops.maximum(ops.sum(step_mask), 1.0)
        loss = -ops.sum(surrogate * sampled) / tokens
        # Its gradient without its value, so that the loss `fit` reports stays
        # the cross-entropy (and penalty), comparable with soft attention's.
        return loss - ops.stop_gradient(loss)

    def _update_reward_baseline(self, batch_reward):
        updates = ops.convert_to_tensor(self.reward_baseline_updates)
        baseline = ops.convert_to_tensor(self.reward_baseline)
        moved = BASELINE_DECAY * baseline + (1.0 - BASELINE_DECAY) * batch_reward
        self.reward_baseline.assign(ops.where(updates > 0, moved, batch_reward))
        self.reward_baseline_updates.assign(updates + 1.0)

    def doubly_stochastic_loss(self, attention, target_in):
        """`lambda * sum over captions of sum_i (1 - sum_t alpha_ti)^2`, divided
        by the number of target tokens (see the class docstring).

        Args:
            attention: `[B, T, L]`, the weights of the teacher-forced steps.
            target_in: `[B, T]` ids; PAD steps are left out.
        """
        mask = ops.not_equal(target_in, self.pad_id)
        tokens = ops.maximum(ops.sum(ops.cast(mask, "float32")), 1.0)
        penalty = ops.sum(doubly_stochastic_penalty(attention, mask))
        return self.doubly_stochastic_lambda * penalty / tokens

    def attention_weights(self, inputs):
        """The teacher-forced attention `[B, T, L]` of a batch."""
        state = self.encode(inputs["image"])
        embedded = self.embed_targets(inputs["target_in"])
        return self.run_recurrence(embedded, state)[1]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_size": self.image_size,
                "encoder": self.encoder,
                "encoder_filters": list(self.encoder_filters),
                "feature_dim": self.feature_dim,
                "grid_layers": self.grid_layers,
                "separable_grid": self.separable_grid,
                "encoder_weights": self.encoder_weights,
                "encoder_layer": self.encoder_layer,
                "embedding_dim": self.embedding_dim,
                "hidden_dim": self.hidden_dim,
                "attention_units": self.attention_units,
                "dropout": self.dropout,
                "doubly_stochastic_lambda": self.doubly_stochastic_lambda,
                "attention": self.attention_type,
                "reinforce_weight": self.reinforce_weight,
                "entropy_weight": self.entropy_weight,
                "expected_context_probability": self.expected_context_probability,
                "sampling_seed": self.sampling_seed,
            }
        )
        return config
