"""Argparse value types shared by the `zoo` and `zoo bench` command lines.

A module of its own, free of Keras, so that both parsers use one definition
without importing each other.
"""

import argparse
import math


def _number(text, convert, accept, expected):
    """`convert(text)` if `accept` holds for it, else argparse's one-line error."""
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not accept(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text):
    return _number(text, int, lambda value: value > 0, "a positive integer")


def non_negative_int(text):
    return _number(text, int, lambda value: value >= 0, "an integer >= 0")


def non_negative_float(text):
    return _number(text, float, lambda value: value >= 0, "a number >= 0")


def positive_float(text):
    """A finite float > 0, such as a learning rate."""
    return _number(text, float, lambda value: 0 < value < math.inf, "a finite number > 0")


def fraction(text):
    """A float in [0, 1): a probability mass such as label smoothing."""
    return _number(text, float, lambda value: 0 <= value < 1, "a number in [0, 1)")
