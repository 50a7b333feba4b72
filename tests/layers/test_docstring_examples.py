"""Every docstring example of zoo.layers runs, on every backend, and prints
what its docstring says (docs/design.md, "Code like Keras' own": "the tests
run the examples")."""

import importlib

import pytest

import zoo.layers
from layer_checks import run_docstring_examples

# Base classes a user subclasses rather than calls: their subclasses'
# docstrings hold the examples.
BASE_CLASSES = {"AttentionDecoder", "BaseAttention"}
MODULES = sorted(
    {getattr(zoo.layers, name).__module__ for name in zoo.layers.__all__ if name not in BASE_CLASSES}
)


def test_every_public_name_has_an_example():
    missing = [
        name
        for name in zoo.layers.__all__
        if name not in BASE_CLASSES and ">>> " not in (getattr(zoo.layers, name).__doc__ or "")
    ]
    assert not missing, f"public names whose docstring has no example: {missing}"


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name):
    run_docstring_examples(importlib.import_module(module_name))
