"""Translation: text in, text out, scored with BLEU, and its attention
scored by the alignment error rate against gold word alignments."""

import functools
import logging
import time
from pathlib import Path

from zoo.errors import ZooUserError
from zoo.training.config import of_run

from zoo.tasks.base import Task
from zoo.tasks.base import Splits
from zoo.tasks.base import TaskData
from zoo.tasks.base import run_tokenizers

logger = logging.getLogger(__name__)


class TranslationTask(Task):
    name = "translation"
    command = "translate"
    roles = ("source", "target")
    tokenizers = ("wordpiece", "sentencepiece")
    synthetic_data = "corpus"

    def synthetic_splits(self, training):
        """The embedded corpus's pairs."""
        from zoo import data

        sizes = (training.train_size, training.valid_size, training.test_size)
        return data.synthetic_splits(*sizes, seed=training.seed)

    def synthetic_test_alignments(self, training):
        """The synthetic test split as `(pairs, golds)`: its (source,
        target) pairs and their gold `GoldAlignment`s."""
        from zoo import data
        from zoo.evaluation import alignment

        sizes = (training.train_size, training.valid_size, training.test_size)
        test = data.synthetic_splits(*sizes, seed=training.seed, with_alignments=True)
        pairs = [(source, target) for source, target, _ in test["test"]]
        return pairs, [alignment.parse_gold(line) for _, _, line in test["test"]]

    def test_alignments(self, config, data_spec=None, gold_path=None):
        """The test pairs `zoo evaluate` scores and their gold alignments:
        `(pairs, golds)`, `golds` a list of `GoldAlignment` or None.

        The gold is `gold_path` (Pharaoh format, one line per test pair of
        `data_spec`, or of the synthetic test set), else, for the synthetic
        test set, the corpus's own; a real corpus without `gold_path` has
        none. A gold file that cannot be read or does not match the test set
        line for line is a `ZooUserError`.
        """
        from zoo.evaluation import alignment

        if data_spec or gold_path:
            pairs = self.test_examples(config, data_spec)
        if gold_path is None:
            if data_spec:
                return pairs, None
            return self.synthetic_test_alignments(of_run(config))
        path = Path(gold_path)
        if not path.is_file():
            raise ZooUserError(f"--gold-alignments {gold_path!r} does not exist or is not a file")
        try:
            with open(path, encoding="utf-8") as lines:
                golds = alignment.read_gold(lines, name=f"--gold-alignments {gold_path!r}")
        except UnicodeDecodeError as error:
            raise ZooUserError(f"--gold-alignments {gold_path!r} is not UTF-8: {error}") from None
        except ValueError as error:
            raise ZooUserError(str(error)) from None
        if len(golds) != len(pairs):
            raise ZooUserError(
                f"--gold-alignments {gold_path!r} has {len(golds)} lines for "
                f"{len(pairs)} test pairs: it needs one line per pair, in order"
            )
        return pairs, golds

    def load_splits(self, training):
        """The base's splits; from a real corpus, the training split is a
        `CorpusScan` that training streams (`zoo.data.corpus_scan`), and
        the splits carry the corpus's count of lines read and of blank
        ones (`prepare_data` reports them)."""
        if training.is_synthetic:
            return super().load_splits(training)
        from zoo.data import corpus_scan

        scan = corpus_scan.scan_corpus(
            training.data,
            valid_size=training.valid_size,
            train_size=training.train_size,
            sample_size=training.vocabulary_sample,
            seed=training.seed,
        )
        return Splits(
            scan, scan.valid, [], pairs_read=scan.pairs_read, blank_lines=scan.blank_lines
        )

    def read_examples(self, data_spec):
        """The (source, target) pairs of a corpus spec (`zoo.data.read_corpus`)."""
        from zoo import data

        return data.read_corpus(data_spec).pairs

    def default_tokenizer(self, training):
        """SentencePiece, which keeps case, for a real corpus; WordPiece for
        the embedded synthetic corpus, which is lowercase."""
        return "wordpiece" if training.is_synthetic else "sentencepiece"

    def wrapper(self):
        from zoo.inference.translator import Translator

        return Translator

    def prepare_data(self, training, splits, out, drop_remainder=False, fixed_shapes=False):
        from zoo import data
        from zoo.data import streaming

        train_pairs, valid_pairs, test_pairs = splits
        pairs, size, sample = _training_split(train_pairs, training)
        started = time.monotonic()
        tokenizers = run_tokenizers(
            self,
            out,
            training,
            {"source": [s for s, _ in sample], "target": [t for _, t in sample]},
        )
        source_tokenizer, target_tokenizer = tokenizers["source"], tokenizers["target"]
        vocabulary_seconds = time.monotonic() - started
        # Uneven pairs are left out of training only: the validation loss
        # and BLEU are measured on the held-out pairs as they are.
        stream = streaming.TrainingStream(
            pairs,
            size,
            sample,
            source_tokenizer,
            target_tokenizer,
            batch_size=training.batch_size,
            batch_tokens=training.batch_tokens,
            shuffle_buffer=training.shuffle_buffer,
            seed=training.seed,
            max_source_length=training.max_length,
            max_target_length=training.max_length,
            max_length_ratio=training.max_length_ratio or None,
            drop_remainder=drop_remainder,
            pad_to_bucket_boundary=fixed_shapes,
        )

        def validation_dataset(pairs):
            encoded = data.encode_pairs(
                pairs,
                source_tokenizer,
                target_tokenizer,
                max_source_length=training.max_length,
                max_target_length=training.max_length,
            )
            return data.make_translation_dataset(
                encoded,
                source_tokenizer,
                target_tokenizer,
                batch_size=training.batch_size,
                shuffle=False,
                drop_remainder=drop_remainder,
                pad_to_bucket_boundary=fixed_shapes,
                batch_tokens=training.batch_tokens,
            )

        translators = {}

        def translator(model, config):
            # One per model: each compiles its search once, and validation
            # decodes with it after every epoch.
            if id(model) not in translators:
                translators[id(model)] = self.wrapper()(
                    model, source_tokenizer, target_tokenizer, config
                )
            return translators[id(model)]

        def evaluate(model, config):
            decoder = translator(model, config)
            return self.test_metrics(decoder, decoder.evaluate(test_pairs), test_pairs)

        def validate(model, config):
            return translator(model, config).evaluate(valid_pairs)["bleu"].score

        filtered = filter_report(splits, size, stream.size)
        return TaskData(
            stream.epochs,
            validation_dataset(valid_pairs) if valid_pairs else None,
            {
                "source_vocabulary_size": source_tokenizer.vocabulary_size,
                "target_vocabulary_size": target_tokenizer.vocabulary_size,
            },
            {
                "train_pairs": size,
                "valid_pairs": len(valid_pairs),
                "test_pairs": len(test_pairs),
                **filtered,
            },
            evaluate if test_pairs else None,
            validate if valid_pairs else None,
            epoch_size=stream.size,
            # Learned, or reloaded by a resumed run.
            vocabulary_seconds=vocabulary_seconds,
        )

    def test_metrics(self, translator, result, test_pairs):
        """The `test_*` entries of a run's metrics.json: the BLEU scores of
        `result`, what `translator.evaluate(test_pairs)` returned, and on the
        synthetic corpus the attention's alignment scores and the in-order
        BLEU."""
        metrics = {
            f"test_{name}{part}": getattr(result[name], field)
            for name in ("bleu", "bleu_lowercased")
            for part, field in (("", "score"), ("_signature", "signature"))
        }
        training = of_run(translator.config)
        if training.data == "synthetic":
            _, golds = self.synthetic_test_alignments(training)
            scores = translator.alignment_scores(test_pairs, golds)
            metrics.update(alignment_metrics(scores, prefix="test_"))
            metrics.update(in_order_bleu(result["hypotheses"], test_pairs, golds))
        return metrics


TRANSLATION = TranslationTask()


def _training_split(train_pairs, training):
    """`(pairs, size, sample)` of a training split for
    `zoo.data.streaming.TrainingStream`: a function returning its stream of
    pairs, its number of pairs, and the vocabularies' seeded sample of them.
    A `CorpusScan` is streamed from its files; pairs in memory (the
    synthetic corpus) from memory."""
    from zoo.data import corpus_scan
    from zoo.data import streaming
    from zoo.data.sampling import reservoir_sample

    if isinstance(train_pairs, corpus_scan.CorpusScan):
        size = train_pairs.train_pairs
        return (
            functools.partial(
                streaming.corpus_pairs, train_pairs.files, train_pairs.train_lines
            ),
            size,
            train_pairs.sample,
        )
    sample = reservoir_sample(train_pairs, training.vocabulary_sample, seed=training.seed)
    return functools.partial(streaming.memory_pairs, train_pairs), len(train_pairs), sample


def filter_report(splits, train_pairs, epoch_size):
    """The metrics.json entries of what the training data's filtering left
    out (`zoo.data.filtering.filter_metrics`) from `train_pairs` pairs, as
    an `EpochSize` counts them, logged as one line: a warning when pairs
    were left out, which the user may not expect."""
    from zoo.data import filtering

    metrics = filtering.filter_metrics(
        train_pairs,
        epoch_size.left_out,
        pairs_read=getattr(splits, "pairs_read", None),
        blank_lines=getattr(splits, "blank_lines", 0),
    )
    line = filtering.describe(metrics)
    if epoch_size.estimated:
        metrics["filter_counts_estimated"] = True
        line += " (estimated from the vocabulary's sample)"
    left_out = sum(metrics[f"pairs_left_out_{reason}"] for reason in filtering.REASONS)
    logger.log(logging.WARNING if left_out else logging.INFO, line)
    return metrics


def in_order_bleu(hypotheses, pairs, golds):
    """BLEU on the test pairs whose gold alignment needs no reordering, and
    their count: where a monotonic attention can follow the source, so its
    BLEU there against the whole set's tells the loss to reordering apart."""
    from zoo.evaluation import bleu

    kept = [i for i, gold in enumerate(golds) if gold.in_order]
    if not kept:
        return {}
    return {
        "test_bleu_in_order": bleu.corpus_bleu(
            [hypotheses[i] for i in kept], [pairs[i][1] for i in kept]
        ).score,
        "test_pairs_in_order": len(kept),
    }


def alignment_metrics(scores, prefix=""):
    """The metrics.json entries of an `AlignmentScores`, in percent like
    BLEU; none when the model linked nothing (it has no attention)."""
    if scores is None or scores.links == 0:
        return {}
    return {
        f"{prefix}aer": 100 * scores.aer,
        f"{prefix}alignment_precision": 100 * scores.precision,
        f"{prefix}alignment_recall": 100 * scores.recall,
    }
