"""The learning-rate schedules a `TrainingConfig` names."""

import keras


@keras.saving.register_keras_serializable(package="zoo")
class InverseSquareRootSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak_learning_rate`, then decay with 1/sqrt(step).

    The Transformer's schedule (Vaswani et al. 2017, eq. 3), scaled so that
    its peak, at step `warmup_steps`, is `peak_learning_rate` instead of
    `d_model^-0.5 * warmup_steps^-0.5`; fairseq's `inverse_sqrt` is the same:

        lr(step) = peak * sqrt(warmup) * min(step^-0.5, step * warmup^-1.5)

    with `step` counted from 1 (the first update's). Keras has no such
    schedule (`InverseTimeDecay` decays with 1/step and has no warm-up).

    Args:
        peak_learning_rate: float, the rate at the end of the warm-up.
        warmup_steps: int >= 1, the updates the warm-up takes.
    """

    def __init__(self, peak_learning_rate, warmup_steps):
        if warmup_steps < 1:
            raise ValueError(
                f"warmup_steps must be >= 1 for the inverse square root schedule; "
                f"received warmup_steps={warmup_steps!r}"
            )
        self.peak_learning_rate = peak_learning_rate
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = keras.ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return (
            self.peak_learning_rate
            * warmup**0.5
            * keras.ops.minimum(keras.ops.rsqrt(step), step * warmup**-1.5)
        )

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps}


def learning_rate_schedule(training, batches_per_epoch):
    """The schedule a `TrainingConfig` names.

    "cosine" (the default): cosine decay from the preset's rate to a tenth
    of it over the run, after a linear warm-up from 0 over `warmup_steps`
    updates when there are any (Keras' `CosineDecay` warm-up). A constant
    rate learns the synthetic corpus fast but then wanders away from the
    minimum it found, so the rate decays as the run goes on. "The run" is
    its first `epochs`, kept as `schedule_epochs` when it is continued
    (`train(continue_run=True)`): the extra epochs stay at the tenth.

    "inverse_sqrt": `InverseSquareRootSchedule`, peaking at the preset's
    rate after `warmup_steps` updates.
    """
    rate, warmup = training.learning_rate, training.warmup_steps
    total = max(1, training.schedule_length * batches_per_epoch)
    if training.schedule == "inverse_sqrt":
        return InverseSquareRootSchedule(rate, warmup)
    if not warmup:
        return keras.optimizers.schedules.CosineDecay(rate, decay_steps=total, alpha=0.1)
    return keras.optimizers.schedules.CosineDecay(
        0.0,
        decay_steps=max(1, total - warmup),
        alpha=0.1,
        warmup_target=rate,
        warmup_steps=warmup,
    )
