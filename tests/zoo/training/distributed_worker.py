"""One worker of test_distributed.py's multi-worker run (TF_CONFIG set by
the test): trains rnnsearch_small tiny with --strategy multi-worker and
prints, as one JSON line, where it wrote its run and a digest of its final
weights (read before exit: a non-chief's directory is deleted at exit)."""

import hashlib
import json
import sys

import numpy as np

from zoo.training import loop as training
from zoo.recipes.rnnsearch import RNNSearch  # noqa: F401 (registers the class)
from zoo import runs


def main(out):
    run = training.train(
        "rnnsearch_small", out, train_size=64, epochs=2, batch_size=16,
        verbose=0, evaluate_test=False, strategy="multi-worker",
    )
    import h5py

    digest = hashlib.sha256()
    with h5py.File(run / runs.WEIGHTS, "r") as weights:
        weights.visititems(
            lambda name, item: digest.update(np.asarray(item).tobytes())
            if isinstance(item, h5py.Dataset) else None
        )
    print("RESULT " + json.dumps({"run": str(run), "weights": digest.hexdigest()}))


if __name__ == "__main__":
    main(sys.argv[1])
