"""Training on several devices or machines, and in mixed precision.

Over 500 lines: `fit` and its own loop for multi-worker share the replica
bookkeeping. The loss, which sums over the replicas too, is in
`zoo.training.losses`.

    strategy = make_strategy("mirrored")
    with precision_policy("bfloat16"), strategy_scope(strategy):
        model = ...
        model.compile(optimizer=..., loss=losses.TokenCrossentropy())
    history = fit(model, train_data, strategy=strategy, epochs=3)

The strategies:
- "one-device" (None): Keras' default placement, on every backend.
- "mirrored": `tf.distribute.MirroredStrategy` over the local GPUs (or the
  devices named). TensorFlow only.
- "multi-worker": `tf.distribute.MultiWorkerMirroredStrategy`, its cluster
  read from `TF_CONFIG`. TensorFlow only.
- "data-parallel": `keras.distribution.DataParallel` over the local
  devices. JAX only.
- "auto": the backend's multi-device strategy when there are several GPUs,
  else one device.

The batch size a user asks for is the global batch: every strategy splits
each batch across its replicas. `losses.TokenCrossentropy` and `fit` make a run on
N replicas compute the same updates as a run on one device with the same
global batch (see their docstrings for what Keras does otherwise).

The `tf.distribute` parts import TensorFlow only when a TensorFlow strategy
is asked for or used.
"""

import atexit
import contextlib
import itertools
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import keras
from keras import ops

from zoo.errors import ZooUserError
from zoo.training import PRECISIONS
from zoo.training import cluster
from zoo.training import STRATEGIES
from zoo.training.config import TrainingError
_BACKEND_OF_STRATEGY = {
    "mirrored": "tensorflow",
    "multi-worker": "tensorflow",
    "data-parallel": "jax",
}


# keras.distribution exports no base class of its distributions.
_KERAS_DISTRIBUTIONS = (keras.distribution.DataParallel, keras.distribution.ModelParallel)


class DistributionError(ZooUserError):
    """A strategy or precision that this backend or environment can't run."""


def make_strategy(name, devices=None):
    """The distribution strategy called `name`, checked against the backend.

    Args:
        name: one of `STRATEGIES`, or None (one device). A strategy object
            (`tf.distribute.Strategy`, `keras.distribution.DataParallel`)
            is returned unchanged, for callers that build their own.
        devices: optional list of device names for "mirrored" (e.g.
            `["/gpu:0", "/gpu:1"]`) or "data-parallel" (e.g. `["cpu:0",
            "cpu:1"]`); default: every local GPU (every local device for
            "data-parallel").

    Returns:
        A `tf.distribute.Strategy`, a `keras.distribution.DataParallel`, or
        None for Keras' default one-device placement.

    Raises:
        DistributionError: an unknown name, a strategy of another backend,
            or "multi-worker" without a valid `TF_CONFIG` (`cluster.check_tf_config`).
    """
    if name is None or not isinstance(name, str):
        return name
    if name not in STRATEGIES:
        raise DistributionError(
            f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}"
        )
    backend = keras.backend.backend()
    if name == "auto":
        name = _automatic_strategy(backend)
    if name == "one-device":
        return None
    if _BACKEND_OF_STRATEGY[name] != backend:
        raise DistributionError(
            f"strategy {name!r} needs the {_BACKEND_OF_STRATEGY[name]} backend, but "
            f"KERAS_BACKEND is {backend!r}; set KERAS_BACKEND={_BACKEND_OF_STRATEGY[name]} "
            "or choose another --strategy"
        )
    if name == "data-parallel":
        return keras.distribution.DataParallel(devices=devices)
    import tensorflow as tf

    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices)
    cluster.check_tf_config(os.environ.get("TF_CONFIG"), DistributionError)
    return tf.distribute.MultiWorkerMirroredStrategy()


def _automatic_strategy(backend):
    if backend == "tensorflow":
        import tensorflow as tf

        several = len(tf.config.list_physical_devices("GPU")) > 1
        return "mirrored" if several else "one-device"
    if backend == "jax":
        several = len(keras.distribution.list_devices("gpu")) > 1
        return "data-parallel" if several else "one-device"
    return "one-device"


def _is_tf_strategy(strategy, class_name):
    """Whether `strategy` is a `tf.distribute.<class_name>` (no TensorFlow
    import for the other backends' strategies)."""
    if strategy is None or isinstance(strategy, _KERAS_DISTRIBUTIONS):
        return False
    import tensorflow as tf

    return isinstance(strategy, getattr(tf.distribute, class_name))


def strategy_scope(strategy):
    """The scope to build and compile a model in for `strategy` (None: none)."""
    return contextlib.nullcontext() if strategy is None else strategy.scope()


def replica_count(strategy):
    """How many replicas share each global batch under `strategy`."""
    if strategy is None:
        return 1
    if isinstance(strategy, _KERAS_DISTRIBUTIONS):
        return int(strategy.device_mesh.shape[0])
    return int(strategy.num_replicas_in_sync)


def check_gradient_accumulation(strategy, steps):
    """Refuses accumulating gradients under a `tf.distribute` strategy of
    several replicas, with a one-line `TrainingError`.

    Keras' optimizer sums the replicas' gradients inside the `cond` that
    tells an update from an accumulation, and TensorFlow refuses that
    ("`merge_call` called while defining a new graph"). One device and
    JAX's DataParallel, which steps the whole global batch, accumulate.
    """
    tf_replicas = replica_count(strategy) > 1 and not isinstance(strategy, _KERAS_DISTRIBUTIONS)
    if steps > 1 and tf_replicas:
        raise TrainingError(
            f"gradient_accumulation_steps {steps} does not work under a TensorFlow strategy "
            f"of {replica_count(strategy)} devices; pass --gradient-accumulation-steps 1 "
            "with a larger --batch-size, or train on one device"
        )


def equal_batches_required(strategy):
    """Whether every batch must split evenly over the replicas.

    `keras.distribution.DataParallel` shards each batch over the devices
    with JAX, which refuses a batch whose size the device count does not
    divide (a bucket's last, smaller batch); TensorFlow's strategies split
    uneven batches themselves.
    """
    return isinstance(strategy, _KERAS_DISTRIBUTIONS) and replica_count(strategy) > 1


def describe(strategy, precision):
    """What a run records about how it was distributed: a dict for config.json."""
    if strategy is None:
        name = "one-device"
    elif isinstance(strategy, keras.distribution.DataParallel):
        name = "data-parallel"
    elif _is_tf_strategy(strategy, "MultiWorkerMirroredStrategy"):
        name = "multi-worker"
    elif _is_tf_strategy(strategy, "MirroredStrategy"):
        name = "mirrored"
    else:
        name = type(strategy).__name__
    return {
        "strategy": name,
        "replicas": replica_count(strategy),
        "precision": f"mixed_{precision}" if precision else keras.config.floatx(),
    }


def automatic_precision(cpuinfo=None):
    """"bfloat16" where the CPU has bf16 matrix units, else None (float32).

    Intel's AMX (Sapphire Rapids and later Xeons) reports the `amx_bf16`
    flag in /proc/cpuinfo; elsewhere (this project's AMD EPYC machines
    among them) bfloat16 has no matrix units and is emulated, so float32 is
    kept. `zoo train`'s default: on an AMX machine bfloat16 trained to the
    same BLEU as float32 (docs/performance.md).

    Args:
        cpuinfo: the text of /proc/cpuinfo (default: read it; a system
            without the file gets float32).
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as file:
                cpuinfo = file.read()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags" and "amx_bf16" in value.split():
            return "bfloat16"
    return None


def check_precision(precision):
    """`precision` if it is None or one of `PRECISIONS`, else a DistributionError."""
    if precision is not None and precision not in PRECISIONS:
        raise DistributionError(
            f"unknown mixed precision {precision!r}; choose one of {', '.join(PRECISIONS)}"
        )
    return precision


@contextlib.contextmanager
def precision_policy(precision):
    """Builds the layers made inside in mixed precision, then restores the policy.

    A layer takes the global dtype policy when it is constructed, so only
    the model's construction needs to be inside. With "float16", Keras'
    `compile` wraps the optimizer in a `keras.optimizers.LossScaleOptimizer`
    (dynamic loss scaling), so small float16 gradients don't underflow.

    Args:
        precision: None (float32), "bfloat16" or "float16".
    """
    if check_precision(precision) is None:
        yield
        return
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(f"mixed_{precision}")
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def sum_over_replicas(value):
    """`value` summed over the replicas of a tf.distribute step (else itself)."""
    if keras.backend.backend() != "tensorflow":
        return value
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def _clip_after_all_reduce(optimizer):
    """Makes a TensorFlow optimizer clip the replicas' summed gradient.

    Keras' TensorFlow optimizer clips (`clipnorm`, `clipvalue`,
    `global_clipnorm`) each replica's partial gradient and only then sums
    the replicas' gradients (`_backend_apply_gradients` calls
    `_clip_gradients` before `_backend_update_step` all-reduces), which is
    not the one-device update once clipping is active: the presets clip to
    norm 1, and on 2 replicas a tiny model's weights differed by 1.7e-2 after
    4 steps. This moves the clipping after the all-reduce. Private methods:
    the pin `keras==3.15.*` and test_distributed.py hold them in place.
    """
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # LossScaleOptimizer
    if getattr(optimizer, "_zoo_clips_after_all_reduce", False):
        return
    clip = optimizer._clip_gradients
    all_reduce = optimizer._all_reduce_sum_gradients

    def all_reduce_then_clip(grads_and_vars):
        gradients, variables = zip(*all_reduce(grads_and_vars))
        return list(zip(clip(list(gradients)), variables))

    optimizer._clip_gradients = lambda gradients: gradients
    optimizer._all_reduce_sum_gradients = all_reduce_then_clip
    optimizer._zoo_clips_after_all_reduce = True


def is_chief(strategy):
    """Whether this process writes the run directory (True off multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def worker_run_directory(out, strategy):
    """Where this process writes its run directory: `out`, or a throwaway one.

    Under "multi-worker" every worker saves its checkpoints (as TensorFlow's
    multi-worker guide asks: a save may need every worker), but only the
    chief's go to `out`; the others write to a temporary directory that is
    deleted when the process exits.

    Returns:
        A `Path`.
    """
    if is_chief(strategy):
        return Path(out)
    temporary = tempfile.mkdtemp(prefix="zoo-worker-")
    atexit.register(shutil.rmtree, temporary, ignore_errors=True)
    return Path(temporary) / Path(out).name


def fit(
    model,
    train_data,
    *,
    strategy,
    epochs,
    initial_epoch=0,
    steps_per_epoch=None,
    validation_data=None,
    callbacks=None,
    verbose="auto",
):
    """`model.fit` under `strategy`, the same for the user on every strategy.

    Each argument means what it means for `keras.Model.fit`. `model.fit`
    runs it where that works; under "multi-worker" it fails, and a loop of
    our own (`custom_loop_fit`) drives the same train step and callbacks.

    Args:
        model: a compiled `keras.Model`, built and compiled under
            `strategy_scope(strategy)`.
        train_data: a `tf.data.Dataset` of (inputs, targets) global batches.
        strategy: what `make_strategy` returned (None: one device).
        epochs: the index of the epoch to stop before, as in `fit`.
        initial_epoch: the epoch to start at (resuming a run).
        steps_per_epoch: None (each epoch iterates `train_data` once) or the
            number of batches an epoch takes from one iterator that
            persists across epochs.
        validation_data: optional dataset, evaluated after each epoch.
        callbacks: Keras callbacks.
        verbose: 0, 1, 2 or "auto", as in `fit`.

    Returns:
        The `keras.callbacks.History` of the run.
    """
    arguments = dict(
        epochs=epochs,
        initial_epoch=initial_epoch,
        steps_per_epoch=steps_per_epoch,
        validation_data=validation_data,
        callbacks=callbacks,
        verbose=verbose,
    )
    if isinstance(strategy, _KERAS_DISTRIBUTIONS):
        with strategy.scope():
            return model.fit(train_data, shuffle=False, **arguments)
    if _is_tf_strategy(strategy, "MultiWorkerMirroredStrategy"):
        return custom_loop_fit(model, train_data, strategy=strategy, **arguments)
    if strategy is not None and replica_count(strategy) > 1:
        _clip_after_all_reduce(model.optimizer)
    # shuffle=False: the tf.data pipeline shuffles, with the run's seed.
    return model.fit(train_data, shuffle=False, **arguments)


def custom_loop_fit(
    model,
    train_data,
    *,
    strategy,
    epochs,
    initial_epoch=0,
    steps_per_epoch=None,
    validation_data=None,
    callbacks=None,
    verbose="auto",
):
    """`fit`'s loop written with `strategy.run`, for a `tf.distribute` strategy.

    Keras 3's `model.fit` fails under `MultiWorkerMirroredStrategy` ("Attempt
    to convert a value (PerReplica...) to a Tensor", keras-team/keras#20585:
    its epoch iterator hands the distributed batches to a function that does
    not expect them). The model's own `train_step` and `test_step` run fine
    under `strategy.run`, so this loop only replaces fit's iteration: a
    distributed dataset, `strategy.run` on each batch, `strategy.reduce` of
    the logs, and the same callbacks, called as fit calls them. The
    arguments and the result are `fit`'s.
    """
    if replica_count(strategy) > 1:
        _clip_after_all_reduce(model.optimizer)
    # As fit does first: build the model, its metrics and the optimizer's
    # variables outside the step function (a tf.function may not create them).
    with strategy.scope():
        model._symbolic_build(data_batch=next(iter(train_data)))
    train_step = _distributed_step(model, model.train_step, strategy)
    test_step = _distributed_step(model, model.test_step, strategy)
    batches = strategy.experimental_distribute_dataset(train_data)
    known = int(train_data.cardinality())
    batches_in_data = known if known >= 0 else None
    callbacks = keras.callbacks.CallbackList(
        callbacks,
        add_history=True,
        add_progbar=verbose != 0,
        model=model,
        verbose=verbose,
        epochs=epochs,
        steps=steps_per_epoch or batches_in_data,
    )
    model.stop_training = False
    callbacks.on_train_begin()
    iterator, seen, epoch_logs = None, 0, None
    for epoch in range(initial_epoch, epochs):
        model.reset_metrics()
        callbacks.on_epoch_begin(epoch)
        # As keras' EpochIterator: with steps_per_epoch one iterator runs on
        # across epochs (restarted once the data is used up), else a fresh one.
        if iterator is None or steps_per_epoch is None:
            iterator, seen = iter(batches), 0
        logs = {}
        steps = range(steps_per_epoch) if steps_per_epoch else itertools.count()
        for step in steps:
            if batches_in_data is not None and seen >= batches_in_data:
                _ran_out_of_data(steps_per_epoch)
                break
            try:
                batch = next(iterator)
            except StopIteration:
                batches_in_data = seen
                _ran_out_of_data(steps_per_epoch)
                iterator = None
                break
            seen += 1
            callbacks.on_train_batch_begin(step)
            logs = train_step(batch)
            callbacks.on_train_batch_end(step, logs)
            if model.stop_training:
                break
        if batches_in_data is not None and seen >= batches_in_data:
            iterator = None
        epoch_logs = {name: float(value) for name, value in logs.items()}
        if validation_data is not None:
            epoch_logs.update(_evaluate(model, test_step, strategy, validation_data, callbacks))
        callbacks.on_epoch_end(epoch, epoch_logs)
        if model.stop_training:
            break
    if epochs > initial_epoch:
        model.optimizer.finalize_variable_values(model.trainable_weights)
    callbacks.on_train_end(logs=epoch_logs)
    return model.history


def _ran_out_of_data(steps_per_epoch):
    if steps_per_epoch:
        warnings.warn(
            "Your input ran out of data; interrupting the epoch. Make sure that your "
            "dataset can generate at least `steps_per_epoch * epochs` batches.",
            stacklevel=3,
        )


def _distributed_step(model, step_function, strategy):
    """A tf.function that runs `step_function` on each replica's batch and
    returns its logs averaged over the replicas, as fit's
    `reduce_per_replica(..., "auto")` does."""
    import tensorflow as tf

    def step(batch):
        logs = strategy.run(step_function, args=(batch,))
        return {
            name: strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)
            for name, value in logs.items()
        }

    # reduce_retracing: the batches' lengths vary from batch to batch.
    return tf.function(step, reduce_retracing=True, jit_compile=bool(model.jit_compile))


def _evaluate(model, test_step, strategy, dataset, callbacks):
    """fit's validation: `{"val_loss": ...}` over the whole `dataset`."""
    model.reset_metrics()
    callbacks.on_test_begin()
    logs = {}
    for step, batch in enumerate(strategy.experimental_distribute_dataset(dataset)):
        callbacks.on_test_batch_begin(step)
        logs = test_step(batch)
        callbacks.on_test_batch_end(step, logs)
    logs = {name: float(value) for name, value in logs.items()}
    callbacks.on_test_end(logs)
    return {f"val_{name}": value for name, value in logs.items()}
