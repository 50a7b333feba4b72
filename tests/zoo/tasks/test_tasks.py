"""zoo.tasks: the Task objects, their lookup and the run-directory check."""

import json

import pytest

from zoo import registry
from zoo import runs
from zoo.errors import ZooUserError
from zoo.tasks import CAPTIONING
from zoo.tasks import TRANSLATION
from zoo.tasks import check_run_directory
from zoo.tasks import task_for

pytestmark = pytest.mark.backend_independent


def test_every_preset_has_the_task_of_its_recipe():
    for name in registry.presets():
        preset = registry.get_preset(name)
        expected = registry.task_of(preset["recipe"])
        assert task_for(preset).name == expected, name
        assert task_for(expected) is task_for(preset)


def test_a_config_or_manifest_names_its_task():
    assert task_for({"task": "captioning", "recipe": "rnnsearch"}) is CAPTIONING
    assert task_for({"task": "translation"}) is TRANSLATION
    assert task_for({}) is TRANSLATION


def test_each_task_knows_its_run_files_and_command():
    old_run = {"training": {"data": "multi30k"}}  # before "tokenizer" was written
    assert TRANSLATION.run_files(old_run) == (
        runs.CONFIG, runs.SOURCE_VOCABULARY, runs.TARGET_VOCABULARY, runs.WEIGHTS
    )
    assert CAPTIONING.run_files({}) == (runs.CONFIG, runs.TARGET_VOCABULARY, runs.WEIGHTS)
    sentencepiece = {"training": {"tokenizer": "sentencepiece"}}
    assert TRANSLATION.run_files(sentencepiece) == (
        runs.CONFIG, "source.model", "target.model", runs.WEIGHTS
    )
    shared = {"training": {"tokenizer": "sentencepiece", "shared_vocabulary": True}}
    assert TRANSLATION.vocabulary_files(shared) == {
        "source": "shared.model", "target": "shared.model"
    }
    assert TRANSLATION.run_files(shared) == (runs.CONFIG, "shared.model", runs.WEIGHTS)
    assert (TRANSLATION.command, CAPTIONING.command) == ("translate", "caption")


@pytest.mark.parametrize(
    "training, tokenizer, expected",
    [
        ({"data": "synthetic"}, None, "wordpiece"),
        ({"data": "train.en,train.de"}, None, "sentencepiece"),
        ({"data": "synthetic", "tokenizer": "sentencepiece"}, None, "sentencepiece"),
        ({"data": "multi30k", "tokenizer": "sentencepiece"}, "wordpiece", "wordpiece"),
    ],
)
def test_translation_tokenizer_defaults_to_sentencepiece_on_a_real_corpus(
    training, tokenizer, expected
):
    settled = TRANSLATION.tokenizer_settings(training, tokenizer)
    assert settled["tokenizer"] == expected and settled["shared_vocabulary"] is False
    assert TRANSLATION.tokenizer_settings(training, tokenizer, True)["shared_vocabulary"]


def test_captioning_refuses_sentencepiece_in_one_line():
    assert CAPTIONING.tokenizer_settings({"data": "flickr8k"})["tokenizer"] == "wordpiece"
    with pytest.raises(ZooUserError, match="captioning run trains wordpiece.*'sentencepiece'"):
        CAPTIONING.tokenizer_settings({"data": "synthetic"}, "sentencepiece")


def test_open_passes_the_tokenizers_in_the_wrapper_order():
    def wrapper(*arguments):
        return arguments

    tokenizers = {"source": "S", "target": "T"}
    assert TRANSLATION.open("M", tokenizers, "C", wrapper=wrapper) == ("M", "S", "T", "C")
    assert CAPTIONING.open("M", tokenizers, "C", wrapper=wrapper) == ("M", "T", "C")


@pytest.mark.parametrize("task", [TRANSLATION, CAPTIONING])
def test_run_directory_check_names_the_missing_files_of_its_task(tmp_path, task):
    (tmp_path / runs.CONFIG).write_text(json.dumps({"task": task.name}))
    with pytest.raises(runs.RunDirectoryError, match="incomplete") as error:
        check_run_directory(tmp_path)
    files = task.run_files({"task": task.name})
    assert str(error.value).endswith(
        f"missing {', '.join(files[1:])} (did its training finish?)"
    )
    for name in files[1:]:
        (tmp_path / name).write_text("")
    assert check_run_directory(tmp_path) == tmp_path


def test_a_missing_run_directory_is_refused(tmp_path):
    with pytest.raises(runs.RunDirectoryError, match="does not exist"):
        check_run_directory(tmp_path / "none")
