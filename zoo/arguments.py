"""Argparse value types shared by the `zoo` and `zoo bench` command lines.

A module of its own, free of Keras, so that both parsers use one definition
without importing each other.
"""

import argparse

# `zoo.recipes.decoding.STOPPING_RULES`, repeated so that the parsers need
# no Keras (a test holds the two together).
BEAM_STOPPING_RULES = ("early", "exact")


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value
