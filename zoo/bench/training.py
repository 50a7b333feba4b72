"""The `train` suite: `train_on_batch` of each recipe, on TensorFlow with XLA
against without, and what one more batch shape costs each."""

import math
import time

import numpy as np

from zoo.bench.sizes import tokens
from zoo.bench.sizes import translation_model
from zoo.bench.timing import compiled_with
from zoo.bench.timing import finish

TRANSLATION_PRESETS = (
    "rnnencdec_small",
    "rnnsearch_small",
    "luong_global_general_small",
    "transformer_small",
)
CAPTIONING_PRESET = "show_attend_tell_small"


def bench_train(runner):
    """`train_on_batch` of each recipe; on TensorFlow with XLA against without."""
    from zoo import registry

    size = runner.size
    batch, length, vocabulary = size.train_batch, size.train_length, size.vocabulary_size
    target = tokens((batch, length + 1), vocabulary, seed=1)
    inputs = {"source": tokens((batch, length), vocabulary), "target_in": target[:, :-1]}
    for preset in TRANSLATION_PRESETS:
        _bench_train_step(
            runner,
            preset,
            lambda preset=preset: translation_model(preset, size),
            inputs,
            target[:, 1:],
            f"B={batch} S=T={length} V={vocabulary}",
            items=batch * length,
            unit="target tokens/s",
        )
    if CAPTIONING_PRESET not in registry.PRESETS:
        runner.skip("train", f"captioning: no preset {CAPTIONING_PRESET!r} in the registry yet")
        return
    images = np.random.default_rng(0).random((batch, 64, 64, 3), dtype="float32")
    _bench_train_step(
        runner,
        CAPTIONING_PRESET,
        lambda: registry.build(CAPTIONING_PRESET, target_vocabulary_size=vocabulary),
        {"image": images, "target_in": target[:, :-1]},
        target[:, 1:],
        f"B={batch} 64x64 images T={length} V={vocabulary}",
        items=batch,
        unit="images/s",
    )


def _bench_train_step(runner, name, make_model, inputs, labels, size, items, unit):
    """Times `train_on_batch` as the recipes train (Adam, clipped gradients,
    the padding-masked loss): on TensorFlow with XLA against without,
    elsewhere with the backend's own compiled step."""
    import keras

    if runner.mixed_precision:
        _bench_precision(runner, name, make_model, inputs, labels, size, items, unit)
        return
    backend = keras.backend.backend()
    # JAX without jax.jit re-traces every step (see
    # `zoo.training.jit_compile`); torch.compile is not Keras'
    # default there. Only TensorFlow has two sensible choices.
    settings = {"tensorflow": (True, False), "jax": (True,)}.get(backend, (False,))
    details = {"preset": name}
    models, steps, firsts = _first_steps(runner, make_model, inputs, labels, settings, details)
    if len(steps) == 2:
        title = f"{name} train_on_batch: XLA vs no XLA"
        compiled = "jit_compile=True (XLA) vs False (tf.function)"
    elif "xla_error" in details:
        title = f"{name} train_on_batch (no XLA: it fails to compile)"
        compiled = "jit_compile=False (tf.function)"
    else:
        title = f"{name} train_on_batch"
        compiled = f"jit_compile={settings[0]} ({compiled_with()})"
    case = runner.pair("train", title, size, compiled, *steps.values(), details=details)
    timings = [t for t in (case.ours, case.reference) if t is not None]
    for timing, first in zip(timings, firsts.values()):
        timing.first = first
    case.note = " vs ".join(f"{items / t.median:,.0f}" for t in timings) + f" {unit}"
    if len(steps) == 2:
        _bench_new_shape(runner, name, models, inputs, labels, details)
    if backend == "tensorflow":
        weigh_xla(case, runner.log)


def _bench_precision(runner, name, make_model, inputs, labels, size, items, unit):
    """Times `train_on_batch` in `runner.mixed_precision` against float32,
    both at the recipe's default `jit_compile` and with the training loss."""
    import keras

    from zoo.training import distributed

    from zoo.training import losses

    jit_compile = preset_jit_compile(name)
    steps, dtypes = [], []
    for precision in (runner.mixed_precision, None):
        with distributed.precision_policy(precision):
            model = make_model()
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3, clipnorm=1.0),
            loss=losses.TokenCrossentropy(),
            jit_compile=jit_compile,
        )
        steps.append(lambda model=model: model.train_on_batch(inputs, labels))
        dtypes.append(model.dtype_policy.compute_dtype)
        finish(steps[-1]())  # the compilation is not timed
    case = runner.pair(
        "train",
        f"{name} train_on_batch: mixed_{runner.mixed_precision} vs float32",
        size,
        f"jit_compile={jit_compile}",
        *steps,
        details={"preset": name, "compute_dtypes": dtypes},
    )
    case.note = " vs ".join(
        f"{items / t.median:,.0f}" for t in (case.ours, case.reference)
    ) + f" {unit}"


def _first_steps(runner, make_model, inputs, labels, settings, details):
    """A compiled model and its train step per `jit_compile` setting, each
    step run once apart: it compiles (its time is recorded), and XLA may
    refuse a model, which is a result, not a crash.

    Returns `(models, steps, firsts)`, dicts keyed by `jit_compile`, without
    the settings that failed (their error goes to `details["xla_error"]`).
    """
    import keras

    models, steps, firsts = {}, {}, {}
    for jit_compile in settings:
        model = make_model()
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3, clipnorm=1.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
            jit_compile=jit_compile,
        )

        def step(model=model):
            return model.train_on_batch(inputs, labels)

        start = time.perf_counter()
        try:
            finish(step())
        except (_xla_errors() if jit_compile else ()) as error:
            details["xla_error"] = str(error).strip().splitlines()[0]
            runner.log(
                f"  train: {details['preset']}: jit_compile={jit_compile} fails: "
                f"{details['xla_error']}"
            )
            continue
        firsts[jit_compile] = time.perf_counter() - start
        models[jit_compile], steps[jit_compile] = model, step
    return models, steps, firsts


def _bench_new_shape(runner, preset, models, inputs, labels, details):
    """What one more batch shape costs each side, and how many steps the
    preset's training runs per batch shape: XLA compiles once per shape, so
    a faster XLA step pays only over enough steps of each shape.

    Two new shapes, 1 and 2 steps longer: at the first, Keras' tf.function
    retraces once for any shape (both sides); the second costs what every
    further shape of a real training costs.
    """
    from zoo import registry
    from zoo.training import batch_shapes

    costs = {}
    for extra in (1, 2):
        longer_inputs = {key: _longer(value, extra) for key, value in inputs.items()}
        longer_labels = _longer(labels, extra)
        for jit_compile, model in models.items():
            start = time.perf_counter()
            finish(model.train_on_batch(longer_inputs, longer_labels))
            costs[jit_compile] = time.perf_counter() - start
    shapes, batches = batch_shapes.compiled_batch_shapes(preset)
    epochs = registry.get_preset(preset)["training"].epochs
    details["new_shape_first_step"] = {"xla": costs[True], "no_xla": costs[False]}
    details["steps_per_shape"] = batches * epochs / shapes
    runner.log(
        f"  train: {preset}: first step of a new batch shape {costs[True]:.1f} s with XLA, "
        f"{costs[False]:.1f} s without; its training: {batches} batches x {epochs} epochs "
        f"over {shapes} batch shapes"
    )


def xla_repaid_after(case):
    """The steps of one batch shape after which XLA's faster steps have paid
    for its compilation of that shape; math.inf when its steps are slower.

    `case`: an XLA (ours) against no XLA (reference) row of `bench_train`.
    """
    saving = case.reference.median - case.ours.median
    new_shape = case.details["new_shape_first_step"]
    compile_cost = new_shape["xla"] - new_shape["no_xla"]
    return compile_cost / saving if saving > 0 else math.inf


def preset_jit_compile(preset):
    """The `jit_compile` that `preset` trains with by default on this backend."""
    from zoo import registry
    from zoo.training.jit_compile import train_step_jit_compile

    settings = registry.get_preset(preset)
    return train_step_jit_compile(settings["recipe"], settings["training"])


def weigh_xla(case, log):
    """Records whether XLA is the faster choice over the preset's own
    training, and whether its default `jit_compile` makes that choice."""
    details = case.details
    default = preset_jit_compile(details["preset"])
    if "xla_error" in details:
        faster, reason = False, "XLA fails to compile"
    else:
        repaid_after = xla_repaid_after(case)
        repaid = math.isfinite(repaid_after)
        faster = details["steps_per_shape"] > repaid_after
        details["xla_repaid_after_steps"] = repaid_after if repaid else None
        reason = (
            f"XLA repaid after {repaid_after:,.0f} steps of a batch shape"
            if repaid
            else "XLA never repaid (slower steps)"
        ) + f", the preset trains {details['steps_per_shape']:,.0f} per shape"
    details["xla_faster_in_training"] = faster
    details["default_jit_compile"] = default
    verdict = "agrees" if default == faster else "DISAGREES"
    judgement = f"{reason}: default jit_compile={default} {verdict}"
    case.note += f"; {judgement}"
    log(f"  train: {details['preset']}: {judgement}")


def _longer(array, extra):
    """A token batch `[B, T]` with `extra` more random word ids on its time
    axis; any other array (an image batch) as it is."""
    array = np.asarray(array)
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
        return array
    more = tokens((array.shape[0], extra), int(array.max()) + 1, seed=extra)
    return np.concatenate([array, more], axis=1)


def _xla_errors():
    """The errors by which XLA refuses to compile a train step."""
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return (tf.errors.OpError,)
    return ()
