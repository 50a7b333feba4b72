"""The `decode` suite: the decoding choices, keys projected once, beam
against greedy search, the key/value cache."""

import numpy as np

from zoo.bench.sizes import random_tensor
from zoo.bench.sizes import tokens
from zoo.bench.sizes import translation_model
from zoo.bench.timing import compiled_with

SEARCH_PRESET = "rnnsearch_small"
BEAM_WIDTH = 5


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
    from zoo.inference.search_choice import compile_inference

    size = runner.size
    batch, steps = size.loop_batch, size.loop_steps
    attention = layers.AdditiveAttention(size.loop_units)
    attention.build((None, size.loop_state_depth), (None, None, size.loop_memory_depth))
    memory = random_tensor((batch, size.loop_source_length, size.loop_memory_depth))
    # A decoder's state update, reduced to one layer over the context, so that
    # each step's context gives the next query.
    context_to_state = keras.layers.Dense(size.loop_state_depth, activation="tanh")
    context_to_state.build((None, size.loop_memory_depth))
    start = random_tensor((batch, size.loop_state_depth), seed=1)

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
    # XLA on JAX moves the loop-invariant projection out of the compiled loop
    # itself, so there "at every step" is not what runs.
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
            note="XLA hoists the loop-invariant projection out of the loop itself"
            if compiler_hoists
            else "",
            details={"loop": loop, "hoisted": compiler_hoists},
        )


def _bench_searches(runner):
    """Beam search against greedy search on `SEARCH_PRESET`."""
    from zoo.recipes import decoding
    from zoo.inference.search_choice import compile_inference

    size = runner.size
    model = translation_model(SEARCH_PRESET, size)
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
        lambda source: decoding.beam_search(
            model, source, beam_width=BEAM_WIDTH, max_length=steps
        )
    )
    for batch in size.search_batches:
        source = tokens((batch, size.search_source_length), model.source_vocabulary_size)
        shape = f"B={batch} S={size.search_source_length} steps={steps}"
        # A beam runs the model on BEAM_WIDTH rows per sentence, which alone
        # costs up to that factor where a step is compute-bound: greedy search
        # over each sentence repeated as often measures that floor, without
        # the beam's bookkeeping.
        repeated = np.repeat(source, BEAM_WIDTH, axis=0)
        for name, ours in (
            (f"beam_search(width {BEAM_WIDTH})", lambda: beam(source)),
            (
                f"greedy_search over {BEAM_WIDTH} copies (beam {BEAM_WIDTH}'s model rows)",
                lambda: greedy(repeated),
            ),
        ):
            runner.pair(
                "decode",
                f"{SEARCH_PRESET} per sentence: {name} vs greedy_search",
                shape,
                compiled_with(),
                ours,
                lambda: greedy(source),
                note="time per sentence (a call's time / B)",
                scale=1.0 / batch,
                details={"batch": batch},
            )


def _bench_cache(runner):
    """One MultiHeadAttention decoding step with the key/value cache against
    recomputing the causal self-attention of the whole prefix."""
    from zoo import layers
    from zoo.inference.search_choice import compile_inference

    size = runner.size
    batch, depth, heads = size.cache_batch, size.cache_depth, size.num_heads
    head_depth = depth // heads
    layer = layers.MultiHeadAttention(heads, head_depth)
    layer.build((None, None, depth), (None, None, depth))
    for length in size.cache_lengths:
        prefix = random_tensor((batch, length, depth))
        last = prefix[:, -1]
        # The keys and values of the earlier positions: random, since their
        # values do not change the work of a step.
        cache = random_tensor((batch, 2, length, heads, head_depth), seed=2)

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
            details={"decoded_length": length},
        )
