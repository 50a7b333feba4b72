"""Shared pytest set-up: one Keras backend per process (KERAS_BACKEND)."""

import os
from pathlib import Path

import keras
import numpy as np
import pytest


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend {keras.backend.backend()}"


LAYER_TESTS = Path(__file__).parent / "layers"
TRAINING_TESTS = Path(__file__).parent / "zoo" / "training"
# tests/run_all.py sets it in every run but one, so that the tests marked
# `backend_independent` run once per suite; a run of your own runs them all.
SKIP_BACKEND_INDEPENDENT = "ZOO_TEST_SKIP_BACKEND_INDEPENDENT"


def pytest_collection_modifyitems(config, items):
    _keep_this_share(config, items)
    if os.environ.get(SKIP_BACKEND_INDEPENDENT):
        once = pytest.mark.skip(reason="backend-independent: runs once per suite, in another run")
        for item in items:
            if "backend_independent" in item.keywords:
                item.add_marker(once)
    if keras.backend.backend() == "tensorflow":
        return
    skip = pytest.mark.skip(reason="TensorFlow-only; runs in the tensorflow process")
    for item in items:
        if "tensorflow_only" in item.keywords:
            item.add_marker(skip)


# ZOO_TEST_SHARE -> (folder, whether to keep the tests under it or the rest):
# tests/run_all.py splits a long run in two with it, so that no run goes on
# alone on one core long after the others.
SHARES = {
    "layers": (LAYER_TESTS, True),
    "others": (LAYER_TESTS, False),
    "training": (TRAINING_TESTS, True),
    "not-training": (TRAINING_TESTS, False),
}


def _keep_this_share(config, items):
    """Keeps the share of `items` that ZOO_TEST_SHARE names (SHARES)."""
    share = os.environ.get("ZOO_TEST_SHARE")
    if not share:
        return
    if share not in SHARES:
        raise pytest.UsageError(f"ZOO_TEST_SHARE must be one of {sorted(SHARES)}; received {share!r}")
    folder, inside = SHARES[share]
    keep = [item for item in items if (folder in Path(item.path).parents) == inside]
    dropped = [item for item in items if (folder in Path(item.path).parents) != inside]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same random state, on every backend."""
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)


def pytest_configure(config):
    # Keras' own test files, which tests/layers runs on our layers, use it.
    config.addinivalue_line(
        "markers", "requires_trainable_backend: Keras' marker of tests that train"
    )
