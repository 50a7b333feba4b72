"""`zoo bench`: speed measured side by side, reported as ratios.

    zoo bench [layers|decode|train|export|all] [--backend B] [--size S]
              [--repeats N] [--warmup N] [--min-time SECONDS] [--out results.json]

Every case is a pair, ours and a reference (Keras' own layer, or the other of
two choices of ours), timed in the same run: after `--warmup` untimed calls,
the two are called in turn, at least `--repeats` times each (a quick case
until its calls fill `--min-time` seconds), so that the drift of a shared,
noisy machine falls on both alike. A case reports the median time and the
interquartile range of each side and the ratio of the medians (ours /
reference: below 1 means ours is faster). Absolute times are only context;
the ratios are the claims.

Every call's outputs are converted to numpy before the clock stops, so the
asynchronous backends (JAX dispatch, TensorFlow's eager executor) are timed
to completion. Functions are compiled where the backend can (`tf.function`,
`jax.jit`; torch runs eagerly), as `zoo.inference.search_cache.compile_inference` does
for decoding, and the table says which.

The suites:
- `layers`: forward and forward+backward at a few sizes: our
  MultiHeadAttention against `keras.layers.MultiHeadAttention`,
  LuongAttention(dot) against `keras.layers.Attention`, LocalAttention
  against global LuongAttention with the same score (the price of the
  window), AdditiveAttention alone (no Keras layer computes it).
- `decode`: 50 AdditiveAttention decoding steps over a 50-token source with
  the keys projected once against projected at every step, in one compiled
  loop and one compiled step per call; beam search (width 5) against greedy
  search per sentence on rnnsearch_small, with greedy search over 5 copies of
  each sentence as the floor of a batched beam; one MultiHeadAttention
  decoding step with the key/value cache against recomputing the whole
  prefix, at decoded lengths 16, 64 and 256.
- `train`: `train_on_batch` of each translation recipe (and of captioning
  when its preset exists) in target tokens (images) per second; on TensorFlow
  with XLA (`jit_compile=True`) against without, and what one more batch
  shape costs each (XLA compiles once per shape) against how many steps the
  preset trains per shape.
- `export`: per-sentence latency of Keras, SavedModel and onnxruntime; skipped
  until the export module exists.

After the table, `check_goals` judges the speed goals of the issue from the
measured rows.

The results (JSON with `--out`) record the backend, the library versions and
the machine with the numbers, and the command that produced them.
"""

import argparse
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from dataclasses import field

import numpy as np

SUITES = ("layers", "decode", "train", "export")
BACKENDS = ("tensorflow", "jax", "torch")
TRANSLATION_PRESETS = (
    "rnnencdec_small",
    "rnnsearch_small",
    "luong_global_general_small",
    "transformer_small",
)
CAPTIONING_PRESET = "show_attend_tell_small"
# `measure` repeats a quick case up to this many times `--repeats`.
MAX_ROUNDS_FACTOR = 10
DEFAULT_MIN_TIME = 1.0
# Token ids below this are special (PAD, UNK, BOS, EOS): synthetic batches
# draw their tokens from the rest of the vocabulary.
FIRST_WORD_ID = 4


@dataclass(frozen=True)
class Size:
    """The shapes of one benchmark size (`--size`)."""

    # (batch, length, depth) of each layer case.
    layer_shapes: tuple
    num_heads: int
    local_window: int
    # AdditiveAttention's `units`: its teacher-forced score is a
    # [batch, length, length, units] tensor, 1 GB at 32 x 128 x 128 x 512.
    additive_units: int
    # The AdditiveAttention decoding loop: batch, source length, steps, the
    # depths of the decoder state (the query) and of the annotations (the
    # memory), and the attention units.
    loop_batch: int
    loop_source_length: int
    loop_steps: int
    loop_state_depth: int
    loop_memory_depth: int
    loop_units: int
    # The MultiHeadAttention decoding step: batch, model depth (its heads are
    # num_heads) and decoded lengths.
    cache_batch: int
    cache_depth: int
    cache_lengths: tuple
    # Greedy against beam search: sentences per call, source length, steps.
    search_batches: tuple
    search_source_length: int
    search_max_length: int
    # train_on_batch: sentences and tokens per sentence, vocabulary, and
    # constructor overrides per recipe (empty: the preset's own sizes).
    train_batch: int
    train_length: int
    vocabulary_size: int
    model_overrides: dict = field(default_factory=dict)


SIZES = {
    # For the test suite: every case runs, in seconds.
    "tiny": Size(
        layer_shapes=((2, 4, 8),),
        num_heads=2,
        local_window=1,
        additive_units=8,
        loop_batch=2,
        loop_source_length=4,
        loop_steps=3,
        loop_state_depth=8,
        loop_memory_depth=6,
        loop_units=5,
        cache_batch=2,
        cache_depth=8,
        cache_lengths=(2, 4),
        search_batches=(2,),
        search_source_length=4,
        search_max_length=3,
        train_batch=2,
        train_length=3,
        vocabulary_size=13,
        model_overrides={
            "rnnencdec": {"embedding_dim": 6, "hidden_dim": 8, "readout_dim": 6},
            "rnnsearch": {
                "embedding_dim": 6,
                "hidden_dim": 8,
                "attention_units": 5,
                "maxout_units": 4,
            },
            "luong": {"embedding_dim": 6, "hidden_dim": 8, "num_layers": 1},
            "transformer": {
                "d_model": 8,
                "num_heads": 2,
                "num_encoder_layers": 1,
                "num_decoder_layers": 1,
                "feed_forward_dim": 12,
                "max_target_length": 16,
                "max_source_length": 16,
            },
        },
    ),
    # The sizes of the issue: batch 32-64, lengths 16-128, depths 128-512; the
    # presets' own model sizes for decoding and training.
    "full": Size(
        layer_shapes=((32, 16, 128), (64, 64, 256), (32, 128, 512)),
        num_heads=8,
        local_window=8,
        # rnnsearch_small's attention size.
        additive_units=128,
        loop_batch=32,
        loop_source_length=50,
        loop_steps=50,
        # rnnsearch_multi30k: GRU 256, bidirectional annotations 2 x 256.
        loop_state_depth=256,
        loop_memory_depth=512,
        loop_units=256,
        cache_batch=32,
        cache_depth=256,
        cache_lengths=(16, 64, 256),
        search_batches=(1, 32),
        search_source_length=20,
        search_max_length=30,
        train_batch=64,
        train_length=20,
        vocabulary_size=1000,
    ),
}
DEFAULT_SIZE = "full"


# Measuring -------------------------------------------------------------------


@dataclass
class Timing:
    """The timed calls of one function, in seconds.

    `first` is the first warm-up call (tracing and compilation included),
    None without warm-up.
    """

    seconds: list
    first: float = None

    @property
    def median(self):
        return float(np.median(self.seconds))

    @property
    def quartiles(self):
        return tuple(float(q) for q in np.percentile(self.seconds, [25, 75]))

    def scaled(self, factor):
        """The same timing per item, e.g. per sentence of a batch."""
        return Timing(
            [s * factor for s in self.seconds],
            None if self.first is None else self.first * factor,
        )

    def to_json(self):
        low, high = self.quartiles
        return {
            "median": self.median,
            "q25": low,
            "q75": high,
            "min": min(self.seconds),
            "max": max(self.seconds),
            "first_call": self.first,
            "seconds": self.seconds,
        }


def finish(outputs):
    """Brings every output to the host, so an asynchronous backend's work is
    done before the clock stops."""
    import keras

    for leaf in keras.tree.flatten(outputs):
        if leaf is not None:
            keras.ops.convert_to_numpy(leaf)


def measure(functions, warmup, repeats, min_time=0.0):
    """Times argument-free `functions` side by side.

    Each is called `warmup` times untimed, then all are called in turn, round
    after round: interleaved, so that a load change on a shared machine slows
    every function alike instead of the one that happened to run then, and in
    the reverse order every other round, so that none always runs right after
    the other (with its caches warm or cold).

    There are `repeats` rounds, or more for quick functions: as many as fill
    `min_time` seconds at the speed of the last warm-up round, up to
    `MAX_ROUNDS_FACTOR * repeats` (a median of a few milliseconds' worth of
    calls says little on a busy machine).

    Returns one `Timing` per function.
    """
    firsts, lasts = [], []
    for function in functions:
        calls = []
        for _ in range(warmup):
            start = time.perf_counter()
            finish(function())
            calls.append(time.perf_counter() - start)
        firsts.append(calls[0] if calls else None)
        lasts.append(calls[-1] if calls else None)
    rounds = repeats
    if min_time > 0 and warmup > 0:
        round_time = max(sum(lasts), 1e-9)
        rounds = max(repeats, min(MAX_ROUNDS_FACTOR * repeats, math.ceil(min_time / round_time)))
    seconds = [[] for _ in functions]
    for round_ in range(rounds):
        order = list(zip(functions, seconds))
        for function, times in order if round_ % 2 == 0 else reversed(order):
            start = time.perf_counter()
            finish(function())
            times.append(time.perf_counter() - start)
    return [Timing(times, first) for times, first in zip(seconds, firsts)]


@dataclass
class Case:
    """One row of the table: ours against a reference, or ours alone.

    `goal` names the issue goal the row is evidence for (see `check_goals`),
    `note` adds what the times mean (throughput, per sentence, steps).
    """

    suite: str
    name: str
    size: str
    compiled: str
    ours: Timing
    reference: Timing = None
    goal: str = None
    note: str = ""
    details: dict = field(default_factory=dict)

    @property
    def ratio(self):
        """ours / reference at the median; below 1: ours is faster."""
        if self.reference is None:
            return None
        return self.ours.median / self.reference.median

    def to_json(self):
        return {
            "suite": self.suite,
            "case": self.name,
            "size": self.size,
            "compiled": self.compiled,
            "ours": self.ours.to_json(),
            "reference": None if self.reference is None else self.reference.to_json(),
            "ratio": self.ratio,
            "goal": self.goal,
            "note": self.note,
            **self.details,
        }


class Runner:
    """Runs cases with one size and one measuring setting, and collects them."""

    def __init__(self, size, warmup, repeats, min_time=0.0, log=None):
        self.size = size
        self.warmup = warmup
        self.repeats = repeats
        self.min_time = min_time
        self.cases = []
        self.skipped = []
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))

    def pair(
        self,
        suite,
        name,
        size,
        compiled,
        ours,
        reference=None,
        goal=None,
        note="",
        scale=1.0,
        details=None,
    ):
        """Measures `ours` (and `reference`) side by side and records the row.

        `scale` converts a call's time to the reported unit (e.g. 1/batch for
        a time per sentence). Returns the `Case`.
        """
        self.log(f"  {suite}: {name} [{size}]")
        functions = [ours] if reference is None else [ours, reference]
        timings = measure(functions, self.warmup, self.repeats, self.min_time)
        timings = [timing.scaled(scale) for timing in timings]
        case = Case(
            suite,
            name,
            size,
            compiled,
            timings[0],
            timings[1] if reference is not None else None,
            goal,
            note,
            details or {},
        )
        self.cases.append(case)
        return case

    def skip(self, suite, reason):
        self.log(f"  {suite}: skipped: {reason}")
        self.skipped.append({"suite": suite, "reason": reason})


def compiled_with():
    """How `zoo.inference.search_cache.compile_inference` runs a function on this backend."""
    import keras

    return {"tensorflow": "tf.function", "jax": "jax.jit"}.get(keras.backend.backend(), "eager")


def gradient_function(forward, variables):
    """`inputs -> gradients of sum(forward(*inputs))` w.r.t. `variables` and
    the inputs, compiled like the forward pass.

    Keras has no backend-neutral gradient, so this switches on the backend:
    a tape on TensorFlow, `jax.grad` over a stateless scope on JAX, autograd
    on torch.
    """
    import keras
    from keras import ops

    from zoo.inference.search_cache import compile_inference

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def gradients(*inputs):
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                loss = ops.sum(forward(*inputs))
            return tape.gradient(loss, list(variables) + list(inputs))

    elif backend == "jax":
        import jax

        def loss(values, *inputs):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return ops.sum(forward(*inputs))

        values = [variable.value for variable in variables]

        def gradients(*inputs):
            return jax.grad(loss, argnums=tuple(range(1 + len(inputs))))(values, *inputs)

    else:
        import torch

        def gradients(*inputs):
            inputs = [x.detach().requires_grad_(True) for x in inputs]
            loss = ops.sum(forward(*inputs))
            return torch.autograd.grad(loss, [v.value for v in variables] + inputs)

    return compile_inference(gradients)


def _random(shape, seed=0):
    """A float32 tensor of standard normal values, the same for every run."""
    from keras import ops

    values = np.random.default_rng(seed).standard_normal(shape).astype("float32")
    return ops.convert_to_tensor(values)


# The suites ------------------------------------------------------------------


def bench_layers(runner):
    """Our layers against Keras' (or alone), forward and forward+backward."""
    import keras

    from zoo import layers
    from zoo.inference.search_cache import compile_inference

    def self_attention(layer, **options):
        if isinstance(layer, keras.layers.Attention):
            return lambda x: layer([x, x])
        return lambda x: layer(x, x, **options)

    size = runner.size
    heads = size.num_heads
    for batch, length, depth in size.layer_shapes:
        x = _random((batch, length, depth))
        head_depth = depth // heads
        # (name, goal, ours, reference or None, call options)
        comparisons = [
            (
                "MultiHeadAttention vs keras.layers.MultiHeadAttention",
                "mha_vs_keras",
                layers.MultiHeadAttention(heads, head_depth),
                keras.layers.MultiHeadAttention(heads, head_depth),
                {},
            ),
            (
                "MultiHeadAttention vs keras.layers.MultiHeadAttention, causal",
                "mha_vs_keras",
                layers.MultiHeadAttention(heads, head_depth),
                keras.layers.MultiHeadAttention(heads, head_depth),
                {"use_causal_mask": True},
            ),
            (
                "LuongAttention(dot) vs keras.layers.Attention",
                None,
                layers.LuongAttention("dot"),
                keras.layers.Attention(),
                {},
            ),
            (
                f"LocalAttention(local-p, general, D={size.local_window}) "
                "vs LuongAttention(general)",
                None,
                layers.LocalAttention("local-p", size.local_window, "general"),
                layers.LuongAttention("general"),
                {},
            ),
            (
                f"AdditiveAttention(units={size.additive_units})",
                None,
                layers.AdditiveAttention(size.additive_units),
                None,
                {},
            ),
        ]
        for name, goal, ours, reference, options in comparisons:
            # (the layer that owns the weights, its forward function of x)
            sides = [
                (layer, self_attention(layer, **options))
                for layer in (ours, reference)
                if layer is not None
            ]
            for layer, forward in sides:
                forward(x)  # builds the weights outside any compiled function
            forwards = [compile_inference(forward) for _, forward in sides]
            backwards = [
                gradient_function(forward, layer.trainable_variables) for layer, forward in sides
            ]
            for direction, functions in (("forward", forwards), ("forward+backward", backwards)):
                calls = [lambda f=f: f(x) for f in functions]
                runner.pair(
                    "layers",
                    f"{name}, {direction}",
                    f"B={batch} T={length} d={depth}",
                    compiled_with(),
                    *calls,
                    goal=goal,
                )


def bench_decode(runner):
    """The decoding choices: keys projected once, beam against greedy, the
    key/value cache."""
    _bench_key_projection(runner)
    _bench_searches(runner)
    _bench_cache(runner)


def _bench_key_projection(runner):
    """AdditiveAttention in a decoding loop: `U_a h_j` once, or every step.

    Two loops: one compiled `fori_loop` (as greedy and beam search run), and
    a Python loop over one compiled step (as an exported `decode_step` is
    driven, one call per token).
    """
    import keras
    from keras import ops

    from zoo import layers
    from zoo.inference.search_cache import compile_inference

    size = runner.size
    batch, steps = size.loop_batch, size.loop_steps
    attention = layers.AdditiveAttention(size.loop_units)
    attention.build((None, size.loop_state_depth), (None, None, size.loop_memory_depth))
    memory = _random((batch, size.loop_source_length, size.loop_memory_depth))
    # A decoder's state update, reduced to one layer over the context, so that
    # each step's context gives the next query.
    context_to_state = keras.layers.Dense(size.loop_state_depth, activation="tanh")
    context_to_state.build((None, size.loop_memory_depth))
    start = _random((batch, size.loop_state_depth), seed=1)

    def next_query(query, memory, keys=None):
        # The next query depends on this step's context, as a decoder state
        # does, so the steps can't run in parallel.
        return query + context_to_state(attention(query, memory, projected_key=keys))

    def compiled_loop(project_once):
        def run(memory, query):
            keys = attention.project_keys(memory) if project_once else None
            return ops.fori_loop(0, steps, lambda _, query: next_query(query, memory, keys), query)

        compiled = compile_inference(run)
        return lambda: compiled(memory, start)

    compiled_step = compile_inference(next_query)
    compiled_projection = compile_inference(attention.project_keys)

    def step_by_step(project_once):
        def run():
            keys = compiled_projection(memory) if project_once else None
            query = start
            for _ in range(steps):
                query = compiled_step(query, memory, keys)
            return query

        return run

    shape = (
        f"B={batch} S={size.loop_source_length} state={size.loop_state_depth} "
        f"memory={size.loop_memory_depth} units={size.loop_units}"
    )
    # Seen in the compiled HLO of jax 0.10: the projection of the memory
    # runs once, before the while loop, however the loop body asks for it.
    hoisted = keras.backend.backend() == "jax"
    for loop, make, compiler_hoists in (
        ("one compiled loop", compiled_loop, hoisted),
        ("a compiled step per call", step_by_step, False),
    ):
        runner.pair(
            "decode",
            f"AdditiveAttention, {steps} steps in {loop}: keys projected once vs at every step",
            shape,
            compiled_with(),
            make(project_once=True),
            make(project_once=False),
            goal="keys_once",
            note="XLA hoists the loop-invariant projection out of the loop itself"
            if compiler_hoists
            else "",
            details={"loop": loop, "hoisted": compiler_hoists},
        )


def _bench_searches(runner):
    """Beam search (width 5) against greedy search on rnnsearch_small."""
    from zoo.recipes import decoding
    from zoo.inference.search_cache import compile_inference

    size = runner.size
    model = _translation_model("rnnsearch_small", size)
    model.build()
    # No end token: with random weights each search would stop at a random
    # step; without one both run exactly max_length steps, the same work as a
    # translation of that length.
    model.eos_id = -1
    steps = size.search_max_length
    greedy = compile_inference(
        lambda source: decoding.greedy_search(model, source, max_length=steps)
    )
    beam = compile_inference(
        lambda source: decoding.beam_search(model, source, beam_width=5, max_length=steps)
    )
    for batch in size.search_batches:
        source = _tokens((batch, size.search_source_length), model.source_vocabulary_size)
        shape = f"B={batch} S={size.search_source_length} steps={steps}"
        # Beam 5 runs the model on 5 rows per sentence, which alone costs up
        # to 5x where a step is compute-bound: greedy search over each
        # sentence 5 times measures that floor, without beam's bookkeeping.
        repeated = np.repeat(source, 5, axis=0)
        for name, ours, goal in (
            ("beam_search(width 5)", lambda: beam(source), "beam_vs_greedy"),
            (
                "greedy_search over 5 copies (beam 5's model rows)",
                lambda: greedy(repeated),
                "beam_floor",
            ),
        ):
            runner.pair(
                "decode",
                f"rnnsearch_small per sentence: {name} vs greedy_search",
                shape,
                compiled_with(),
                ours,
                lambda: greedy(source),
                goal=goal,
                note="time per sentence (a call's time / B)",
                scale=1.0 / batch,
                details={"batch": batch},
            )


def _bench_cache(runner):
    """One MultiHeadAttention decoding step with the key/value cache against
    recomputing the causal self-attention of the whole prefix."""
    from zoo import layers
    from zoo.inference.search_cache import compile_inference

    size = runner.size
    batch, depth, heads = size.cache_batch, size.cache_depth, size.num_heads
    head_depth = depth // heads
    layer = layers.MultiHeadAttention(heads, head_depth)
    layer.build((None, None, depth), (None, None, depth))
    for length in size.cache_lengths:
        prefix = _random((batch, length, depth))
        last = prefix[:, -1]
        # The keys and values of the earlier positions: random, since their
        # values do not change the work of a step.
        cache = _random((batch, 2, length, heads, head_depth), seed=2)

        def cached_step(last, cache, length=length):
            output, _ = layer(
                last,
                last[:, None, :],
                cache=cache,
                cache_update_index=length - 1,
                use_causal_mask=True,
            )
            return output

        def recomputed_step(prefix):
            return layer(prefix, prefix, use_causal_mask=True)[:, -1]

        cached = compile_inference(cached_step)
        recomputed = compile_inference(recomputed_step)
        runner.pair(
            "decode",
            "MultiHeadAttention decoding step: key/value cache vs recomputing the prefix",
            f"B={batch} d={depth} H={heads} length={length}",
            compiled_with(),
            lambda: cached(last, cache),
            lambda: recomputed(prefix),
            goal="cache_step",
            details={"decoded_length": length},
        )


def _translation_model(preset, size):
    """A preset's model at the benchmark size's vocabulary and overrides."""
    from zoo import registry

    recipe = registry.get_preset(preset)["recipe"]
    return registry.build(
        preset,
        source_vocabulary_size=size.vocabulary_size,
        target_vocabulary_size=size.vocabulary_size,
        **size.model_overrides.get(recipe, {}),
    )


def _tokens(shape, vocabulary_size, seed=0):
    """Random word ids (no special tokens), int32."""
    rng = np.random.default_rng(seed)
    return rng.integers(FIRST_WORD_ID, vocabulary_size, shape).astype("int32")


def bench_train(runner):
    """`train_on_batch` of each recipe; on TensorFlow with XLA against without."""
    from zoo import registry

    size = runner.size
    batch, length, vocabulary = size.train_batch, size.train_length, size.vocabulary_size
    target = _tokens((batch, length + 1), vocabulary, seed=1)
    inputs = {"source": _tokens((batch, length), vocabulary), "target_in": target[:, :-1]}
    for preset in TRANSLATION_PRESETS:
        _bench_train_step(
            runner,
            preset,
            lambda preset=preset: _translation_model(preset, size),
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

    backend = keras.backend.backend()
    # JAX without jax.jit re-traces every step (see
    # `recipes.seq2seq.default_jit_compile`); torch.compile is not Keras'
    # default there. Only TensorFlow has two sensible choices.
    settings = {"tensorflow": (True, False), "jax": (True,)}.get(backend, (False,))
    steps, firsts, details = {}, {}, {"preset": name}
    models = {}
    for jit_compile in settings:
        model = make_model()
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3, clipnorm=1.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
            jit_compile=jit_compile,
        )

        def step(model=model):
            return model.train_on_batch(inputs, labels)

        models[jit_compile] = model

        # The first step on its own: it compiles (its time is recorded), and
        # XLA may refuse a model, which is a result, not a crash.
        start = time.perf_counter()
        try:
            finish(step())
        except (_xla_errors() if jit_compile else ()) as error:
            details["xla_error"] = str(error).strip().splitlines()[0]
            runner.log(f"  train: {name}: jit_compile={jit_compile} fails: {details['xla_error']}")
            continue
        firsts[jit_compile] = time.perf_counter() - start
        steps[jit_compile] = step
    if len(steps) == 2:
        title = f"{name} train_on_batch: XLA vs no XLA"
        compiled = "jit_compile=True (XLA) vs False (tf.function)"
    elif "xla_error" in details:
        title = f"{name} train_on_batch (no XLA: it fails to compile)"
        compiled = "jit_compile=False (tf.function)"
    else:
        title = f"{name} train_on_batch"
        compiled = f"jit_compile={settings[0]} ({compiled_with()})"
    case = runner.pair(
        "train",
        title,
        size,
        compiled,
        *steps.values(),
        goal="xla" if backend == "tensorflow" else None,
        details=details,
    )
    timings = [t for t in (case.ours, case.reference) if t is not None]
    for timing, first in zip(timings, firsts.values()):
        timing.first = first
    case.note = " vs ".join(f"{items / t.median:,.0f}" for t in timings) + f" {unit}"
    if len(steps) == 2:
        _bench_new_shape(runner, name, models, inputs, labels, details)


def _bench_new_shape(runner, preset, models, inputs, labels, details):
    """What one more batch shape costs each side, and how many steps the
    preset's training runs per batch shape: XLA compiles once per shape, so
    a faster XLA step pays only over enough steps of each shape.

    Two new shapes, 1 and 2 steps longer: at the first, Keras' tf.function
    retraces once for any shape (both sides); the second costs what every
    further shape of a real training costs.
    """
    from zoo import registry
    from zoo.training import loop as training

    costs = {}
    for extra in (1, 2):
        longer_inputs = {key: _longer(value, extra) for key, value in inputs.items()}
        longer_labels = _longer(labels, extra)
        for jit_compile, model in models.items():
            start = time.perf_counter()
            finish(model.train_on_batch(longer_inputs, longer_labels))
            costs[jit_compile] = time.perf_counter() - start
    shapes, batches = training.compiled_batch_shapes(preset)
    epochs = registry.get_preset(preset)["training"]["epochs"]
    details["new_shape_first_step"] = {"xla": costs[True], "no_xla": costs[False]}
    details["steps_per_shape"] = batches * epochs / shapes
    runner.log(
        f"  train: {preset}: first step of a new batch shape {costs[True]:.1f} s with XLA, "
        f"{costs[False]:.1f} s without; its training: {batches} batches x {epochs} epochs "
        f"over {shapes} batch shapes"
    )


def _longer(array, extra):
    """A token batch `[B, T]` with `extra` more random word ids on its time
    axis; any other array (an image batch) as it is."""
    array = np.asarray(array)
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
        return array
    more = _tokens((array.shape[0], extra), int(array.max()) + 1, seed=extra)
    return np.concatenate([array, more], axis=1)


def _xla_errors():
    """The errors by which XLA refuses to compile a train step."""
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return (tf.errors.OpError,)
    return ()


EXPORT_PRESET = "rnnsearch_small"


def bench_export(runner):
    """Per-sentence greedy latency: the SavedModel `translate` signature and
    the onnxruntime runner, each against the Keras Python API.

    One untrained run of `EXPORT_PRESET` (vocabularies from the synthetic
    corpus): untrained, every sentence decodes to its step limit on all
    three sides, which keeps the comparison equal (the worst case of a
    trained model). The three sides' translations are compared first.
    """
    import keras

    if keras.backend.backend() != "tensorflow":
        runner.skip("export", "SavedModel and ONNX are exported with TensorFlow; use --backend tensorflow")
        return
    import tempfile
    from pathlib import Path

    import tensorflow as tf

    import zoo
    from zoo import data
    from zoo.export import saved_model as export
    from zoo.export import onnx_export
    from zoo.export import onnx_runner
    from zoo import registry
    from zoo.training import loop as training

    size = runner.size
    pairs = data.synthetic_splits(500, 0, 64, seed=0)
    sentences = [source for source, _ in pairs["test"]]
    recipe = registry.get_preset(EXPORT_PRESET)["recipe"]
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        run_dir = training.write_untrained_run(
            folder / "run",
            EXPORT_PRESET,
            data.TextTokenizer.train([t for _, t in pairs["train"]], size.vocabulary_size),
            data.TextTokenizer.train([s for s, _ in pairs["train"]], size.vocabulary_size),
            model_overrides=size.model_overrides.get(recipe, {}),
        )
        python_side = zoo.load(run_dir)
        served = tf.saved_model.load(str(export.export_saved_model(run_dir, folder / "saved_model")))
        onnx_side = onnx_runner.load(onnx_export.export_onnx(run_dir, folder / "onnx"))
        for batch in size.search_batches:
            # Batch 1: eight sentences, one call each.
            groups = [[s] for s in sentences[:8]] if batch == 1 else [sentences[:batch]]
            count = sum(len(group) for group in groups)

            def keras_api(groups=groups):
                return [t.text for g in groups for t in python_side.translate(g, batch_size=len(g))]

            def saved_model(groups=groups):
                return [
                    text.decode()
                    for g in groups
                    for text in served.signatures["translate"](text=tf.constant(g))[
                        "translation"
                    ].numpy()
                ]

            def onnxruntime(groups=groups):
                return [t.text for g in groups for t in onnx_side.translate(g, batch_size=len(g))]

            expected = keras_api()
            for name, side in (("SavedModel translate", saved_model), ("onnxruntime runner", onnxruntime)):
                same = side() == expected
                runner.pair(
                    "export",
                    f"{name} vs Keras Translator.translate, batch {batch}",
                    f"{EXPORT_PRESET}, untrained",
                    "graph",
                    side,
                    keras_api,
                    note=f"per sentence, greedy; same translations: {'yes' if same else 'NO'}",
                    scale=1 / count,
                    details={"same_translations": same},
                )


BENCHMARKS = {
    "layers": bench_layers,
    "decode": bench_decode,
    "train": bench_train,
    "export": bench_export,
}


# The goals of the issue ------------------------------------------------------


def check_goals(cases):
    """The speed goals, judged from the measured cases.

    Returns a list of dicts `{"goal", "met", "evidence"}`, one per goal whose
    cases were run; `met` is a bool.
    """
    by_goal = {}
    for case in cases:
        if case.goal:
            by_goal.setdefault(case.goal, []).append(case)
    verdicts = []

    def verdict(goal, met, evidence):
        verdicts.append({"goal": goal, "met": bool(met), "evidence": evidence})

    if "mha_vs_keras" in by_goal:
        # Judged on the median of the rows' ratios: where both layers run the
        # same kernels, a single row's ratio scatters around 1 with the load.
        ratios = sorted(case.ratio for case in by_goal["mha_vs_keras"])
        median = float(np.median(ratios))
        verdict(
            "MultiHeadAttention takes no more time than keras.layers.MultiHeadAttention "
            "(median ratio <= 1.0)",
            median <= 1.0,
            f"median ratio {median:.2f} over {len(ratios)} rows (forward and "
            f"forward+backward, plain and causal); rows from {ratios[0]:.2f} to {ratios[-1]:.2f}",
        )
    if "keys_once" in by_goal:
        rows = by_goal["keys_once"]
        # Judged in one compiled loop, the way the searches decode. Where the
        # compiler hoists the projection out of that loop itself (XLA on
        # jax), "at every step" is not what ran there: the loop of compiled
        # steps, where it does run every step, judges instead.
        unhoisted = [case for case in rows if not case.details["hoisted"]]
        judged = [
            case for case in unhoisted if case.details["loop"] == "one compiled loop"
        ] or unhoisted
        verdict(
            "keys projected once: at least 3x faster than projected at every step",
            all(1.0 / case.ratio >= 3.0 for case in judged),
            f"judged in {judged[0].details['loop']}: "
            + "; ".join(
                f"{1.0 / case.ratio:.1f}x in {case.details['loop']} "
                f"({format_seconds(case.ours.median)} vs {format_seconds(case.reference.median)})"
                + (f": {case.note}" if case.note else "")
                for case in rows
            ),
        )
    if "cache_step" in by_goal:
        rows = by_goal["cache_step"]
        lengths = [case.details["decoded_length"] for case in rows]

        def exponent(first, last):
            """k in time ~ length**k between the shortest and longest length."""
            return math.log(last / first) / math.log(lengths[-1] / lengths[0])

        cached = exponent(rows[0].ours.median, rows[-1].ours.median)
        recomputed = exponent(rows[0].reference.median, rows[-1].reference.median)
        # Linear is k = 1, quadratic k = 2: nearer the first than the second.
        verdict(
            "the cached MultiHeadAttention step grows linearly, not quadratically, "
            "with the decoded length",
            cached < 1.5,
            "cached step "
            + ", ".join(
                f"{format_seconds(case.ours.median)} at {n}" for case, n in zip(rows, lengths)
            )
            + f": time ~ length^{cached:.2f} (linear: 1, quadratic: 2); recomputing the "
            f"prefix: length^{recomputed:.2f}",
        )
    if "beam_vs_greedy" in by_goal:
        rows = by_goal["beam_vs_greedy"]
        floors = {case.details["batch"]: case.ratio for case in by_goal.get("beam_floor", [])}
        # A sentence's cost is judged on one sentence per call: batched, beam
        # 5 gives the model 5x the rows (see the floor rows).
        single = [case for case in rows if case.details["batch"] == 1] or rows
        verdict(
            "beam 5 costs at most 3x greedy per sentence (one sentence per call)",
            all(case.ratio <= 3.0 for case in single),
            "; ".join(
                f"x{case.ratio:.2f} at B={case.details['batch']}"
                + (
                    f" (greedy over 5 copies of each sentence alone: "
                    f"x{floors[case.details['batch']]:.2f})"
                    if case.details["batch"] in floors
                    else ""
                )
                for case in rows
            ),
        )
    if "xla" in by_goal:
        verdicts.append(_xla_verdict(by_goal["xla"]))
    return verdicts


def _xla_verdict(rows):
    """Whether each recipe's TensorFlow default jit_compile is the faster one."""
    from zoo import registry
    from zoo.recipes.seq2seq import default_jit_compile

    evidence, agree = [], True
    for case in rows:
        preset = case.details["preset"]
        settings = registry.get_preset(preset)
        configured = settings["training"].get("jit_compile")
        recipe = registry.recipe_class(settings["recipe"])
        default = default_jit_compile(recipe) if configured is None else configured
        if "xla_error" in case.details:
            agree = agree and not default
            evidence.append(
                f"{preset}: XLA fails to compile ({case.details['xla_error'][:100]}); "
                f"default jit_compile={default}"
            )
            continue
        speedup = case.reference.median / case.ours.median
        saving = case.reference.median - case.ours.median
        new_shape = case.details["new_shape_first_step"]
        compile_cost = new_shape["xla"] - new_shape["no_xla"]
        # Steps of one batch shape after which XLA's faster steps have paid
        # for its compilation of that shape (never, if they are slower).
        break_even = compile_cost / saving if saving > 0 else math.inf
        steps_per_shape = case.details["steps_per_shape"]
        faster = steps_per_shape > break_even
        agree = agree and default == faster
        evidence.append(
            f"{preset}: XLA x{speedup:.2f} per step; a new batch shape costs "
            f"{format_seconds(new_shape['xla'])} with XLA vs "
            f"{format_seconds(new_shape['no_xla'])}, "
            + (
                f"repaid after {break_even:,.0f} steps of that shape"
                if saving > 0
                else "never repaid (slower steps)"
            )
            + f", and the preset trains {steps_per_shape:,.0f} steps per shape: XLA "
            f"{'faster' if faster else 'slower'} in its training; default jit_compile={default}"
        )
    return {
        "goal": "each recipe's TensorFlow training uses XLA where that is faster (per step, "
        "and over its preset's batch shapes, each compiled once), and its default says so",
        "met": agree,
        "evidence": "; ".join(evidence),
    }


# Reporting -------------------------------------------------------------------


def format_seconds(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def format_timing(timing):
    """`median [q25, q75]`, all in the median's unit."""
    if timing is None:
        return "-"
    median = timing.median
    scale, unit = (1e6, "µs") if median < 1e-3 else (1e3, "ms") if median < 1.0 else (1.0, "s")

    def digits(value):
        value *= scale
        return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"

    low, high = timing.quartiles
    return f"{digits(median)} {unit} [{digits(low)}, {digits(high)}]"


def markdown_table(cases):
    """The cases as a Markdown table: ours, reference, and their ratio."""
    lines = [
        "| suite | case | size | compiled | ours | reference | ratio | note |",
        "| :-- | :-- | :-- | :-- | --: | --: | --: | :-- |",
    ]
    for case in cases:
        ratio = "-" if case.ratio is None else f"{case.ratio:.2f}"
        lines.append(
            f"| {case.suite} | {case.name} | {case.size} | {case.compiled} | "
            f"{format_timing(case.ours)} | {format_timing(case.reference)} | {ratio} | "
            f"{case.note} |"
        )
    return "\n".join(lines)


def markdown_report(results, cases):
    """The whole printed report: what ran where, the table, skips and goals."""
    versions = ", ".join(f"{k} {v}" for k, v in results["versions"].items() if v)
    machine = results["machine"]
    settings = results["settings"]
    lines = [
        f"`{results['command']}`",
        "",
        f"Backend {results['backend']}; {versions}; {machine['cpu_count']} cores "
        f"({machine['cpu_model']}), load average {machine['load_before'][0]:.2f} before, "
        f"{machine['load_after'][0]:.2f} after"
        + "".join(f"; {name}={value}" for name, value in machine["threads"].items())
        + ".",
        f"Times: median [interquartile range] of at least {settings['repeats']} calls "
        f"(quick cases: enough to fill {settings['min_time']:g} s) after "
        f"{settings['warmup']} warm-up calls, ours and reference interleaved; "
        "ratio = ours / reference at the median (below 1: ours is faster).",
        "",
        markdown_table(cases),
    ]
    if results["skipped"]:
        lines.append("")
        lines.extend(f"- {s['suite']}: skipped: {s['reason']}" for s in results["skipped"])
    if results["goals"]:
        lines.append("")
        lines.append("Goals:")
        lines.extend(
            f"- {'met' if g['met'] else 'MISSED'}: {g['goal']}: {g['evidence']}"
            for g in results["goals"]
        )
    return "\n".join(lines)


def versions():
    """Installed versions of the libraries that set the speed (None: absent).

    Read from the package metadata, so that no other backend is imported."""
    names = ("keras", "tensorflow", "jax", "jaxlib", "torch", "numpy", "onnxruntime")
    found = {"python": platform.python_version()}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def machine():
    """The cores and CPU model the numbers were measured on."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu_count": os.cpu_count(),
        "usable_cores": usable,
        "cpu_model": model,
        "platform": platform.platform(),
    }


def threads():
    """The thread settings in force: the environment variables that set them,
    and torch's own count on torch (its kernels' OpenMP threads)."""
    import keras

    names = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "XLA_FLAGS")
    found = {name: os.environ[name] for name in names if name in os.environ}
    if keras.backend.backend() == "torch":
        import torch

        found["torch.get_num_threads()"] = torch.get_num_threads()
    return found


def run(
    suites,
    size=DEFAULT_SIZE,
    repeats=10,
    warmup=2,
    min_time=DEFAULT_MIN_TIME,
    command="zoo bench",
    log=None,
):
    """Runs the benchmark suites in this process, on the current backend.

    Args:
        suites: names from `SUITES`.
        size: a key of `SIZES`.
        repeats: timed calls of each function (at least).
        warmup: untimed calls before them.
        min_time: seconds of timed calls that a quick case is repeated to
            fill (see `measure`).
        command: the command line to record with the results.
        log: a function of one progress line (default: print to stderr).

    Returns:
        `(results, cases)`: the JSON-ready results dict and the `Case`s.
    """
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        # Every case compiles functions of its own, on purpose: TensorFlow's
        # warnings about frequent tracing say nothing here.
        tf.get_logger().setLevel("ERROR")
    runner = Runner(SIZES[size], warmup, repeats, min_time, log)
    load_before = os.getloadavg()
    for suite in suites:
        runner.log(f"zoo bench: {suite} on {keras.backend.backend()}")
        BENCHMARKS[suite](runner)
    results = {
        "command": command,
        "backend": keras.backend.backend(),
        "versions": versions(),
        "machine": {
            **machine(),
            "threads": threads(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        },
        "settings": {
            "suites": list(suites),
            "size": size,
            "repeats": repeats,
            "warmup": warmup,
            "min_time": min_time,
        },
        "cases": [case.to_json() for case in runner.cases],
        "skipped": runner.skipped,
        "goals": check_goals(runner.cases),
    }
    return results, runner.cases


# Command line ----------------------------------------------------------------


def add_parser(subcommands):
    """Adds `bench` to the `zoo` command line's subcommands."""
    from zoo.cli import non_negative_float
    from zoo.cli import positive_int

    parser = subcommands.add_parser(
        "bench",
        help="time the layers, decoding and training side by side, as ratios",
        description="Times our layers and choices against references in one run, "
        "and prints a Markdown table of medians and their ratios.",
    )
    parser.add_argument(
        "suite",
        nargs="?",
        default="all",
        choices=(*SUITES, "all"),
        help="what to time (default: all)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        help="the Keras backend (default: KERAS_BACKEND, else tensorflow)",
    )
    parser.add_argument("--out", help="also write the results as JSON to this file")
    parser.add_argument(
        "--size",
        choices=tuple(SIZES),
        default=DEFAULT_SIZE,
        help="tiny: a seconds-long check that every case runs; full (default): the issue's sizes",
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=10, help="timed calls of each side, at least"
    )
    parser.add_argument("--warmup", type=positive_int, default=2, help="untimed calls before them")
    parser.add_argument(
        "--min-time",
        type=non_negative_float,
        default=DEFAULT_MIN_TIME,
        help="repeat a quick case until its timed calls fill this many seconds "
        f"(at most {MAX_ROUNDS_FACTOR}x --repeats; default {DEFAULT_MIN_TIME})",
    )
    return parser


def command_line(args):
    """The `zoo bench` arguments that reproduce `args`."""
    argv = [args.suite, "--size", args.size, "--repeats", str(args.repeats)]
    argv += ["--warmup", str(args.warmup), "--min-time", str(args.min_time)]
    if args.backend:
        argv += ["--backend", args.backend]
    if args.out:
        argv += ["--out", args.out]
    return argv


def _use_backend(backend):
    """Selects `backend` for this process; False when Keras is already loaded
    with another one (a process keeps its first backend for life)."""
    if "keras" in sys.modules:
        return sys.modules["keras"].backend.backend() == backend
    os.environ["KERAS_BACKEND"] = backend
    return True


def command(args):
    """Runs `zoo bench` with the parsed `args`: prints the report, writes
    `--out`. With a `--backend` other than the loaded one, it runs itself in
    a child process with that backend."""
    argv = command_line(args)
    if args.backend and not _use_backend(args.backend):
        code = subprocess.call(
            [sys.executable, "-m", "zoo.bench", *argv],
            env=dict(os.environ, KERAS_BACKEND=args.backend),
        )
        if code:
            raise SystemExit(code)
        return
    suites = SUITES if args.suite == "all" else (args.suite,)
    results, cases = run(
        suites,
        size=args.size,
        repeats=args.repeats,
        warmup=args.warmup,
        min_time=args.min_time,
        command="zoo bench " + " ".join(argv),
    )
    print(markdown_report(results, cases), flush=True)
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=2)
            out.write("\n")


def main(argv=None):
    """`python -m zoo.bench ...`, the same as `zoo bench ...`."""
    parser = argparse.ArgumentParser(prog="zoo")
    add_parser(parser.add_subparsers(dest="command", required=True))
    command(parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
