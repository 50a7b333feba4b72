"""The learning-rate schedules a `TrainingConfig` names, and the optimizer
that follows them update by update."""

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


@keras.saving.register_keras_serializable(package="zoo")
class PerUpdateSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`schedule` counted in weight updates where the optimizer accumulates
    gradients over `batches_per_update` batches.

    Keras' optimizer calls its schedule with the batches seen, not the
    updates made, also when it accumulates gradients
    (`BaseOptimizer._get_current_learning_rate` passes `_iterations`). So
    that a run accumulating N batches of B follows, update by update, the
    curve of a run with batches of N * B, the step is divided by N first.

    Args:
        schedule: a `LearningRateSchedule` over updates.
        batches_per_update: int >= 1, the optimizer's
            `gradient_accumulation_steps`.
    """

    def __init__(self, schedule, batches_per_update):
        self.schedule = schedule
        self.batches_per_update = batches_per_update

    def __call__(self, step):
        return self.schedule(keras.ops.floor_divide(step, self.batches_per_update))

    def get_config(self):
        return {
            "schedule": keras.saving.serialize_keras_object(self.schedule),
            "batches_per_update": self.batches_per_update,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["schedule"] = keras.saving.deserialize_keras_object(config["schedule"])
        return cls(**config)


def scheduled_updates(training, batches_per_epoch):
    """The weight updates the schedule spans: the batches of its epochs,
    over the batches each update accumulates (a partial last one makes no
    update)."""
    batches = training.schedule_length * batches_per_epoch
    return max(1, batches // training.gradient_accumulation_steps)


def optimizer(training, schedule):
    """The Adam optimizer of a run: `schedule` (`learning_rate_schedule`'s),
    counted in updates, with the run's clipping and gradient accumulation.

    Keras accumulates by itself (`gradient_accumulation_steps`): each
    update applies the mean of the accumulated batches' gradients, clipped
    as one, and the accumulators are optimizer variables, so checkpoints
    save them and a run resumed inside an accumulation goes on exactly.
    """
    steps = training.gradient_accumulation_steps
    if steps > 1:
        schedule = PerUpdateSchedule(schedule, steps)
    return keras.optimizers.Adam(
        schedule,
        clipnorm=training.clipnorm,
        # Keras takes None, not 1, for no accumulation.
        gradient_accumulation_steps=steps if steps > 1 else None,
    )


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

    Counted in updates (`scheduled_updates`); `optimizer` makes the
    optimizer count them so under gradient accumulation.
    """
    rate, warmup = training.learning_rate, training.warmup_steps
    total = scheduled_updates(training, batches_per_epoch)
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
