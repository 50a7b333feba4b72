"""Training a preset into a run directory (TensorFlow data pipeline, any backend)."""

import collections
import functools
import json
import logging
import math
import shutil
import tempfile
import time
from pathlib import Path

import keras
import numpy as np

from zoo.training import averaging
from zoo.training import checkpoints
from zoo.training import distributed
from zoo.training import progress
from zoo.training import validation
from zoo.training import SCHEDULES
from zoo import registry
from zoo import runs
from zoo.errors import ZooUserError
from zoo.tasks import task_for
from zoo.tasks import write_run_manifest
from zoo.recipes.contract import SPECIAL_TOKENS
from zoo.recipes.seq2seq import default_jit_compile


logger = logging.getLogger(__name__)


class TrainingError(ZooUserError):
    """A training request that can't be carried out (bad option, run exists)."""


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
    """The schedule a preset's training settings name.

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
    rate, warmup = training["learning_rate"], training.get("warmup_steps", 0)
    total = max(1, training.get("schedule_epochs", training["epochs"]) * batches_per_epoch)
    if training.get("schedule", "cosine") == "inverse_sqrt":
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


def check_training_settings(training):
    """A TrainingError naming the first bad value among the training keys
    that a user may set (split sizes, label smoothing, learning rate,
    schedule, warm-up, vocabulary size, seed, averaging)."""
    for key, least in (("valid_size", 1), ("test_size", 0)):
        _int_setting(training, key, least, default=least)
    smoothing = training.get("label_smoothing", 0.0)
    if not isinstance(smoothing, (int, float)) or not 0 <= smoothing < 1:
        raise TrainingError(f"label_smoothing must be in [0, 1); received {smoothing!r}")
    rate = training["learning_rate"]
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not 0 < rate < math.inf:
        raise TrainingError(f"learning_rate must be a finite number > 0; received {rate!r}")
    schedule = training.get("schedule", "cosine")
    if schedule not in SCHEDULES:
        raise TrainingError(
            f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}"
        )
    warmup = _int_setting(training, "warmup_steps", 0, default=0)
    if schedule == "inverse_sqrt" and warmup < 1:
        raise TrainingError(
            "the inverse_sqrt schedule needs warmup_steps >= 1 (its peak, --warmup-steps); "
            f"received {warmup!r}"
        )
    reserved = len(SPECIAL_TOKENS)
    _int_setting(
        training, "vocabulary_size", reserved + 1, why=f" (more than the {reserved} reserved tokens)"
    )
    _int_setting(training, "seed", 0, default=0)
    average_last = _int_setting(training, "average_last", 0, default=0)
    # Checked before training, not after hours of it.
    if average_last > training["epochs"]:
        raise TrainingError(
            f"average_last {average_last} is more than the run's {training['epochs']} "
            "epochs; choose --average-last at most --epochs"
        )


def _int_setting(training, key, least, default=None, why=""):
    """`training[key]` (`default` where it is absent), refused with a
    TrainingError unless it is an int >= `least`."""
    value = training.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise TrainingError(f"{key} must be an int >= {least}{why}; received {value!r}")
    return value


# What `--continue` may change in a run's training settings: it trains more
# epochs, may end with another average, and keeps the schedule's length.
_CONTINUABLE = ("epochs", "average_last", "schedule_epochs")


def _open_run_directory(out, overwrite, preset, training, continue_run=False):
    """The run directory, whether it holds a run to resume, and the training
    settings to train it with.

    An empty or missing directory starts a new run; so does any directory
    with `overwrite`. A directory holding an unfinished run (no final
    weights) of the same preset and training settings is resumed. With
    `continue_run`, a finished run of the same preset and settings but
    fewer epochs is resumed too, its settings then `training` with the run's
    `schedule_epochs` (`_continued_settings`). Anything else is refused
    with a one-line error.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        # Refused with --overwrite too: a run replaces a folder, never a file.
        raise TrainingError(f"--out {str(out)!r} is a file, not a folder; choose another --out")
    if out.exists() and any(out.iterdir()) and not overwrite:
        config_path = out / runs.CONFIG
        if not config_path.is_file():
            raise TrainingError(
                f"run directory {str(out)!r} already exists and is not empty; "
                "choose another --out or pass --overwrite"
            )
        if (out / runs.WEIGHTS).is_file() and not continue_run:
            raise TrainingError(
                f"run directory {str(out)!r} already holds a finished run; choose another "
                "--out, pass --overwrite, or train it further with --continue and more --epochs"
            )
        previous = runs.read_json(config_path)
        before = previous.get("training", {})
        ignored = _CONTINUABLE if continue_run else ()
        changed = sorted(
            key
            for key in set(training) | set(before)
            if key not in ignored and training.get(key) != before.get(key)
        )
        if previous.get("preset") != preset or changed:
            state = "a finished" if (out / runs.WEIGHTS).is_file() else "an unfinished"
            raise TrainingError(
                f"run directory {str(out)!r} holds {state} run "
                f"of {previous.get('preset')!r} with other settings "
                f"({', '.join(changed) or 'preset'}); resume it with the same "
                "options, or choose another --out, or pass --overwrite"
            )
        if continue_run:
            training = {**training, **_continued_settings(out, before, training)}
        return out, True, training
    if continue_run:
        raise TrainingError(
            f"--continue: {str(out)!r} holds no run to continue; drop --continue to start one"
        )
    if out.exists() and overwrite:
        shutil.rmtree(out)
    try:
        (out / runs.CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise TrainingError(
            f"cannot create the run directory {str(out)!r}: {error.strerror}; choose another --out"
        ) from None
    return out, False, training


def _continued_settings(out, previous, training):
    """The settings a continued run keeps from the run it continues: the
    length of its learning-rate schedule (`schedule_epochs`, its first
    `epochs`), so that the schedule goes on where it stopped.

    Refuses an `epochs` that the run's newest checkpoint has already done.
    """
    checkpoint = checkpoints.latest_checkpoint(out / runs.CHECKPOINTS)
    if checkpoint is None:
        raise TrainingError(
            f"--continue: run directory {str(out)!r} has no intact checkpoint to continue "
            "from; choose another --out or pass --overwrite"
        )
    if training["epochs"] <= checkpoint.epochs_done:
        raise TrainingError(
            f"--continue: run directory {str(out)!r} has done {checkpoint.epochs_done} "
            f"epochs already; ask for more with --epochs (above {checkpoint.epochs_done})"
        )
    return {"schedule_epochs": previous.get("schedule_epochs", previous.get("epochs"))}


def _schedule_note(model, training, batches_per_epoch):
    """One line on what the learning rate of a continued run does."""
    step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    rate = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
    schedule = training.get("schedule", "cosine")
    if schedule == "inverse_sqrt":
        how = "goes on decaying with 1/sqrt(update)"
    elif step >= training["schedule_epochs"] * batches_per_epoch:
        how = "stays at its floor, a tenth of the peak"
    else:
        how = f"goes on decaying to a tenth of the peak by epoch {training['schedule_epochs']}"
    return (
        f"continuing to {training['epochs']} epochs: the {schedule} learning-rate schedule "
        f"does not restart; it goes on from update {step} (rate {rate:.3g}) and {how}"
    )


def write_untrained_run(
    out, preset, target_tokenizer, source_tokenizer=None, model_overrides=None, training_overrides=None
):
    """A complete run directory of `preset` holding the model's initial weights.

    For what needs a run directory but not a trained model: export checks
    (the exported graphs and the Python API must agree on any weights) and
    latency benchmarks. Untrained, a model decodes every input to its step
    limit.

    Args:
        out: the run directory to write (created; must not exist yet).
        preset: a preset name.
        target_tokenizer: the target (or caption) tokenizer (a `TextTokenizer`
            or a `SentencePieceTokenizer`).
        source_tokenizer: the source tokenizer (translation only), of the
            same kind; the very same object makes a shared vocabulary.
        model_overrides: optional dict of model config entries (e.g. tiny sizes).
        training_overrides: optional dict of training settings (e.g.
            `max_length`, which bounds the inputs the Python API reads).

    Returns:
        The run directory, a `Path`.
    """
    from zoo.data import SentencePieceTokenizer
    from zoo.tasks.loading import build_model

    settings = registry.get_preset(preset)
    task = task_for(settings)
    out = Path(out)
    out.mkdir(parents=True)
    model = {**settings["model"], **(model_overrides or {})}
    tokenizers = {"source": source_tokenizer, "target": target_tokenizer}
    kind = "sentencepiece" if isinstance(target_tokenizer, SentencePieceTokenizer) else "wordpiece"
    training = task.tokenizer_settings(
        {**settings["training"], **(training_overrides or {})},
        kind,
        shared_vocabulary=source_tokenizer is target_tokenizer,
    )
    for role, name in task.vocabulary_files({"training": training}).items():
        tokenizers[role].save(out / name)
        model[f"{role}_vocabulary_size"] = tokenizers[role].vocabulary_size
    config = {
        "preset": preset,
        "recipe": settings["recipe"],
        "task": task.name,
        "model": model,
        "training": training,
    }
    runs.write_json(out / runs.CONFIG, config)
    runs.save_weights(build_model(config), out / runs.WEIGHTS)
    write_run_manifest(out)
    return out


def _count_target_tokens(dataset):
    return int(sum(np.count_nonzero(targets) for _, targets in dataset.as_numpy_iterator()))


def compiled_batch_shapes(preset):
    """How a train step compiled per batch shape sees `preset`'s training
    data on TensorFlow (batches padded to fixed shapes, see `train`).

    Returns:
        `(shapes, batches)`: the number of distinct batch shapes in one
        epoch, and the number of batches in it.
    """
    settings = registry.get_preset(preset)
    # Presets that share their training settings share the answer: `zoo bench
    # train` asks for every preset, and each answer builds the data anew.
    return _compiled_batch_shapes(
        task_for(settings), json.dumps(settings["training"], sort_keys=True)
    )


@functools.lru_cache(maxsize=None)
def _compiled_batch_shapes(task, training_json):
    import tensorflow as tf

    training = task.tokenizer_settings(json.loads(training_json))
    splits = task.load_splits(training)
    with tempfile.TemporaryDirectory() as folder:
        epoch = task.prepare_data(training, splits, Path(folder), fixed_shapes=True).train_data(None)
        shapes = collections.Counter(
            tuple(tuple(tensor.shape) for tensor in tf.nest.flatten(batch)) for batch in epoch
        )
    return len(shapes), sum(shapes.values())


def train(
    preset,
    out,
    data_spec=None,
    epochs=None,
    batch_size=None,
    train_size=None,
    valid_size=None,
    test_size=None,
    overwrite=False,
    verbose="auto",
    evaluate_test=True,
    checkpoint_every_steps=None,
    strategy=None,
    mixed_precision=None,
    jit_compile=None,
    label_smoothing=None,
    learning_rate=None,
    schedule=None,
    warmup_steps=None,
    validation_bleu=None,
    tokenizer=None,
    shared_vocabulary=None,
    vocabulary_size=None,
    average_last=None,
    seed=None,
    continue_run=False,
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
        data_spec: None for the preset's data, "synthetic", or a corpus spec
            (translation: `"train.en.gz,train.de.gz"` or a TSV file;
            captioning: `"captions.txt,images/[,split.txt]"` or
            `"captions.json,images/"`).
        epochs, batch_size, train_size: override the preset's settings
            (`train_size` counts sentence pairs, or images for captioning).
        valid_size, test_size: override the preset's validation and test
            sizes: the synthetic data's splits (test_size 0: no test
            evaluation), and the held-out share of a real corpus (valid_size
            only, at most a tenth of it).
        overwrite: replace an existing run directory instead of resuming.
        verbose: Keras `fit` verbosity; "auto": a progress bar when stdout
            is a terminal, else plain log lines (`zoo.training.progress`).
        evaluate_test: when the data has a test split, decode it greedily
            and record its scores in metrics.json.
        checkpoint_every_steps: optional int >= 1, also checkpoint every
            this many batches inside an epoch.
        strategy: None or a name of `zoo.training.distributed.STRATEGIES` ("auto",
            "one-device", "mirrored", "multi-worker", "data-parallel"), or
            a strategy object; `batch_size` is the global batch, split
            across the replicas. Under "multi-worker" only the chief writes
            `out`.
        mixed_precision: None (float32), "bfloat16" or "float16", or "auto"
            (`distributed.automatic_precision`: bfloat16 where the CPU
            reports amx_bf16, else float32).
        jit_compile: None (the preset's setting, else the recipe's default
            on this backend: `recipes.seq2seq.default_jit_compile`), or a
            bool for Keras' `compile(jit_compile=...)`. A train step that
            XLA compiles on TensorFlow gets batches of a few fixed shapes
            (padded to their length bucket's boundary), since XLA compiles
            once per shape.
        label_smoothing: override the preset's `label_smoothing` (float in
            [0, 1); see `distributed.TokenCrossentropy`).
        learning_rate: override the preset's `learning_rate` (float > 0),
            the peak of the schedule, reached after the warm-up.
        schedule: override the preset's learning-rate `schedule`
            ("cosine" or "inverse_sqrt"; see `learning_rate_schedule`).
        warmup_steps: override the preset's `warmup_steps` (int >= 0).
        validation_bleu: override the preset's `validation_bleu`: decode
            the validation split greedily after each epoch and log its BLEU
            as `val_bleu` (translation only).
        tokenizer: None (the preset's "tokenizer", else SentencePiece for a
            real corpus and WordPiece for the synthetic one), "wordpiece"
            (lowercase) or "sentencepiece" (keeps case; translation only).
        shared_vocabulary: None (the preset's setting, else False), or
            True for one vocabulary learned from both languages.
        vocabulary_size: override the preset's `vocabulary_size` (int >
            the 4 reserved tokens): the most tokens each vocabulary, or the
            shared one, may have; a small corpus gives fewer.
        average_last: override the preset's `average_last` (int >= 0):
            after the last epoch, the run's `model.weights.h5` becomes the
            mean of its last this many epoch checkpoints, as `zoo average`
            makes it (`zoo.training.averaging`), and the test split is
            scored with it; 0: the last epoch's weights. Given here, it may
            not exceed the epochs; the preset's shrinks to them.
        seed: override the preset's `seed` (int >= 0, default 0): it draws
            the synthetic data, the initial weights, the dropout masks, the
            batch order and hard attention's samples, so two runs with the
            same seed train alike and runs with other seeds show the spread.
        continue_run: train the finished run in `out` further, to `epochs`
            (more than it has done), from its last checkpoint (weights and
            optimizer), as OpenNMT-py's `-train_from` does. Its settings
            must be the run's but for `epochs` and `average_last`. The
            learning-rate schedule does not restart: it goes on from the
            optimizer's step, so the cosine schedule stays at its floor (a
            tenth of the peak) for the extra epochs; a restart to the peak
            would throw the weights out of the minimum the decay settled
            them in. history.csv gets the new epochs, metrics.json and
            model.weights.h5 are rewritten.

    Returns:
        The run directory, a `Path`.

    Raises:
        TrainingError: `out` holds a finished run (without `continue_run`),
            or one with other settings, or something else (without
            `overwrite`).
    """
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
    strategy = distributed.make_strategy(strategy)
    if mixed_precision == "auto":
        mixed_precision = distributed.automatic_precision()
    distributed.check_precision(mixed_precision)
    settings = registry.get_preset(preset)
    training = dict(settings["training"])
    for key, value in (
        ("data", data_spec),
        ("epochs", epochs),
        ("batch_size", batch_size),
        ("train_size", train_size),
        ("valid_size", valid_size),
        ("test_size", test_size),
        ("jit_compile", jit_compile),
        ("label_smoothing", label_smoothing),
        ("learning_rate", learning_rate),
        ("schedule", schedule),
        ("warmup_steps", warmup_steps),
        ("validation_bleu", validation_bleu),
        ("vocabulary_size", vocabulary_size),
        ("average_last", average_last),
        ("seed", seed),
    ):
        if value is not None:
            training[key] = value
    if average_last is None and "average_last" in training:
        # The preset's average shrinks to a shorter run that --epochs asks for.
        training["average_last"] = min(training["average_last"], training["epochs"])
    check_training_settings(training)
    if test_size is not None and training["data"] != "synthetic":
        raise TrainingError(
            "--test-size applies to the synthetic data only: a corpus is scored on "
            "its test set with `zoo evaluate DIR --data TEST`"
        )
    task = task_for(settings)
    training = task.tokenizer_settings(training, tokenizer, shared_vocabulary)
    if settings["model"].get("share_all_embeddings") and not training["shared_vocabulary"]:
        raise TrainingError(
            f"preset {preset} shares one embedding matrix between source and target, "
            "which needs a shared vocabulary; leave shared_vocabulary on"
        )
    splits = task.load_splits(training)
    # Every batch the same size, split evenly over the devices, where the
    # strategy needs it (each length bucket's last, smaller batch is then
    # left out of its epoch; the shuffle leaves out other pairs each epoch).
    equal_batches = distributed.equal_batches_required(strategy)
    if equal_batches and training["batch_size"] % distributed.replica_count(strategy):
        raise TrainingError(
            f"batch size {training['batch_size']} does not split over the "
            f"{distributed.replica_count(strategy)} devices of --strategy data-parallel; "
            "choose a --batch-size they divide"
        )
    out, resuming, training = _open_run_directory(
        distributed.worker_run_directory(out, strategy), overwrite, preset, training, continue_run
    )
    recipe = registry.recipe_class(settings["recipe"])
    jit = training.get("jit_compile")
    jit = default_jit_compile(recipe) if jit is None else jit
    task_data = task.prepare_data(
        training,
        splits,
        out,
        drop_remainder=equal_batches,
        fixed_shapes=jit and keras.backend.backend() == "tensorflow",
    )
    batches_per_epoch = int(task_data.train_data(None).cardinality())
    if batches_per_epoch == 0:
        if not resuming:
            shutil.rmtree(out)
        raise TrainingError(
            f"no full batch of {training['batch_size']} in the training data; "
            "choose a smaller --batch-size"
        )

    model_config = {**settings["model"], **task_data.vocabularies}
    config = {
        "preset": preset,
        "recipe": settings["recipe"],
        "task": task.name,
        "model": model_config,
        "training": training,
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
        **distributed.describe(strategy, mixed_precision),
    }
    if not resuming or continue_run:
        runs.write_json(out / runs.CONFIG, config)
    # The run's seed draws the initial weights and the dropout masks too, so
    # two runs of the same settings train alike (a resumed run then restores
    # both from its checkpoint).
    keras.utils.set_random_seed(training.get("seed", 0))
    with distributed.precision_policy(mixed_precision), distributed.strategy_scope(strategy):
        model = recipe(**model_config)
        model.compile(
            optimizer=keras.optimizers.Adam(
                learning_rate_schedule(training, batches_per_epoch),
                clipnorm=training.get("clipnorm"),
            ),
            loss=distributed.TokenCrossentropy(
                label_smoothing=training.get("label_smoothing", 0.0)
            ),
            jit_compile=jit,
        )
        checkpoint = _resume(model, out, training["epochs"]) if resuming else None
    if continue_run:
        logger.warning(_schedule_note(model, training, batches_per_epoch))
    epochs_done, steps_done = (
        (checkpoint.epochs_done, checkpoint.steps_done) if checkpoint else (0, 0)
    )

    started = time.monotonic()
    history = _fit_remaining(
        model,
        strategy,
        task_data,
        out,
        config,
        batches_per_epoch,
        epochs_done,
        steps_done,
        verbose,
        checkpoint_every_steps,
    )
    seconds = time.monotonic() - started
    if continue_run:
        averaging.forget_average(out)
    runs.save_weights(model, out / runs.WEIGHTS)
    # Before averaging, which checks the run and then writes its own.
    write_run_manifest(out)
    averaged = _average_last_checkpoints(model, out, training.get("average_last", 0))

    epochs_run = training["epochs"] - epochs_done - steps_done / batches_per_epoch
    one_epoch = task_data.train_data(None)
    metrics = {
        "train_seconds": round(seconds, 1),
        "target_tokens_per_second": round(
            epochs_run * _count_target_tokens(one_epoch) / seconds, 1
        ),
        **task_data.examples,
        **distributed.describe(strategy, mixed_precision),
        **history,
    }
    if checkpoint:
        metrics["resumed_from"] = checkpoint.name
    if averaged:
        metrics["averaged_checkpoints"] = averaged
    metrics.update(task.speed_metrics(epochs_run, task_data, seconds))
    if evaluate_test and task_data.evaluate is not None:
        metrics.update(task_data.evaluate(model, config))
    runs.write_json(out / runs.METRICS, metrics)
    return out


def _average_last_checkpoints(model, out, last):
    """Makes the finished run's weights, and `model`'s, the mean of its
    last `last` epoch checkpoints; returns their names ([] when `last` is 0)."""
    if not last:
        return []
    path, names = averaging.average_run(out, last)
    model.load_weights(path)
    return names


def _resume(model, out, epochs):
    """Restores the newest intact checkpoint of `out` into `model`, or None."""
    checkpoint = checkpoints.latest_checkpoint(out / runs.CHECKPOINTS)
    if checkpoint is None:
        logger.warning("resuming %s: no complete checkpoint yet, starting from the beginning", out)
        return None
    model.build()
    try:
        checkpoints.restore(model, checkpoint)
    except (OSError, ValueError) as error:
        raise TrainingError(
            f"cannot restore checkpoint {checkpoint.weights}: {error}; "
            "delete it to resume from the one before, or pass --overwrite"
        ) from None
    logger.warning("resuming %s from checkpoint %s", out, checkpoint.describe(epochs))
    _keep_history_rows(out / runs.HISTORY, checkpoint.epochs_done)
    return checkpoint


def _keep_history_rows(path, epochs_done):
    """Cuts history.csv to its header and the rows of the epochs done, so
    that a resumed run appends each epoch once."""
    if path.is_file():
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[: 1 + epochs_done]))


def _epoch_callbacks(strategy, task_data, out, config, epochs_done):
    """The callbacks that report on each epoch, in the order they must run:
    validation BLEU first, so that the others log it; then history.csv, the
    best checkpoint, and TensorBoard.

    TensorBoard and the validation BLEU are left out under "multi-worker":
    `distributed.custom_loop_fit` drives callbacks as fit does, but a
    worker decoding or writing summaries alone, outside the collective
    steps, is not something it was checked for.
    """
    multi_worker = distributed.describe(strategy, None)["strategy"] == "multi-worker"
    callbacks = []
    bleu = bool(config["training"].get("validation_bleu") and task_data.validate)
    bleu = bleu and not multi_worker
    if bleu:
        callbacks.append(validation.ValidationBleu(task_data.validate, config))
    callbacks.append(keras.callbacks.CSVLogger(str(out / runs.HISTORY), append=True))
    if task_data.valid_data is not None:
        monitor = "val_bleu" if bleu else "val_loss"
        callbacks.append(validation.BestCheckpoint(out, monitor, epochs_done))
    if not multi_worker:
        # Keras' callback logs the optimizer's learning rate itself.
        callbacks.append(
            keras.callbacks.TensorBoard(
                str(out / runs.TENSORBOARD), write_graph=False, profile_batch=0
            )
        )
    return callbacks


def _fit_remaining(
    model, strategy, task_data, out, config, batches_per_epoch, epochs_done, steps_done,
    verbose, checkpoint_every_steps,
):
    """Fits the epochs (and the rest of an epoch) not done yet.

    Returns:
        dict, each logged metric's last value (empty when nothing was left).
    """
    epochs = config["training"]["epochs"]
    # Keras epochs have a fixed number of steps, so the rest of an epoch
    # interrupted inside is a `fit` of its own, before the whole ones.
    parts = []
    if steps_done:
        parts.append((epochs_done, steps_done))
        epochs_done += 1
    if epochs_done < epochs:
        parts.append((epochs_done, 0))
    last = {}
    for first_epoch, first_step in parts:
        last_epoch = first_epoch + 1 if first_step else epochs
        train_data = task_data.train_data(range(first_epoch, last_epoch)).skip(first_step)
        fit_verbose, logging_callbacks = progress.fit_logging(
            verbose,
            epochs,
            first_step,
            lambda: _count_target_tokens(task_data.train_data(None)) / batches_per_epoch,
        )
        history = distributed.fit(
            model,
            train_data,
            strategy=strategy,
            validation_data=task_data.valid_data,
            initial_epoch=first_epoch,
            epochs=last_epoch,
            steps_per_epoch=batches_per_epoch - first_step,
            verbose=fit_verbose,
            # The epoch's checkpoint last: it marks the epoch done, so a run
            # killed before it has written its history row, validation BLEU
            # and best checkpoint redoes the epoch instead of losing them.
            callbacks=[
                *_epoch_callbacks(strategy, task_data, out, config, first_epoch),
                # After the validation BLEU, so that the epoch's line shows it.
                *logging_callbacks,
                checkpoints.CheckpointCallback(
                    out / runs.CHECKPOINTS, checkpoint_every_steps, first_step
                ),
            ],
        )
        last.update({key: float(values[-1]) for key, values in history.history.items()})
    return last
