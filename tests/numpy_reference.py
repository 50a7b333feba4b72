"""Plain NumPy versions of the papers' formulas, the ground truth of the tests."""

import numpy as np


def masked_softmax(scores, mask):
    """Softmax over the last axis; masked entries and fully masked rows are 0."""
    scores = np.where(mask, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exp = np.where(mask, np.exp(scores - row_max), 0.0)
    total = exp.sum(axis=-1, keepdims=True)
    return np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)


def masked_sparsemax(scores, mask):
    """Martins and Astudillo 2016, algorithm 1, row by row over the last axis:
    sort z descending, k(z) = max{k : 1 + k z_(k) > sum_{j<=k} z_(j)},
    tau = (sum_{j<=k(z)} z_(j) - 1) / k(z), p = max(z - tau, 0), over the
    unmasked entries only; masked entries and fully masked rows are 0."""
    scores = np.asarray(scores, "float64")
    mask = np.broadcast_to(mask, scores.shape)
    weights = np.zeros_like(scores)
    for index in np.ndindex(scores.shape[:-1]):
        valid = mask[index]
        z = scores[index][valid]
        if z.size == 0:
            continue
        descending = np.sort(z)[::-1]
        cumulative = np.cumsum(descending)
        k = np.arange(1, z.size + 1)
        support_size = k[1 + k * descending > cumulative].max()
        tau = (cumulative[support_size - 1] - 1) / support_size
        weights[index][valid] = np.maximum(z - tau, 0.0)
    return weights


# The distributions of the layers' `probability_fn`, by name.
PROBABILITY_FUNCTIONS = {"softmax": masked_softmax, "sparsemax": masked_sparsemax}


def lengths_to_mask(lengths, max_length):
    return np.arange(max_length)[None, :] < np.asarray(lengths)[:, None]


def random_inputs(batch=3, query_length=4, value_length=6, query_depth=5, value_depth=7, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, query_length, query_depth)).astype("float32")
    value = rng.normal(size=(batch, value_length, value_depth)).astype("float32")
    return query, value


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def gru_step(x, h, kernel, recurrent_kernel, bias):
    """Keras' GRUCell (reset_after=True): gates z, r and candidate, in that order.

    `bias` is `[2, 3u]`: the input bias, then the recurrent bias.
    """
    units = h.shape[-1]
    inputs = x @ kernel + bias[0]
    recurrent = h @ recurrent_kernel + bias[1]
    z = sigmoid(inputs[:, :units] + recurrent[:, :units])
    r = sigmoid(inputs[:, units : 2 * units] + recurrent[:, units : 2 * units])
    candidate = np.tanh(inputs[:, 2 * units :] + r * recurrent[:, 2 * units :])
    return z * h + (1.0 - z) * candidate


def lstm_step(x, h, c, kernel, recurrent_kernel, bias):
    """Keras' LSTMCell: gates i, f, candidate, o; returns (h, c)."""
    i, f, g, o = np.split(x @ kernel + h @ recurrent_kernel + bias, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def additive_attention(query, memory, mask, w, b, u, v):
    """Bahdanau's `e_j = v^T tanh(W s + b + U h_j)` for one query `[B, d]`:
    returns (context `[B, D]`, weights `[B, S]`)."""
    hidden = np.tanh((query @ w + b)[:, None, :] + memory @ u)
    weights = masked_softmax(hidden @ v, mask)
    return np.einsum("bs,bsd->bd", weights, memory), weights


def general_attention(query, memory, mask, w):
    """Luong's general score `h_t^T W_a h_s` for one query `[B, d]`."""
    weights = masked_softmax(np.einsum("bd,bsd->bs", query, memory @ w), mask)
    return np.einsum("bs,bsd->bd", weights, memory), weights


def attentional_state(context, top, w_c):
    """Luong's `h~_t = tanh(W_c [c_t; h_t])`."""
    return np.tanh(np.concatenate([context, top], axis=-1) @ w_c)


def maxout_attentional_state(context, top, w_c, b_c):
    """`h~_t = max(W_1 [c_t; h_t] + b_1, W_2 [c_t; h_t] + b_2)`, the two maps
    side by side in `w_c` and `b_c`."""
    pieces = np.concatenate([context, top], axis=-1) @ w_c + b_c
    size = pieces.shape[-1] // 2
    return np.maximum(pieces[..., :size], pieces[..., size:])


def monotonic_expected_alignment(p_choose, previous):
    """Raffel et al. 2017, eqs. 13-14, position by position for one step:
    `q_j = (1 - p_{j-1}) q_{j-1} + alpha'_j` with `q_0 = p_0 = 0`, and
    `alpha_j = p_j q_j` (the recurrence, not the cumprod solution)."""
    alignment = np.zeros_like(p_choose, dtype="float64")
    for b in range(p_choose.shape[0]):
        q, p_before = 0.0, 0.0
        for j in range(p_choose.shape[1]):
            q = (1.0 - p_before) * q + previous[b, j]
            alignment[b, j] = p_choose[b, j] * q
            p_before = p_choose[b, j]
    return alignment


def monotonic_hard_alignment(energies, previous, mask):
    """Raffel et al. 2017, section 2.2, at test time: from the previous
    step's position, scan the memory left to right and stop at the first
    unmasked position whose energy is positive (p > 0.5); where the previous
    step attended nowhere, or no position stops, attend nowhere."""
    alignment = np.zeros(energies.shape, "float64")
    for b in range(energies.shape[0]):
        if not previous[b].any():
            continue
        for j in range(int(np.argmax(previous[b] > 0)), energies.shape[1]):
            if mask[b, j] and energies[b, j] > 0:
                alignment[b, j] = 1.0
                break
    return alignment


def preserve_mass(alignment, previous, mask):
    """fairseq's `mass_preservation` for monotonic attention: the mass of
    the previous step that stops nowhere is put on the last unmasked memory
    position (rows without one keep theirs)."""
    alignment = alignment.copy()
    for b in range(alignment.shape[0]):
        if mask[b].any():
            last = int(np.flatnonzero(mask[b])[-1])
            alignment[b, last] += previous[b].sum() - alignment[b].sum()
    return alignment


def monotonic_attention(energies, mask, mode, previous=None, mass_preservation=False):
    """Monotonic alignments `[B, Tq, S]` of a sequence of steps from the
    energies `[B, Tq, S]` (the score plus its bias r), starting from
    `previous` (one-hot at position 0 when None): `mode` "parallel" gives the
    expected alignment of `p = sigmoid(e)`, "hard" the test-time process.
    Masked positions are never stopped at. With `mass_preservation`, what
    stops nowhere stops at the last unmasked position (`preserve_mass`)."""
    batch, steps, length = energies.shape
    mask = np.broadcast_to(mask, (batch, length))
    if previous is None:
        previous = np.zeros((batch, length))
        previous[:, 0] = 1.0
    alignments = []
    for i in range(steps):
        if mode == "hard":
            alignment = monotonic_hard_alignment(energies[:, i], previous, mask)
        else:
            alignment = monotonic_expected_alignment(sigmoid(energies[:, i]) * mask, previous)
        if mass_preservation:
            alignment = preserve_mass(alignment, previous, mask)
        previous = alignment
        alignments.append(previous)
    return np.stack(alignments, axis=1)
