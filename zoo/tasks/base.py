"""What every task is: the `Task` base of translation and captioning, and
the `TaskData` a task gives training."""

from zoo import runs
from zoo.errors import ZooUserError
from zoo.training.config import TrainingError
from zoo.training.config import of_run


class TaskData:
    """What training needs from a task's data (see `Task.prepare_data`).

    `epoch_size` is the `zoo.data.streaming.EpochSize` of a streamed split;
    without it, the batches and target tokens of an epoch are counted on
    `train_data(None)` when first asked for.
    """

    def __init__(
        self, train_data, valid_data, vocabularies, examples, evaluate, validate=None,
        epoch_size=None, vocabulary_seconds=None,
    ):
        # epochs (a range, or None for one) -> tf.data of ({inputs}, target_out)
        # batches; see `zoo.data.pipeline.epoch_batches`.
        self.train_data = train_data
        self.valid_data = valid_data
        self.vocabularies = vocabularies  # model config entries
        self.examples = examples  # {"train_pairs": N} or {"train_images": N, ...}
        self.evaluate = evaluate  # (model, config) -> metrics dict, or None
        # (model, config) -> the validation split's greedy BLEU, or None.
        self.validate = validate
        self._epoch_size = epoch_size
        # How long the vocabularies took (learned or reloaded), or None.
        self.vocabulary_seconds = vocabulary_seconds

    @property
    def batches_per_epoch(self):
        """The batches of an epoch (an int; estimated for a large stream)."""
        return self._size()[0]

    @property
    def target_tokens_per_epoch(self):
        """The target tokens of an epoch's batches, [EOS] included."""
        return self._size()[1]

    @property
    def epoch_size_estimated(self):
        """Whether the two above are scaled from a sample of a stream."""
        return bool(self._epoch_size and self._epoch_size.estimated)

    def _size(self):
        if self._epoch_size is None:
            import numpy as np

            from zoo.data.streaming import EpochSize

            batches, tokens = 0, 0
            for _, targets in self.train_data(None).as_numpy_iterator():
                batches += 1
                tokens += int(np.count_nonzero(targets))
            self._epoch_size = EpochSize(batches, tokens, left_out={}, estimated=False)
        return self._epoch_size.batches, self._epoch_size.target_tokens


class Task:
    """A task a recipe is trained for: its data, run directory, inference
    wrapper and metrics. Subclasses set the attributes and the methods that
    raise NotImplementedError here."""

    # config.json's and the ONNX manifest's "task".
    name = None
    # The `zoo` command that decodes a run of this task.
    command = None
    # The roles of the run's vocabularies, in the order the task's inference
    # wrapper takes its tokenizers.
    roles = ()
    # The tokenizers the task can train (`zoo.runs.TOKENIZERS`).
    tokenizers = ("wordpiece",)
    # What the error calls the embedded data a run was trained on.
    synthetic_data = None

    def vocabulary_files(self, config):
        """Role -> file name of the vocabularies of a run of `config` (its
        config.json, or an ONNX manifest's config)."""
        return runs.vocabulary_files(self.roles, of_run(config))

    def run_files(self, config):
        """The files a finished run directory of `config` holds."""
        names = dict.fromkeys(self.vocabulary_files(config).values())
        return (runs.CONFIG, *names, runs.WEIGHTS)

    def default_tokenizer(self, training):
        """The tokenizer a training of these settings gets unless it names one."""
        return "wordpiece"

    def settled(self, training):
        """The `TrainingConfig` `training` with its tokenizer settled: the
        one it names, else the task's default; a tokenizer the task can't
        train is refused."""
        tokenizer = training.tokenizer or self.default_tokenizer(training)
        if tokenizer not in self.tokenizers:
            raise TrainingError(
                f"a {self.name} run trains {' or '.join(self.tokenizers)} vocabularies; "
                f"received tokenizer {tokenizer!r}"
            )
        return training.overridden(tokenizer=tokenizer)

    def load_splits(self, training):
        """(train, valid, test) examples for a preset's training settings.

        `training.data` is "synthetic" (the embedded data) or a corpus
        spec; from a real corpus the last `valid_size` examples are held out
        for validation and there is no test split (evaluate with `zoo
        evaluate DIR --data TEST`).
        """
        if training.is_synthetic:
            splits = self.synthetic_splits(training)
            return splits["train"], splits["valid"], splits["test"]
        return hold_out_validation(self.read_examples(training.data), training)

    def synthetic_splits(self, training):
        """{"train", "valid", "test"}: the embedded data's splits."""
        raise NotImplementedError

    def read_examples(self, data_spec):
        """The examples of the corpus spec `data_spec`."""
        raise NotImplementedError

    def prepare_data(self, training, splits, out, drop_remainder=False, fixed_shapes=False):
        """`splits` made into the `TaskData` training reads; the run's
        vocabularies are learned (or reloaded when resuming) into `out`."""
        raise NotImplementedError

    def wrapper(self):
        """The inference class of a run of this task (`Translator`, `Captioner`)."""
        raise NotImplementedError

    def speed_metrics(self, epochs_run, task_data, seconds):
        """Task-specific throughput figures of a training, for metrics.json."""
        return {}

    def open(self, model, tokenizers, config, wrapper=None):
        """`model` with its tokenizers ({role: tokenizer}) as the task's
        inference wrapper, or as `wrapper` (a class taking the same arguments)."""
        wrapper = wrapper or self.wrapper()
        return wrapper(model, *(tokenizers[role] for role in self.roles), config)

    def test_examples(self, config, data_spec):
        """The test set `zoo evaluate` scores a run on: `data_spec`'s corpus,
        else the synthetic test split the run was trained beside."""
        if data_spec:
            return self.read_examples(data_spec)
        settings = of_run(config)
        if not settings.is_synthetic:
            raise ZooUserError(
                f"this run was not trained on the synthetic {self.synthetic_data}: "
                "name its test set with --data"
            )
        return self.load_splits(settings)[2]

    def __repr__(self):
        return f"<task {self.name}>"


class Splits(tuple):
    """`(train, valid, test)` examples, and what reading them from a corpus
    left out before they were split: `pairs_read` (the corpus's examples,
    blank ones included; None for data made in memory) and `blank_lines`."""

    def __new__(cls, train, valid, test, pairs_read=None, blank_lines=0):
        splits = super().__new__(cls, (train, valid, test))
        splits.pairs_read = pairs_read
        splits.blank_lines = blank_lines
        return splits


def hold_out_validation(examples, training):
    """A real corpus: the last `valid_size` examples (at most a tenth) for
    validation, at most `train_size` before them for training, no test."""
    valid_size = min(training.valid_size, len(examples) // 10)
    if training.train_size:
        examples = examples[: training.train_size + valid_size]
    return examples[: len(examples) - valid_size], examples[len(examples) - valid_size :], []


def run_tokenizers(task, out, training, sentences):
    """The run's tokenizers ({role: tokenizer}) in the run directory `out`:
    learned from `sentences` ({role: list of str}, aligned: the i-th of each
    role are one example) and saved, or reloaded when a resumed run saved
    them already (the same either way). Roles that share a file share one
    tokenizer, learned from all their sentences. A vocabulary is learned
    from a seeded sample of `training.vocabulary_sample` examples
    (`vocabulary_sentences`)."""
    from zoo import data  # TensorFlow-based: loaded only here

    files = runs.vocabulary_files(task.roles, training)
    tokenizers = {}
    sample = None
    for name in dict.fromkeys(files.values()):
        path = out / name
        if path.is_file():
            tokenizer = data.load_tokenizer(path)
        else:
            if sample is None:
                sample = vocabulary_sentences(task.roles, training, sentences)
            text = [s for role in task.roles if files[role] == name for s in sample[role]]
            tokenizer = data.train_tokenizer(
                training.tokenizer or "wordpiece", text, training.vocabulary_size
            )
            tokenizer.save(path)
        tokenizers.update({role: tokenizer for role in task.roles if files[role] == name})
    return tokenizers


def vocabulary_sentences(roles, training, sentences):
    """The sentences ({role: list of str}) the vocabularies learn from: at
    most `training.vocabulary_sample` examples, drawn with the run's seed.

    Examples are drawn whole, the sentences of every role together, so a
    shared vocabulary sees both sides of the same pairs. SentencePiece's
    own `input_sentence_size` is not used: it draws sentences, not pairs,
    with a seed of its own, after the whole corpus went through its
    iterator, and WordPiece has nothing like it; one sampler serves both.
    """
    from zoo.data.sampling import reservoir_sample

    examples = zip(*(sentences[role] for role in roles))
    sample = reservoir_sample(examples, training.vocabulary_sample, seed=training.seed)
    return {role: [example[i] for example in sample] for i, role in enumerate(roles)}
