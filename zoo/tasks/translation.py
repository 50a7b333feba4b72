"""Translation: text in, text out, scored with BLEU."""

import functools

from zoo.tasks.base import Task
from zoo.tasks.base import TaskData
from zoo.tasks.base import run_tokenizers


class Translation(Task):
    name = "translation"
    command = "translate"
    roles = ("source", "target")
    tokenizers = ("wordpiece", "sentencepiece")
    synthetic_data = "corpus"

    def synthetic_splits(self, training):
        """The embedded corpus's pairs."""
        from zoo import data

        sizes = (training["train_size"], training["valid_size"], training["test_size"])
        return data.synthetic_splits(*sizes, seed=training.get("seed", 0))

    def read_examples(self, data_spec):
        """The (source, target) pairs of a corpus spec (`zoo.data.read_corpus`)."""
        from zoo import data

        return data.read_corpus(data_spec).pairs

    def default_tokenizer(self, training):
        """SentencePiece, which keeps case, for a real corpus; WordPiece for
        the embedded synthetic corpus, which is lowercase."""
        return "wordpiece" if training["data"] == "synthetic" else "sentencepiece"

    def wrapper(self):
        from zoo.inference.translator import Translator

        return Translator

    def prepare_data(self, training, splits, out, drop_remainder=False, fixed_shapes=False):
        from zoo import data

        train_pairs, valid_pairs, test_pairs = splits
        tokenizers = run_tokenizers(
            self,
            out,
            training,
            {"source": [s for s, _ in train_pairs], "target": [t for _, t in train_pairs]},
        )
        source_tokenizer, target_tokenizer = tokenizers["source"], tokenizers["target"]

        def encode(pairs):
            # Once per split: a training asks for its batches several times (to
            # count them, for each `fit`, to count the tokens).
            return data.encode_pairs(
                pairs,
                source_tokenizer,
                target_tokenizer,
                max_source_length=training["max_length"],
                max_target_length=training["max_length"],
            )

        def dataset(encoded, shuffle, epochs=None):
            return data.make_translation_dataset(
                encoded,
                source_tokenizer,
                target_tokenizer,
                batch_size=training["batch_size"],
                shuffle=shuffle,
                seed=training.get("seed", 0),
                epochs=epochs,
                drop_remainder=drop_remainder,
                pad_to_bucket_boundary=fixed_shapes,
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
            result = translator(model, config).evaluate(test_pairs)
            return {
                f"test_{name}{part}": getattr(result[name], field)
                for name in ("bleu", "bleu_lowercased")
                for part, field in (("", "score"), ("_signature", "signature"))
            }

        def validate(model, config):
            return translator(model, config).evaluate(valid_pairs)["bleu"].score

        return TaskData(
            functools.partial(dataset, encode(train_pairs), True),
            dataset(encode(valid_pairs), shuffle=False) if valid_pairs else None,
            {
                "source_vocabulary_size": source_tokenizer.vocabulary_size,
                "target_vocabulary_size": target_tokenizer.vocabulary_size,
            },
            {"train_pairs": len(train_pairs)},
            evaluate if test_pairs else None,
            validate if valid_pairs else None,
        )


TRANSLATION = Translation()
