"""Greedy and beam search, written once in `keras.ops` for every recipe.

A module a search: `greedy` (`greedy_search`), `beam` (`beam_search`, with
GNMT's length and coverage penalties from `penalties`), `chunked_beam`
(`ChunkedBeamSearch`, beam search in compiled chunks of steps), and
`decode_result`, what they share: `DecodeResult`, the step limit
`max_decoding_steps`, and `decode_to_lists`. Import them from here:
`from zoo.recipes.decoding import beam_search`.

The searches use only the contract that every sequence-generating recipe
offers, `zoo.recipes.contract.SequenceGenerator` (see docs/design.md, "The
one contract"):

- `model.encode(source) -> state`, a flat dict of tensors with the batch on
  axis 0;
- `model.decode_step(previous_tokens, state, step) -> (logits, state,
  attention)`, with `previous_tokens` int32 `[B]`, `step` the index of the
  target position being produced (0 for the first), logits `[B, V]` and the
  attention of that step `[B, S]`;
- the declarations: `bos_id`, `eos_id`, `pad_id`, `max_target_length` (an
  int bound on the number of steps, such as a key/value cache size, or
  None), `attention_width(state)` (S, read from the state's shape),
  `constant_state_keys` (the entries that beam search need not reorder) and
  `step_cache_axes` (the caches a search cuts to its step limit).

The step loop is one `keras.ops.while_loop`, so the whole search compiles to
one graph on TensorFlow (`tf.function`, also with an unknown batch and source
length) and JAX (`jax.jit`); on torch it runs eagerly. The searches are for
inference only: nothing here is differentiated.
"""

from zoo.recipes.decoding.beam import NEG_INF
from zoo.recipes.decoding.beam import STOPPING_RULES
from zoo.recipes.decoding.beam import beam_search
from zoo.recipes.decoding.chunked_beam import ChunkedBeamSearch
from zoo.recipes.decoding.decode_result import DecodeResult
from zoo.recipes.decoding.decode_result import decode_to_lists
from zoo.recipes.decoding.decode_result import max_decoding_steps
from zoo.recipes.decoding.greedy import greedy_search
from zoo.recipes.decoding.penalties import COVERAGE_FLOOR

__all__ = [
    "COVERAGE_FLOOR",
    "NEG_INF",
    "STOPPING_RULES",
    "ChunkedBeamSearch",
    "DecodeResult",
    "beam_search",
    "decode_to_lists",
    "greedy_search",
    "max_decoding_steps",
]
