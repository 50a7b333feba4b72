"""A Keras user installs only Keras: `pip install keras-attention-zoo` needs
keras and numpy, and a command that needs the TensorFlow extra says so."""

import ast
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import warnings
from pathlib import Path

import keras
import pytest
from packaging.version import Version

from cli_checks import assert_one_line_error
from cli_checks import run_cli

from zoo import cli
from zoo import extras
from zoo import registry

REPOSITORY = Path(__file__).resolve().parents[2]
STANDARD_LIBRARY = sys.stdlib_module_names


def imported_modules(path, module_level_only=False):
    """The absolute module names that the Python file `path` imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = tree.body if module_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_layers_and_recipes_import_only_keras_numpy_and_themselves():
    # Any import, also one inside a function: each may run for a user who
    # has only keras and numpy.
    files = sorted((REPOSITORY / "layers").rglob("*.py")) + sorted(
        (REPOSITORY / "recipes").rglob("*.py")
    )
    assert len(files) > 10, files
    foreign = {
        f"{path.relative_to(REPOSITORY)}: {module}"
        for path in files
        for module in imported_modules(path)
        if module.split(".")[0] not in STANDARD_LIBRARY
        and module.split(".")[0] not in ("keras", "numpy")
        and not module.startswith(("zoo.layers", "zoo.recipes"))
    }
    assert not foreign, sorted(foreign)


def test_every_recipe_of_the_registry_is_importable_from_zoo_recipes():
    # `from zoo.recipes import RNNSearch`, as `from zoo.layers import ...`.
    import zoo.recipes

    for recipe, location in registry.RECIPES.items():
        class_name = location.split(":")[1]
        assert class_name in zoo.recipes.__all__, recipe
        assert getattr(zoo.recipes, class_name) is registry.recipe_class(recipe), recipe


def test_the_zoo_package_itself_imports_nothing_at_import():
    # `import zoo.layers` runs zoo/__init__.py first.
    imports = list(imported_modules(REPOSITORY / "zoo" / "__init__.py", module_level_only=True))
    assert all(module.split(".")[0] in STANDARD_LIBRARY for module in imports), imports


@pytest.mark.parametrize("missing", ["tensorflow", "keras_nlp", "sacrebleu"])
@pytest.mark.parametrize("command", ["train", "demo"])
def test_a_command_without_the_extra_says_which_to_install(
    capsys, monkeypatch, tmp_path, missing, command
):
    # `import missing` fails, and find_spec finds nothing.
    monkeypatch.setitem(sys.modules, missing, None)
    out = tmp_path / "run"
    argv = ["train", "rnnsearch_small"] if command == "train" else ["demo"]
    code, _, err = run_cli(capsys, *argv, "--out", str(out))
    assert_one_line_error(code, err, f"zoo {command}: error:", missing, extras.INSTALL_COMMAND)
    assert not out.exists(), "the command started before it found the extra missing"


def test_an_import_of_the_extra_deep_inside_a_command_is_reported_in_one_line(capsys, monkeypatch):
    # `zoo bench` needs the extra for some parts only: there, the import
    # itself is what finds it missing.
    monkeypatch.setitem(sys.modules, "sacrebleu", None)
    monkeypatch.setitem(cli.COMMANDS, "bench", lambda args: __import__("sacrebleu.metrics"))
    code, _, err = run_cli(capsys, "bench", "decode")
    assert_one_line_error(code, err, "zoo bench: error:", "sacrebleu", extras.INSTALL_COMMAND)


def test_a_module_missing_from_zoo_itself_stays_a_bug_with_its_traceback(capsys, monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "bench", lambda args: __import__("zoo_no_such_module"))
    with pytest.raises(ModuleNotFoundError, match="zoo_no_such_module"):
        cli.main(["bench", "decode"])


@pytest.mark.backend_independent
def test_setuptools_reads_the_project_table_without_a_deprecation_warning():
    # A deprecated form (the license as a table) is printed on every install.
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution
    from setuptools.warnings import SetuptoolsDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", SetuptoolsDeprecationWarning)
        distribution = apply_configuration(Distribution(), REPOSITORY / "pyproject.toml")
    assert distribution.metadata.license_expression == "Apache-2.0"
    assert [Path(name).name for name in distribution.metadata.license_files] == ["LICENSE"]


def test_every_package_of_the_tree_is_in_the_wheel():
    # setuptools installs only the packages listed; a new subpackage left
    # out works in an editable install and is missing from the wheel.
    configuration = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(configuration["packages"])
    in_tree = set()
    for package, folder in configuration["package-dir"].items():
        for init in (REPOSITORY / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPOSITORY / folder).parts
            in_tree.add(".".join((package, *parts)))
    assert in_tree - listed == set(), "add these to pyproject's [tool.setuptools] packages"


def test_the_layer_demo_and_the_listing_need_only_keras():
    parse = cli.build_parser().parse_args
    assert not cli.needs_tensorflow_extra(parse(["demo", "--layers"]))
    assert not cli.needs_tensorflow_extra(parse(["list"]))
    assert cli.needs_tensorflow_extra(parse(["demo"]))


# Runs in the fresh venv on jax: the installed package (not this checkout),
# every recipe module, and a model of our layers trained with fit, with no
# TensorFlow anywhere.
FRESH_VENV_PROGRAM = """
import importlib
import importlib.metadata
import importlib.util
import json
import pkgutil
import sys

assert importlib.util.find_spec("tensorflow") is None, "TensorFlow is installed"
import keras
import numpy as np
from packaging.requirements import Requirement

import zoo.layers
import zoo.recipes

for info in pkgutil.iter_modules(zoo.recipes.__path__):
    importlib.import_module("zoo.recipes." + info.name)

# A toy task: the tokens reversed.
rng = np.random.default_rng(0)
vocabulary, length = 7, 5
source = rng.integers(1, vocabulary, size=(64, length))
target = source[:, ::-1]
tokens = keras.Input((length,), dtype="int32")
memory = keras.layers.GRU(12, return_sequences=True)(keras.layers.Embedding(vocabulary, 8)(tokens))
context = zoo.layers.AdditiveAttention(units=8)(memory, memory)
attended = zoo.layers.LuongAttention(score="general")(context, memory)
logits = keras.layers.Dense(vocabulary)(keras.layers.Concatenate()([memory, context, attended]))
model = keras.Model(tokens, logits)
model.compile(
    optimizer=keras.optimizers.Adam(1e-2),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
history = model.fit(source, target, batch_size=16, epochs=4, verbose=0)

requirements = [Requirement(r) for r in importlib.metadata.requires("keras-attention-zoo")]
print(json.dumps({
    "backend": keras.backend.backend(),
    "zoo_file": zoo.__file__,
    "requires": sorted(r.name for r in requirements if r.marker is None),
    "tensorflow_extra": sorted(
        r.name for r in requirements if r.marker and r.marker.evaluate({"extra": "tensorflow"})
    ),
    "loss": history.history["loss"],
    "tensorflow_loaded": sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"),
}))
"""


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, timeout=600, **kwargs)


def installed_closure(requirements):
    """The distributions installed here that `requirements` need, with all
    they need in turn (extras and markers evaluated), where several
    versions are on the path the newest that fits."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed = {}
    for distribution in importlib.metadata.distributions():
        name = canonicalize_name(distribution.metadata["Name"] or "")
        installed.setdefault(name, []).append(distribution)
    found, seen = {}, set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        fitting = [
            distribution
            for distribution in installed.get(name, [])
            if requirement.specifier.contains(distribution.version, prereleases=True)
        ]
        if not fitting:
            pytest.skip(f"{requirement} is not installed here, to be put in the fresh venv")
        distribution = found.setdefault(
            name, max(fitting, key=lambda d: Version(d.version))
        )
        for text in distribution.requires or []:
            needed = Requirement(text)
            extras_asked = ("", *requirement.extras)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in extras_asked
            ):
                pending.append(needed)
    return list(found.values())


def link_into(site_packages, distributions):
    """Makes `distributions` installed in another environment's
    site-packages by linking their top-level files and folders."""
    for distribution in distributions:
        for top in sorted({file.parts[0] for file in distribution.files or []}):
            if top in ("..", "__pycache__"):  # scripts in bin/; bytecode is rebuilt
                continue
            link = site_packages / top
            target = Path(distribution.locate_file(top)).resolve()
            if link.is_symlink():
                assert link.resolve() == target, f"{top} comes from two distributions"
            else:
                link.symlink_to(target)


@pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="builds a fresh venv once per suite: in the torch process, "
    "which has the most spare time",
)
def test_installs_without_the_extra_and_trains_a_model_of_our_layers_on_jax(tmp_path):
    # The package as pip builds it, from a copy, so no build output lands in the checkout.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "layers", "recipes", "zoo"):
        if (REPOSITORY / name).is_dir():
            shutil.copytree(
                REPOSITORY / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(REPOSITORY / name, source / name)
    venv = tmp_path / "venv"
    created = run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert created.returncode == 0, created.stderr[-3000:]
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")

    # What a JAX user has, and our build backend: this suite's own installed
    # copies, linked in, so that nothing is downloaded and the versions are
    # the ones tested here.
    pyproject = tomllib.loads((source / "pyproject.toml").read_text())
    wanted = ["keras", "numpy", "jax[cpu]", *pyproject["build-system"]["requires"]]
    paths = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    link_into(Path(paths.stdout.strip()), installed_closure(wanted))

    # --no-index: pip may take nothing more than what the venv holds, so every
    # requirement must be met by keras and numpy.
    ours = run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-index",
         "--no-build-isolation", str(source)],
        env=env,
    )
    assert ours.returncode == 0, "keras-attention-zoo needs more than keras and numpy:\n" + (
        ours.stdout + ours.stderr
    )[-3000:]

    program = run([python, "-c", textwrap.dedent(FRESH_VENV_PROGRAM)], env=env, cwd=tmp_path)
    assert program.returncode == 0, program.stderr[-3000:]
    report = json.loads(program.stdout.strip().splitlines()[-1])
    assert report["backend"] == "jax"
    assert Path(report["zoo_file"]).is_relative_to(venv), report["zoo_file"]
    assert report["requires"] == ["keras", "numpy"]
    assert {"tensorflow", "tensorflow-text", "keras-nlp", "sentencepiece"} <= set(
        report["tensorflow_extra"]
    )
    assert report["tensorflow_loaded"] == []
    losses = report["loss"]
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses

    # The installed `zoo` command, without the extra, says in one line what to install.
    command = run(
        [str(venv / "bin" / "zoo"), "train", "rnnsearch_small"], env=env, cwd=tmp_path
    )
    lines = command.stderr.strip().splitlines()
    assert command.returncode == cli.USER_ERROR and len(lines) == 1, command.stderr[-3000:]
    assert extras.INSTALL_COMMAND in lines[0] and "tensorflow" in lines[0]
    assert not (tmp_path / "runs").exists()
