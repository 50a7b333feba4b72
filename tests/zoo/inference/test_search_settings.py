"""`SearchSettings`, the one check of the search's arguments, and
`choose_search`'s cache of the searches it builds."""

import numpy as np
import pytest

from zoo.inference.search_settings import STOPPING_RULES
from zoo.inference.search_settings import SearchSettings
from zoo.inference.search_settings import SearchSettingsError


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"beam": 0}, "beam must be an int >= 1; received 0"),
        ({"beam": True}, "beam must be an int >= 1; received True"),
        ({"beam": 2.0}, "beam must be an int >= 1; received 2.0"),
        ({"length_penalty": -1}, "length_penalty must be a number >= 0; received -1"),
        ({"coverage_penalty": "0.2"}, "coverage_penalty must be a number >= 0; received '0.2'"),
        ({"length_penalty": float("nan")}, "length_penalty must be a number >= 0; received nan"),
        ({"stopping": "never"}, "stopping must be one of early, exact; received 'never'"),
        ({"n_best": -1}, "n_best must be an int >= 0; received -1"),
        ({"beam": 2, "n_best": 3}, "n_best 3 needs beam 3 or more (got beam 2)"),
        ({"max_length": 0}, "max_length must be an int >= 1; received 0"),
    ],
)
def test_a_bad_argument_is_one_line_naming_it(arguments, message):
    with pytest.raises(SearchSettingsError) as raised:
        SearchSettings(**arguments)
    assert str(raised.value) == message
    assert isinstance(raised.value, ValueError)


def test_numbers_are_normalized():
    settings = SearchSettings(beam=np.int64(3), length_penalty=1, coverage_penalty=np.float32(0.5))
    assert (settings.beam, settings.length_penalty, settings.coverage_penalty) == (3, 1.0, 0.5)
    assert type(settings.beam) is int and type(settings.length_penalty) is float


def test_checked_raises_the_callers_error_with_the_same_message():
    class CallersError(ValueError):
        pass

    with pytest.raises(CallersError, match="received 'never'"):
        SearchSettings.checked(CallersError, beam=2, stopping="never")
    assert SearchSettings.checked(CallersError, beam=2) == SearchSettings(beam=2)


def test_the_command_line_names_its_flags():
    from zoo.cli.search_options import FlagSearchSettings

    with pytest.raises(SearchSettingsError) as raised:
        FlagSearchSettings(beam=2, n_best=3)
    assert str(raised.value) == "--n-best 3 needs --beam 3 or more (got --beam 2)"
    with pytest.raises(SearchSettingsError, match="--beam-stop must be one of"):
        FlagSearchSettings(stopping="never")


def test_the_search_key_leaves_out_what_does_not_change_the_search():
    assert SearchSettings(beam=1, length_penalty=0.2, stopping="exact").search_key == SearchSettings()
    assert SearchSettings(beam=3, n_best=2).search_key == SearchSettings(beam=3)
    assert SearchSettings(beam=3, stopping="exact").search_key != SearchSettings(beam=3)
    assert SearchSettings(max_length=5).search_key == SearchSettings(max_length=5)


def test_the_rules_are_the_recipes():
    from zoo.recipes.decoding import STOPPING_RULES as RECIPE_RULES

    assert STOPPING_RULES == RECIPE_RULES


def test_translate_refuses_bad_arguments_before_decoding():
    from zoo.inference.translator import Translator

    translator = Translator(None, None, None)  # nothing of the model is reached
    with pytest.raises(SearchSettingsError, match=r"n_best 3 needs beam 3 or more \(got beam 2\)"):
        translator.translate(["a dog ."], beam=2, n_best=3)
    with pytest.raises(SearchSettingsError, match="beam must be an int >= 1"):
        translator.translate(["a dog ."], beam=0)


def test_choose_search_builds_a_search_once_per_settings():
    from zoo.inference.search_choice import choose_search

    model, cache = object(), {}  # the searches are built, not run
    greedy = choose_search(model, SearchSettings(), cache)
    assert choose_search(model, SearchSettings(length_penalty=0.0), cache) is greedy
    beam = choose_search(model, SearchSettings(beam=3), cache)
    assert choose_search(model, SearchSettings(beam=3, n_best=3), cache) is beam
    assert choose_search(model, SearchSettings(beam=3, stopping="exact"), cache) is not beam
    assert len(cache) == 3
