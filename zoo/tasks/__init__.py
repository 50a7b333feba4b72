"""The tasks a recipe is trained for, as objects: translation and captioning.

Each `Task` knows what its data, run directory, inference wrapper and metrics
need (see `zoo.tasks.base.Task`), so that the modules around it ask the task
instead of testing its name; `task_for` finds the task of a preset, a run's
config or an ONNX export's manifest. Keras-free at import: the command line
checks a run directory with it before TensorFlow loads.
"""

from pathlib import Path

from zoo import registry
from zoo import runs
from zoo.tasks.captioning import CAPTIONING
from zoo.tasks.translation import TRANSLATION

TASKS = {task.name: task for task in (TRANSLATION, CAPTIONING)}


def task_for(description):
    """The `Task` of `description`: a task name, or a dict with a "task"
    entry (a run's config.json, an ONNX manifest) or a "recipe" (a preset).
    A config that names neither is translation's, as runs were before the
    task was written down."""
    if isinstance(description, str):
        return TASKS[description]
    if "task" in description:
        return TASKS[description["task"]]
    if "recipe" in description:
        return TASKS[registry.task_of(description["recipe"])]
    return TRANSLATION


def check_run_directory(run_dir):
    """The run directory as a Path, or a one-line error saying what is
    missing, damaged (see `zoo.runs.check_manifest`) or unknown."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise runs.RunDirectoryError(f"run directory {str(run_dir)!r} does not exist")
    config_path = run_dir / runs.CONFIG
    config = runs.read_json(config_path) if config_path.is_file() else {}
    _check_names(config, config_path)
    missing = [name for name in task_for(config).run_files(config) if not (run_dir / name).is_file()]
    if missing:
        raise runs.RunDirectoryError(
            f"run directory {str(run_dir)!r} is incomplete: missing "
            f"{', '.join(missing)} (did its training finish?)"
        )
    runs.check_manifest(run_dir)
    return run_dir


def _check_names(config, path):
    """Refuses a run config naming a recipe or task this zoo does not have
    (a run of a newer zoo, or a hand-edited file)."""
    for key, known in (("recipe", registry.RECIPES), ("task", TASKS)):
        if key in config and config[key] not in known:
            raise runs.RunDirectoryError(
                f"{path} names an unknown {key} {config[key]!r}; the known {key}s are "
                f"{', '.join(known)}"
            )


def write_run_manifest(run_dir):
    """Writes the manifest of the files `zoo.load` reads from the finished
    run `run_dir` (`zoo.runs.write_manifest`); call it after the last of them."""
    run_dir = Path(run_dir)
    config = runs.read_json(run_dir / runs.CONFIG)
    runs.write_manifest(run_dir, task_for(config).run_files(config))
