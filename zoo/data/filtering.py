"""Which training pairs are left out, and why, and the counts a run reports.

NumPy only (no TensorFlow): `encode_pairs` (`zoo.data.pipeline`) hands it
the token counts of each side, and it answers which pairs to keep.

A pair is left out for the first of these reasons that applies:

- "blank": a side has no tokens (the readers skip a blank line already,
  `ParallelCorpus.skipped_empty`; this catches a side whose text the
  tokenizer makes nothing of);
- "too_long": a side is over its length limit (the run's `max_length`);
- "length_ratio": the longer side has more than `max_length_ratio` times
  the tokens of the shorter: most likely a misaligned pair or one side
  with text missing, which Moses' clean-corpus-n.perl and OpenNMT's filters
  drop too (with a ratio of 9 there).

The ratio is counted in the tokenizer's tokens, not in words: the same unit
as `max_length`, what the model reads, and the same for a language written
without spaces.
"""

from __future__ import annotations

import numpy as np

# In the order they are tested: a pair counts under the first that applies.
REASONS = ("blank", "too_long", "length_ratio")


def check_ratio(max_length_ratio):
    """A ValueError unless `max_length_ratio` is None or a number >= 1 (a
    smaller ratio would leave out every pair)."""
    if max_length_ratio is None:
        return
    number = isinstance(max_length_ratio, (int, float)) and not isinstance(max_length_ratio, bool)
    if not number or not max_length_ratio >= 1:
        raise ValueError(
            f"max_length_ratio must be None or a number >= 1; received {max_length_ratio!r}."
        )


def left_out_reasons(
    source_lengths,
    target_lengths,
    max_source_length=None,
    max_target_length=None,
    max_length_ratio=None,
):
    """Why each pair is left out, from the token counts of its sides.

    Args:
        source_lengths, target_lengths: int sequences, the tokens of each
            pair's source and target.
        max_source_length, max_target_length: optional ints, the most
            tokens a side may have.
        max_length_ratio: optional number >= 1, the most the longer side's
            tokens may be over the shorter's; None keeps every ratio.

    Returns:
        A str NumPy array, one entry per pair: "" for a pair kept, else the
        first of `REASONS` that applies.
    """
    check_ratio(max_length_ratio)
    source = np.asarray(source_lengths, dtype=np.int64)
    target = np.asarray(target_lengths, dtype=np.int64)
    blank = (source == 0) | (target == 0)
    too_long = np.zeros_like(blank)
    if max_source_length is not None:
        too_long |= source > max_source_length
    if max_target_length is not None:
        too_long |= target > max_target_length
    uneven = np.zeros_like(blank)
    if max_length_ratio is not None:
        # Multiplied rather than divided: the shorter side may have no tokens.
        uneven = np.maximum(source, target) > max_length_ratio * np.minimum(source, target)
    # np.select takes the first condition that holds, as REASONS are ordered.
    return np.select([blank, too_long, uneven], list(REASONS), default="")


def count_reasons(reasons):
    """{reason: how many pairs it left out} for each of `REASONS`."""
    reasons = np.asarray(reasons)
    return {reason: int(np.count_nonzero(reasons == reason)) for reason in REASONS}


def filter_metrics(train_pairs, left_out, pairs_read=None, blank_lines=0):
    """What a run's metrics.json says of its training data's filtering.

    Args:
        train_pairs: int, the training split's pairs before filtering.
        left_out: {reason: count} of the training split (`count_reasons`).
        pairs_read: int, the pairs (lines) the corpus had, blank ones
            included; None: `train_pairs` (data made in memory).
        blank_lines: int, the corpus's lines with a blank side, which the
            reader skipped before the validation split was held out.

    Returns:
        A dict: `pairs_read`, `train_pairs_kept` and a
        `pairs_left_out_<reason>` entry for each of `REASONS`.
    """
    metrics = {
        "pairs_read": train_pairs if pairs_read is None else pairs_read,
        "train_pairs_kept": train_pairs - sum(left_out.values()),
    }
    for reason in REASONS:
        metrics[f"pairs_left_out_{reason}"] = left_out[reason] + (
            blank_lines if reason == "blank" else 0
        )
    return metrics


def describe(metrics):
    """One line of `filter_metrics`' counts, for the training log."""
    left_out = ", ".join(
        f"{metrics[f'pairs_left_out_{reason}']} {reason.replace('_', ' ')}" for reason in REASONS
    )
    return (
        f"training data: {metrics['pairs_read']} pairs read, training on "
        f"{metrics['train_pairs_kept']}; left out: {left_out}"
    )
