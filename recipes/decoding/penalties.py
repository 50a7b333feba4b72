"""GNMT's length and coverage penalties, which rank beam search's
hypotheses: `_GnmtScorer` computes the score (Wu et al. 2016, eq. 14;
`beam_search` states it), `_coverage_mask` the source positions its coverage
penalty sums over."""

import keras
from keras import ops

# Coverage below this floor is clipped before the log, so that a source word
# that got exactly zero attention costs a large but finite penalty.
COVERAGE_FLOOR = 1e-10


class _GnmtScorer:
    """s(Y, X) = log P(Y|X) / lp(Y) + cp(X; Y) for hypotheses `[B, K]`."""

    def __init__(self, alpha, beta, coverage_mask, batch, width):
        self.alpha = alpha
        self.beta = beta
        self.coverage_mask = ops.expand_dims(coverage_mask, 1)  # [B, 1, S]
        self.batch = batch
        self.width = width

    def length_factor(self, length):
        return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, self.alpha)

    def __call__(self, log_probs, length, coverage):
        """log_probs `[B, K]`, length scalar or `[B, K]`, coverage `[B*K, S]`
        (None without a coverage penalty)."""
        score = log_probs
        if self.alpha:
            score = score / self.length_factor(length)
        if self.beta:
            coverage = ops.reshape(coverage, (self.batch, self.width, -1))
            covered = ops.log(ops.clip(coverage, COVERAGE_FLOOR, 1.0))
            score = score + self.beta * ops.sum(covered * self.coverage_mask, axis=-1)
        return score

    def best_reachable(self, log_probs, length):
        """The most s(Y, X) that an extension of live hypotheses with
        `log_probs` can reach at lengths up to `length` (cp <= 0 is left
        out): an upper bound when `length` is the step limit."""
        if self.alpha:
            return log_probs / self.length_factor(length)
        return log_probs


def _coverage_mask(source, batch, source_width, pad_id):
    """float32 `[B, S]`: 1 on the source positions the coverage penalty sums
    over. PAD positions of a token source are left out; every position of
    any other source (image regions) counts."""
    if len(source.shape) == 2 and "int" in keras.backend.standardize_dtype(source.dtype):
        return ops.cast(ops.not_equal(source, pad_id), "float32")
    return ops.ones((batch, source_width), "float32")
