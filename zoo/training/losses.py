"""The loss every run trains with: cross-entropy over the target tokens of
the global batch, with optional label smoothing."""

import keras
from keras import ops

from zoo.training import distributed


@keras.saving.register_keras_serializable(package="zoo")
class TokenCrossentropy(keras.losses.Loss):
    """Cross-entropy averaged over the non-pad tokens of the GLOBAL batch.

    On one device it equals `keras.losses.SparseCategoricalCrossentropy(
    from_logits=True, ignore_class=pad_id)`. Under a `tf.distribute`
    strategy it differs from it on purpose: that loss averages over each
    replica's own non-pad tokens, and Keras' train step then divides by the
    number of replicas (`keras.src.losses.loss.scale_loss_for_distribution`)
    and the optimizer sums the replicas' gradients, so each replica's mean
    counts equally, whatever its token count: not the one-device gradient
    when replicas hold different numbers of tokens (sentences of different
    lengths always do). Here each replica divides its token-loss sum by the
    token count summed over all replicas; the summed gradients are then
    exactly the one-device gradient. The "sum" reduction keeps Keras from
    dividing by the number of replicas again. Under JAX's DataParallel the
    loss sees the whole global batch, and this is the plain mean.

    The loss is computed in float32 (the loss's dtype) even when the model's
    logits are bfloat16 or float16.

    With `label_smoothing` e, each token's target distribution is
    `(1 - e) * one_hot + e / V` over the V classes (Szegedy et al. 2016, as
    Keras' `categorical_crossentropy` smooths it, and as the Transformer
    paper trains with e = 0.1); padding is still left out.

    Args:
        pad_id: the target id that is padding, not a token (0).
        label_smoothing: float in [0, 1), the probability mass spread
            uniformly over the vocabulary (0: none).
        name: the loss's name.
    """

    def __init__(self, pad_id=0, label_smoothing=0.0, name="token_crossentropy", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        if not 0 <= label_smoothing < 1:
            raise ValueError(
                f"label_smoothing must be in [0, 1); received label_smoothing={label_smoothing!r}"
            )
        self.pad_id = pad_id
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        if self.label_smoothing:
            # Keras' sparse cross-entropy has no label smoothing; its dense
            # one has, so the targets are made one-hot for it.
            per_token = keras.losses.categorical_crossentropy(
                ops.one_hot(y_true, ops.shape(y_pred)[-1], dtype=y_pred.dtype),
                y_pred,
                from_logits=True,
                label_smoothing=self.label_smoothing,
            )
        else:
            per_token = keras.losses.sparse_categorical_crossentropy(
                y_true, y_pred, from_logits=True, ignore_class=self.pad_id
            )
        is_token = ops.cast(ops.not_equal(y_true, self.pad_id), per_token.dtype)
        tokens = distributed.sum_over_replicas(ops.sum(is_token))
        return ops.divide_no_nan(per_token * is_token, tokens)

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config["pad_id"] = self.pad_id
        config["label_smoothing"] = self.label_smoothing
        return config
