"""Training a preset into a run directory (TensorFlow data pipeline, any backend).

`train` is a few named steps: settle the `TrainingConfig`, open the run
directory (new, resumed or continued), prepare the data, build and compile
the model, fit the epochs left, and finish the run (weights, average,
metrics).
"""

import logging
import shutil
import sys
import time

import keras

from zoo import registry
from zoo import runs
from zoo.tasks import task_for
from zoo.tasks import write_run_manifest
from zoo.training import averaging
from zoo.training import checkpoints
from zoo.training import distributed
from zoo.training import early_stopping
from zoo.training.jit_compile import pads_to_fixed_shapes
from zoo.training.jit_compile import train_step_jit_compile
from zoo.training import losses
from zoo.training import progress
from zoo.training import run_directory
from zoo.training import schedules
from zoo.training import validation
from zoo.training.config import TrainingConfig
from zoo.training.config import TrainingError
from zoo.training.schedules import learning_rate_schedule

logger = logging.getLogger(__name__)


def train(
    preset,
    out,
    config=None,
    *,
    overwrite=False,
    continue_run=False,
    verbose="auto",
    evaluate_test=True,
    checkpoint_every_steps=None,
    strategy=None,
    mixed_precision=None,
    **settings,
):
    """Trains preset `preset` and writes its run directory `out`.

    Checkpoints (model and optimizer) are written after every epoch, and
    every `checkpoint_every_steps` batches when asked (`zoo.training.checkpoints`).
    Called again with the same `out` and the same settings after a crash,
    it resumes from the newest intact checkpoint: finished epochs are not
    run again, the optimizer state (with its step count, which drives the
    learning-rate schedule) is restored, and each epoch's batches come in
    the same order as in an uninterrupted run.

    Args:
        preset: a preset name (`zoo.presets()`).
        out: the run directory to write (or to resume).
        config: the `TrainingConfig` to train with (default: the preset's).
        overwrite: replace an existing run directory instead of resuming.
        continue_run: train the finished run in `out` further, to `epochs`
            (more than it has done), from its last checkpoint (weights and
            optimizer), as OpenNMT-py's `-train_from` does. Its settings
            must be the run's but for `epochs`, `average_last` and
            `early_stopping_patience`; a run that stopped early goes on. The
            learning-rate schedule does not restart: it goes on from the
            optimizer's step, so the cosine schedule stays at its floor (a
            tenth of the peak) for the extra epochs; a restart to the peak
            would throw the weights out of the minimum the decay settled
            them in. history.csv gets the new epochs, metrics.json and
            model.weights.h5 are rewritten.
        verbose: Keras `fit` verbosity; "auto": a progress bar when stdout
            is a terminal, else plain log lines (`zoo.training.progress`).
        evaluate_test: when the data has a test split, decode it greedily
            and record its scores in metrics.json.
        checkpoint_every_steps: optional int >= 1, also checkpoint every
            this many batches inside an epoch.
        strategy: None or a name of `zoo.training.distributed.STRATEGIES` ("auto",
            "one-device", "mirrored", "multi-worker", "data-parallel"), or
            a strategy object; the batch size is the global batch, split
            across the replicas. Under "multi-worker" only the chief writes
            `out`.
        mixed_precision: None (float32), "bfloat16" or "float16", or "auto"
            (`distributed.automatic_precision`: bfloat16 where the CPU
            reports amx_bf16, else float32).
        **settings: `TrainingConfig` fields that override `config`'s (None
            leaves one as it is), as `zoo train`'s flags do: e.g.
            `epochs=1, train_size=500`. A smaller `epochs` shrinks the
            preset's `average_last` to it.

    Returns:
        The run directory, a `Path`.

    Raises:
        TrainingError: a bad setting; `out` holds a finished run (without
            `continue_run`), or one with other settings, or something else
            (without `overwrite`).
    """
    called = time.monotonic()
    _check_run_options(overwrite, continue_run, checkpoint_every_steps)
    strategy = distributed.make_strategy(strategy)
    if mixed_precision == "auto":
        mixed_precision = distributed.automatic_precision()
    distributed.check_precision(mixed_precision)
    preset_settings = registry.get_preset(preset)
    task = task_for(preset_settings)
    training = settle_config(preset_settings, task, config, settings)
    distributed.check_gradient_accumulation(strategy, training.gradient_accumulation_steps)
    _check_step_validation(strategy, training)
    splits = task.load_splits(training)
    read_seconds = time.monotonic() - called
    equal_batches = _equal_batches(strategy, training)
    out, resuming, training = run_directory.open_run_directory(
        distributed.worker_run_directory(out, strategy), overwrite, preset, training, continue_run
    )
    jit = train_step_jit_compile(preset_settings["recipe"], training)
    task_data = task.prepare_data(
        training,
        splits,
        out,
        drop_remainder=equal_batches,
        fixed_shapes=pads_to_fixed_shapes(jit),
    )
    # A corpus's vocabulary sample is in the splits: not kept while training.
    del splits
    batches_per_epoch = _batches_per_epoch(task_data, training, out, resuming)
    run_config = {
        "preset": preset,
        "recipe": preset_settings["recipe"],
        "task": task.name,
        "model": {**preset_settings["model"], **task_data.vocabularies},
        "training": training.to_dict(),
        # What `zoo translate`, `zoo evaluate` and `zoo export` decode with
        # unless a flag says otherwise.
        "search": preset_settings["search"],
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
        **distributed.describe(strategy, mixed_precision),
    }
    if not resuming or continue_run:
        runs.write_json(out / runs.CONFIG, run_config)
    model, checkpoint = _model_to_train(
        run_config, training, strategy, mixed_precision, jit, batches_per_epoch, out, resuming
    )
    if continue_run:
        logger.warning(run_directory.schedule_note(model, training, batches_per_epoch))
    epochs_done, steps_done = (
        (checkpoint.epochs_done, checkpoint.steps_done) if checkpoint else (0, 0)
    )
    started = time.monotonic()
    startup = {"reading the data": read_seconds}
    if task_data.vocabulary_seconds is not None:
        startup["vocabularies"] = task_data.vocabulary_seconds
    first_update = progress.FirstUpdate(
        called,
        startup,
        # Where the step lines go: stdout, unless the run is silent.
        stream=sys.stdout if verbose else None,
    )
    history, epochs_ended = _fit_remaining(
        model,
        strategy,
        task_data,
        out,
        run_config,
        training,
        batches_per_epoch,
        epochs_done,
        steps_done,
        verbose,
        checkpoint_every_steps,
        continue_run,
        first_update,
    )
    seconds = time.monotonic() - started
    epochs_run = epochs_ended - epochs_done - steps_done / batches_per_epoch
    metrics = {
        "train_seconds": round(seconds, 1),
        "target_tokens_per_second": round(
            epochs_run * task_data.target_tokens_per_epoch / seconds, 1
        ),
        **task_data.examples,
        **distributed.describe(strategy, mixed_precision),
        **history,
        **task.speed_metrics(epochs_run, task_data, seconds),
    }
    metrics["read_seconds"] = round(read_seconds, 1)
    if task_data.vocabulary_seconds is not None:
        metrics["vocabulary_seconds"] = round(task_data.vocabulary_seconds, 1)
    if first_update.seconds is not None:
        metrics["first_update_seconds"] = round(first_update.seconds, 1)
    if task_data.epoch_size_estimated:
        metrics["epoch_size_estimated"] = True
    if checkpoint:
        metrics["resumed_from"] = checkpoint.name
    if epochs_ended < training.epochs:
        metrics["stopped_early_after_epoch"] = epochs_ended
    _finish_run(model, out, training, continue_run, metrics, epochs_ended)
    if evaluate_test and task_data.evaluate is not None:
        metrics.update(task_data.evaluate(model, run_config))
    runs.write_json(out / runs.METRICS, metrics)
    return out


def settle_config(preset_settings, task, config, settings):
    """The `TrainingConfig` a training runs with: `config` (default: the
    preset's) with `settings` over it, its tokenizer settled by the task."""
    training = config if config is not None else preset_settings["training"]
    if not isinstance(training, TrainingConfig):
        raise TrainingError(
            f"config must be a TrainingConfig; received {type(training).__name__}"
        )
    training = task.settled(training.overridden(**settings))
    if preset_settings["model"].get("share_all_embeddings") and not training.shared_vocabulary:
        raise TrainingError(
            "this preset shares one embedding matrix between source and target, "
            "which needs a shared vocabulary; leave shared_vocabulary on"
        )
    return training


def _check_run_options(overwrite, continue_run, checkpoint_every_steps):
    if continue_run and overwrite:
        raise TrainingError(
            "--continue trains the run in --out further and --overwrite replaces it; pass one"
        )
    if checkpoint_every_steps is not None and (
        not isinstance(checkpoint_every_steps, int) or checkpoint_every_steps < 1
    ):
        raise TrainingError(
            "checkpoint_every_steps must be None or an int >= 1; "
            f"received {checkpoint_every_steps!r}"
        )


def _check_step_validation(strategy, training):
    """`validate_every_steps` evaluates inside `fit`'s epoch, which the
    multi-worker custom loop (`distributed.custom_loop_fit`) was not
    checked for."""
    multi_worker = distributed.describe(strategy, None)["strategy"] == "multi-worker"
    if training.validate_every_steps and multi_worker:
        raise TrainingError(
            "--validate-every-steps is not available with --strategy multi-worker, which "
            "validates at each epoch's end only; leave it out"
        )


def _equal_batches(strategy, training):
    """Whether every batch must be the same size, split evenly over the
    devices (each length bucket's last, smaller batch is then left out of
    its epoch; the shuffle leaves out other pairs each epoch)."""
    equal_batches = distributed.equal_batches_required(strategy)
    replicas = distributed.replica_count(strategy)
    if equal_batches and training.batch_tokens:
        raise TrainingError(
            "--batch-tokens makes batches of several sizes, which --strategy "
            "data-parallel can't split evenly over its devices; batch by --batch-size"
        )
    if equal_batches and training.batch_size % replicas:
        raise TrainingError(
            f"batch size {training.batch_size} does not split over the {replicas} devices "
            "of --strategy data-parallel; choose a --batch-size they divide"
        )
    return equal_batches


def _batches_per_epoch(task_data, training, out, resuming):
    batches = task_data.batches_per_epoch
    if batches == 0:
        if not resuming:
            # A new run directory holds nothing worth keeping yet.
            shutil.rmtree(out)
        raise TrainingError(
            f"no full batch of {training.batch_size} in the training data; "
            "choose a smaller --batch-size"
        )
    return batches


def _model_to_train(
    run_config, training, strategy, mixed_precision, jit, batches_per_epoch, out, resuming
):
    """The run's model, built and compiled with its optimizer and loss, and
    the checkpoint it was restored from when resuming (else None)."""
    # The run's seed draws the initial weights and the dropout masks too, so
    # two runs of the same settings train alike (a resumed run then restores
    # both from its checkpoint).
    keras.utils.set_random_seed(training.seed)
    with distributed.precision_policy(mixed_precision), distributed.strategy_scope(strategy):
        model = compiled_model(run_config, training, jit, batches_per_epoch)
        checkpoint = run_directory.resume(model, out, training.epochs) if resuming else None
    return model, checkpoint


def compiled_model(run_config, training, jit, batches_per_epoch):
    """The run's model, built and compiled as it trains: its optimizer and
    schedule, the token loss, and `jit` (the train step's `jit_compile`)."""
    model = registry.build_model(run_config)
    model.compile(
        optimizer=schedules.optimizer(training, learning_rate_schedule(training, batches_per_epoch)),
        loss=losses.TokenCrossentropy(label_smoothing=training.label_smoothing),
        jit_compile=jit,
    )
    return model


def _finish_run(model, out, training, continue_run, metrics, epochs_ended):
    """Saves the run's final weights and its manifest, then averages its
    last checkpoints into them when the config asks: its last
    `average_last`, or as many as it did (`epochs_ended`) when it stopped
    early before."""
    if continue_run:
        averaging.forget_average(out)
    runs.save_weights(model, out / runs.WEIGHTS)
    # Before averaging, which checks the run and then writes its own.
    write_run_manifest(out)
    averaged = _average_last_checkpoints(
        model, out, min(training.average_last, epochs_ended)
    )
    if averaged:
        metrics["averaged_checkpoints"] = averaged


def _average_last_checkpoints(model, out, last):
    """Makes the finished run's weights, and `model`'s, the mean of its
    last `last` epoch checkpoints; returns their names ([] when `last` is 0)."""
    if not last:
        return []
    path, names = averaging.average_run(out, last)
    model.load_weights(path)
    return names


def _epoch_callbacks(
    strategy, task_data, out, config, training, epochs_done, first_step, batches_per_epoch,
    verbose,
):
    """The callbacks that report on each epoch, in the order they must run:
    validation BLEU first, so that the others log and watch it; then the
    validation inside the epoch (`validate_every_steps`), history.csv, the
    best checkpoint, early stopping, and TensorBoard.

    TensorBoard and the validation BLEU are left out under "multi-worker":
    `distributed.custom_loop_fit` drives callbacks as fit does, but a
    worker decoding or writing summaries alone, outside the collective
    steps, is not something it was checked for.
    """
    multi_worker = distributed.describe(strategy, None)["strategy"] == "multi-worker"
    callbacks = []
    bleu = bool(training.validation_bleu and task_data.validate)
    bleu = bleu and not multi_worker
    if bleu:
        callbacks.append(validation.ValidationBleu(task_data.validate, config))
    if training.validate_every_steps and task_data.valid_data is not None:
        callbacks.append(
            validation.StepValidation(
                training.validate_every_steps,
                task_data.valid_data,
                out,
                validate=task_data.validate if bleu else None,
                config=config,
                first_step=first_step,
                last_step=None if task_data.epoch_size_estimated else batches_per_epoch,
                stream=sys.stdout if verbose else None,
            )
        )
    callbacks.append(keras.callbacks.CSVLogger(str(out / runs.HISTORY), append=True))
    if task_data.valid_data is not None:
        monitor = "val_bleu" if bleu else "val_loss"
        callbacks.append(validation.BestCheckpoint(out, monitor, epochs_done))
        # After history.csv's row, which it counts on from when resumed.
        stopping = early_stopping.callback(out, training, bleu)
        if stopping:
            callbacks.append(stopping)
    if not multi_worker:
        # Keras' callback logs the optimizer's learning rate itself.
        callbacks.append(
            keras.callbacks.TensorBoard(
                str(out / runs.TENSORBOARD), write_graph=False, profile_batch=0
            )
        )
    return callbacks


def _fit_remaining(
    model, strategy, task_data, out, config, training, batches_per_epoch, epochs_done, steps_done,
    verbose, checkpoint_every_steps, continue_run, first_update,
):
    """Fits the epochs (and the rest of an epoch) not done yet; none when
    the run had stopped early and is resumed, not continued.

    Returns:
        `(logs, epochs_ended)`: each logged metric's last value (empty when
        nothing was left), and the epochs done when training ended (fewer
        than `training.epochs` when it stopped early).
    """
    epochs = training.epochs
    last, epochs_ended = {}, epochs_done
    # One `fit` an epoch: a streamed epoch ends where its stream ends, which
    # a count made from a sample may miss by a few batches; the first may
    # be the rest of an epoch interrupted inside.
    for epoch in range(epochs_done, epochs):
        first_step = steps_done if epoch == epochs_done else 0
        epoch_callbacks = _epoch_callbacks(
            strategy, task_data, out, config, training, epoch, first_step, batches_per_epoch,
            verbose,
        )
        # Killed after it stopped early, before it finished. A continued
        # run trains on: its epochs stop it if they don't improve on the best.
        if not continue_run and early_stopping.stopped_already(epoch_callbacks):
            break
        train_data = task_data.train_data(range(epoch, epoch + 1)).skip(first_step)
        fit_verbose, logging_callbacks = progress.fit_logging(
            verbose,
            epochs,
            first_step,
            lambda: task_data.target_tokens_per_epoch / batches_per_epoch,
            steps_per_epoch=batches_per_epoch,
        )
        history = distributed.fit(
            model,
            train_data,
            strategy=strategy,
            validation_data=task_data.valid_data,
            initial_epoch=epoch,
            epochs=epoch + 1,
            verbose=fit_verbose,
            # The epoch's checkpoint last: it marks the epoch done, so a run
            # killed before it has written its history row, validation BLEU
            # and best checkpoint redoes the epoch instead of losing them.
            callbacks=[
                *epoch_callbacks,
                # After the validation BLEU, so that the epoch's line shows it.
                *logging_callbacks,
                first_update,
                checkpoints.CheckpointCallback(
                    out / runs.CHECKPOINTS, checkpoint_every_steps, first_step
                ),
            ],
        )
        last.update({key: float(values[-1]) for key, values in history.history.items()})
        epochs_ended = history.epoch[-1] + 1 if history.epoch else epochs_ended
        if model.stop_training:
            break
    return last, epochs_ended
