"""Shared pytest set-up: one Keras backend per process (KERAS_BACKEND)."""

import keras
import numpy as np
import pytest


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend {keras.backend.backend()}"


def pytest_collection_modifyitems(config, items):
    if keras.backend.backend() == "tensorflow":
        return
    skip = pytest.mark.skip(reason="TensorFlow-only; runs in the tensorflow process")
    for item in items:
        if "tensorflow_only" in item.keywords:
            item.add_marker(skip)


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
