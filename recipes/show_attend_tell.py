"""Show, Attend and Tell: Xu et al. (2015), image captioning with soft attention."""

import importlib

import keras
from keras import ops

from zoo.layers import BahdanauDecoder
from zoo.layers import SpatialSoftAttention
from zoo.layers import doubly_stochastic_penalty
from zoo.recipes.seq2seq import AttentionDecoderModel

SMALL_CNN = "small_cnn"


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
    """The "soft" attention captioner of Xu et al. (2015).

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
        **kwargs,
    ):
        super().__init__(target_vocabulary_size, **kwargs)
        if isinstance(doubly_stochastic_lambda, bool) or not (
            isinstance(doubly_stochastic_lambda, (int, float)) and doubly_stochastic_lambda >= 0
        ):
            raise ValueError(
                "`doubly_stochastic_lambda` must be a float >= 0. Received: "
                f"doubly_stochastic_lambda={doubly_stochastic_lambda!r}"
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
        self.decoder = BahdanauDecoder(
            keras.layers.LSTMCell(hidden_dim, dtype=policy, name="decoder_cell"),
            SpatialSoftAttention(attention_units, dtype=policy, name="attention"),
            dtype=policy,
            name="decoder",
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
            self.decoder.build((None, None, self.embedding_dim), (None, None, self.annotation_dim))
        return {
            "features": features,
            "projected_features": self.decoder.project_memory(features),
            "hidden": self.initial_hidden(mean),
            "cell": self.initial_cell(mean),
        }

    def embed_targets(self, tokens, training=None):
        return self.embedding_dropout(self.target_embedding(tokens), training=training)

    def recurrent_step(self, embedded, state, step):
        outputs, (hidden, cell), alpha = self.decoder.step(
            embedded,
            [state["hidden"], state["cell"]],
            state["features"],
            projected_memory=state["projected_features"],
            step=step,
        )
        # outputs = [h_t; z_t]: the deep output reads [E y_{t-1}; h_t; z_t].
        features = ops.concatenate([embedded, outputs], axis=-1)
        return features, dict(state, hidden=hidden, cell=cell), alpha

    def run_recurrence(self, embedded, state, training=None):
        outputs, attention = self.decoder(
            embedded,
            state["features"],
            initial_state=[state["hidden"], state["cell"]],
            projected_memory=state["projected_features"],
            return_attention=True,
            xla=self.step_loop_compiles_with_xla,
            training=training,
        )
        return ops.concatenate([ops.cast(embedded, outputs.dtype), outputs], axis=-1), attention

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
        features, attention = self.run_recurrence(embedded, state, training=training)
        if self.doubly_stochastic_lambda:
            self.add_loss(self.doubly_stochastic_loss(attention, target_in))
        return self.output_logits(features, training=training)

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
            }
        )
        return config
