"""One worker of test_distributed.py's multi-worker run (TF_CONFIG set by
the test): trains rnnsearch_small tiny with --strategy multi-worker and
prints, as one JSON line, where it wrote its run, a digest of its final
weights (read before exit: a non-chief's directory is deleted at exit) and
the target rows of every batch this worker trained on. Dropout is off."""

import hashlib
import json
import sys

import numpy as np
import tensorflow as tf

from zoo import registry
from zoo.training import distributed
from zoo.training import loop as training
from zoo.recipes.rnnsearch import RNNSearch  # noqa: F401 (registers the class)
from zoo import runs

# The target rows of each train step's batch on this worker, in order.
seen_batches = []


def record_batches(make_step):
    """Wraps `distributed._distributed_step` so that each train step first
    records its batch's target rows."""

    def recording_step(model, step_function, strategy):
        if step_function != model.train_step:
            return make_step(model, step_function, strategy)

        def step(batch):
            targets = batch[1]
            tf.py_function(lambda t: seen_batches.append(t.numpy().tolist()), [targets], [])
            return step_function(batch)

        return make_step(model, step, strategy)

    return recording_step


def main(out):
    # Dropout draws each replica's masks apart from one device's; without it
    # the two workers must end where one device does (the test checks).
    registry.PRESETS["rnnsearch_small"]["model"]["dropout"] = 0.0
    distributed._distributed_step = record_batches(distributed._distributed_step)
    run = training.train(
        "rnnsearch_small", out, train_size=64, valid_size=16, epochs=2,
        batch_size=16, verbose=0, evaluate_test=False, strategy="multi-worker",
    )
    import h5py

    digest = hashlib.sha256()
    with h5py.File(run / runs.WEIGHTS, "r") as weights:
        weights.visititems(
            lambda name, item: digest.update(np.asarray(item).tobytes())
            if isinstance(item, h5py.Dataset) else None
        )
    print("RESULT " + json.dumps(
        {"run": str(run), "weights": digest.hexdigest(), "batches": seen_batches}
    ))


if __name__ == "__main__":
    main(sys.argv[1])
