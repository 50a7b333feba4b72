"""A monotonic RNNsearch (`rnnsearch_monotonic_small`'s model) on word ids of
the synthetic corpus: the hard alignment's greedy BLEU, the AER of its
peaks, and the share of decoding steps whose hard alignment stops anywhere.

Run from the repository root (docs/experiments/2026-12-07-monotonic-attention.md):

    PYTHONPATH=. python docs/experiments/2026-12-07-monotonic-attention.py NAME \
        '{"attention": {"score_bias_init": 0.0}}' [TRAIN_SIZE MAX_LENGTH EPOCHS]

The JSON overrides `MONOTONIC_SETTINGS` (`"attention"`) or trains the
preset's soft attention instead (`"kind": "additive"`).
"""

import json
import sys
import time

import keras
import sacrebleu
from keras import ops

sys.path.append("tests")
import zoo.recipes.rnnsearch as rnnsearch  # noqa: E402
from toy_tasks import synthetic_task  # noqa: E402
from toy_tasks import train_and_align  # noqa: E402
from zoo.recipes.decoding import greedy_search  # noqa: E402

TEST_SIZE = 300
EOS = 3

name, settings = sys.argv[1], json.loads(sys.argv[2])
train_size, max_length, epochs = (
    (int(a) for a in sys.argv[3:6]) if len(sys.argv) > 5 else (3000, 20, 6)
)
rnnsearch.MONOTONIC_SETTINGS = {**rnnsearch.MONOTONIC_SETTINGS, **settings.get("attention", {})}
keras.utils.set_random_seed(0)
task = synthetic_task(train_size + TEST_SIZE, 0, max_length)
source, _, target_out, _, sizes = task
model = rnnsearch.RNNSearch(
    sizes[0], sizes[1], embedding_dim=64, hidden_dim=128, attention_units=128,
    maxout_units=128, dropout=0.1, attention=settings.get("kind", "monotonic"),
)
start = time.time()
aer, top_share = train_and_align(model, task, train_size, TEST_SIZE, epochs)
train_seconds = time.time() - start

result = greedy_search(model, source[-TEST_SIZE:])
tokens = ops.convert_to_numpy(result.tokens)
attention = ops.convert_to_numpy(result.attention)
hypotheses, references, stops, steps = [], [], 0, 0
for row, reference, weights in zip(tokens, target_out[-TEST_SIZE:], attention):
    row, reference = list(row), list(reference)
    row = row[: row.index(EOS)] if EOS in row else row
    hypotheses.append(" ".join(map(str, row)))
    references.append(" ".join(map(str, reference[: reference.index(EOS)])))
    stops += int((weights[: len(row)].sum(-1) > 0).sum())
    steps += len(row)
print(json.dumps({
    "name": name,
    "settings": rnnsearch.MONOTONIC_SETTINGS,
    "kind": settings.get("kind", "monotonic"),
    "aer": round(aer, 3),
    "top_share": round(top_share, 3),
    "bleu": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2),
    "stop_share": round(stops / max(steps, 1), 3),
    "train_s": round(train_seconds),
}))
