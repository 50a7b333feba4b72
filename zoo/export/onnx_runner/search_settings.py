"""The search settings (beam width, length and coverage penalties, stopping
rule): their defaults, and the one check of them that the searches, the
servers, the command line and `zoo export` all go through."""

import numpy as np

from .layout import RunnerError

# `zoo.recipes.decoding.STOPPING_RULES`.
STOPPING_RULES = ("early", "exact")

# The search settings a manifest holds (`zoo export`'s options), and the
# Python API's defaults for a manifest without them.
DEFAULT_SEARCH = {"beam": 1, "length_penalty": 0.6, "coverage_penalty": 0.0, "stopping": "early"}


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


# Each setting: whether a value is good, and what it must be, in the
# runner's words and in `zoo.recipes.decoding.beam_search`'s (whose
# argument names are the keys of `_DECODING_NAMES`).
_RULES = {
    "beam": (lambda v: _is_int(v) and v >= 1, "an int >= 1", "a positive int"),
    "length_penalty": (lambda v: _is_number(v) and v >= 0, "a number >= 0", "a float >= 0"),
    "coverage_penalty": (lambda v: _is_number(v) and v >= 0, "a number >= 0", "a float >= 0"),
    "stopping": (
        lambda v: isinstance(v, str) and v in STOPPING_RULES,
        f"one of {', '.join(STOPPING_RULES)}",
        f"one of {STOPPING_RULES}",
    ),
}
_DECODING_NAMES = {"beam": "beam_width"}


def _first_bad(settings):
    """The name of the first setting of `settings` (a dict) that breaks its
    rule, or None."""
    return next((name for name, value in settings.items() if not _RULES[name][0](value)), None)


def check_search(settings, error=None):
    """`DEFAULT_SEARCH` with the settings of `settings` (a dict of some of
    its keys) over it, checked: a one-line `error` (an exception class,
    default `RunnerError`) naming the first bad one. The servers, the
    command line and `zoo export` go through it."""
    error = error or RunnerError
    unknown = sorted(set(settings) - set(DEFAULT_SEARCH))
    if unknown:
        raise error(
            f"unknown search setting {', '.join(map(repr, unknown))}; "
            f"the settings are {', '.join(DEFAULT_SEARCH)}"
        )
    bad = _first_bad(settings)
    if bad is not None:
        raise error(f"{bad} must be {_RULES[bad][1]}; received {settings[bad]!r}")
    return {**DEFAULT_SEARCH, **settings}


def check_beam_arguments(beam_width, length_penalty, coverage_penalty, stopping):
    """`check_search`'s rules for `beam_search`'s arguments, with
    `zoo.recipes.decoding.beam_search`'s ValueError messages."""
    settings = {
        "beam": beam_width,
        "length_penalty": length_penalty,
        "coverage_penalty": coverage_penalty,
        "stopping": stopping,
    }
    bad = _first_bad(settings)
    if bad is not None:
        name = _DECODING_NAMES.get(bad, bad)
        raise ValueError(f"`{name}` must be {_RULES[bad][2]}. Received: {name}={settings[bad]!r}")
