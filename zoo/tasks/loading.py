"""The one loader: a run directory of `zoo train` reopened as its task's
inference wrapper (`zoo.load`)."""

from zoo import registry
from zoo import runs
from zoo.tasks import check_run_directory
from zoo.tasks import task_for


def load_tokenizers(folder, files):
    """{role: tokenizer} of the vocabulary `files` ({role: name}) in
    `folder`, each file loaded once (roles that share it share the tokenizer),
    the tokenizer picked by the file's suffix (`zoo.data.load_tokenizer`)."""
    from zoo.data import load_tokenizer  # TensorFlow-based: loaded only here

    loaded = {name: load_tokenizer(folder / name) for name in set(files.values())}
    return {role: loaded[name] for role, name in files.items()}


def load(run_dir):
    """A run directory reopened: a `zoo.inference.translator.Translator`, or a
    `zoo.inference.captioner.Captioner` for a captioning recipe."""
    run_dir = check_run_directory(run_dir)
    config = runs.read_json(run_dir / runs.CONFIG)
    task = task_for(config)
    model = registry.build_model(config)
    try:
        model.load_weights(run_dir / runs.WEIGHTS)
    # h5py reports a damaged file as a KeyError or a RuntimeError (a run
    # without a manifest reaches here damaged).
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise runs.RunDirectoryError(
            f"cannot load the weights in {run_dir / runs.WEIGHTS}: {error}"
        ) from None
    tokenizers = load_tokenizers(run_dir, task.vocabulary_files(config))
    return task.open(model, tokenizers, config)
