"""zoo.tasks: the Task objects, their lookup and the run-directory check."""

import json

import pytest

from zoo import registry
from zoo import runs
from zoo.tasks import CAPTIONING
from zoo.tasks import TRANSLATION
from zoo.tasks import check_run_directory
from zoo.tasks import task_for


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
    assert TRANSLATION.run_files == (
        runs.CONFIG, runs.SOURCE_VOCABULARY, runs.TARGET_VOCABULARY, runs.WEIGHTS
    )
    assert CAPTIONING.run_files == (runs.CONFIG, runs.TARGET_VOCABULARY, runs.WEIGHTS)
    assert (TRANSLATION.command, CAPTIONING.command) == ("translate", "caption")


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
    assert str(error.value).endswith(
        f"missing {', '.join(task.run_files[1:])} (did its training finish?)"
    )
    for name in task.run_files[1:]:
        (tmp_path / name).write_text("")
    assert check_run_directory(tmp_path) == tmp_path


def test_a_missing_run_directory_is_refused(tmp_path):
    with pytest.raises(runs.RunDirectoryError, match="does not exist"):
        check_run_directory(tmp_path / "none")
