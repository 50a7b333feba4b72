"""A trained captioning model with its tokenizer: caption images and evaluate."""

from dataclasses import dataclass

import keras
import numpy as np

from zoo.evaluation import caption_metrics
from zoo.evaluation.localisation import attention_localisation
from zoo.recipes import decoding
from zoo.recipes.contract import EOS_TOKEN
from zoo.inference.search_choice import choose_search
from zoo.inference.search_settings import SearchSettings
from zoo.training.config import trained_max_length


@dataclass
class Caption:
    """The caption of one image.

    Attributes:
        text: the detokenized caption.
        words: the word pieces produced (EOS included when produced).
        attention: float array `[len(words), H, W]`, the attention of each
            produced piece over the feature grid (rows are image rows).
        score: log-probability of the caption.
    """

    text: str
    words: list
    attention: np.ndarray
    score: float

    @property
    def words_without_eos(self):
        """The produced pieces without the final EOS."""
        return [w for w in self.words if w != EOS_TOKEN]


def caption_pairs(examples):
    """(images, captions): one entry per (image, reference caption) pair, the
    form `zoo.data.make_caption_dataset` takes: in-memory images (the same
    array object repeated, which the pipeline stores once) or file paths."""
    captions = [caption for example in examples for caption in example.captions]
    if hasattr(examples[0], "image"):
        return [example.image for example in examples for _ in example.captions], captions
    return [example.image_path for example in examples for _ in example.captions], captions


class Captioner:
    """A captioning model, its caption tokenizer and its run configuration.

    Args:
        model: a captioning recipe (the encode / decode_step contract, with
            `grid_shape` and `image_size`).
        tokenizer: the caption `zoo.data.TextTokenizer`.
        config: the run's config dict (see `zoo.runs`).
    """

    def __init__(self, model, tokenizer, config=None):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config or {}
        self._searches = {}  # `choose_search`'s cache

    @property
    def image_size(self):
        return self.model.image_size

    @property
    def max_caption_length(self):
        return trained_max_length(self.config)

    def _as_batch(self, images):
        images = np.asarray(images)
        if images.ndim == 3:
            images = images[None]
        expected = (self.image_size, self.image_size, 3)
        if images.ndim != 4 or images.shape[1:] != expected:
            raise ValueError(
                f"images must have shape [N, {self.image_size}, {self.image_size}, 3] "
                f"for this model; received {images.shape}."
            )
        if images.dtype == np.uint8:
            return images.astype("float32") / 255.0
        return images.astype("float32")

    def caption(
        self, images, beam=1, length_penalty=0.6, batch_size=64, progress=None, stopping="early"
    ):
        """Captions images: uint8 (0-255) or float (0-1) `[N, S, S, 3]`
        (greedy for `beam=1`; `stopping`: beam search's rule, "early" or
        "exact", see `zoo.recipes.decoding.beam_search`).

        `progress`, when given, is called with the number of images
        captioned as each batch ends. Returns a list of `Caption`, one per
        image. A search argument out of range raises
        `zoo.inference.search_settings.SearchSettingsError` (a `ValueError`).
        """
        settings = SearchSettings(
            beam, length_penalty, stopping=stopping, max_length=self.max_caption_length
        )
        search = choose_search(self.model, settings, self._searches)
        images = self._as_batch(images)
        grid = self.model.grid_shape
        results = []
        for start in range(0, len(images), batch_size):
            batch = images[start : start + batch_size]
            if len(images) > batch_size:
                # The last batch padded to the full size: one compiled shape.
                batch = np.concatenate([batch, images[: batch_size - len(batch)]])
            result = search(batch)
            tokens = decoding.decode_to_lists(
                result, self.model.eos_id, self.model.pad_id, include_eos=True
            )
            attention = keras.ops.convert_to_numpy(result.attention)
            scores = keras.ops.convert_to_numpy(result.scores)
            for k in range(min(batch_size, len(images) - start)):
                steps = len(tokens[k])
                results.append(
                    Caption(
                        text=self.tokenizer.decode(tokens[k]),
                        words=[self.tokenizer.id_to_token(i) for i in tokens[k]],
                        attention=attention[k, :steps].reshape((steps,) + tuple(grid)),
                        score=float(scores[k]),
                    )
                )
            if progress is not None:
                progress(min(batch_size, len(images) - start))
        return results

    def caption_files(self, paths, beam=1, length_penalty=0.6, progress=None, stopping="early"):
        """Captions image files (PNG, JPEG, ...), resized to the model's size."""
        from zoo.data import load_image

        images = np.stack([load_image(path, self.image_size) for path in paths])
        return self.caption(
            images, beam=beam, length_penalty=length_penalty, progress=progress, stopping=stopping
        )

    def evaluate(
        self, examples, beam=1, length_penalty=0.6, batch_size=64, progress=None, stopping="early"
    ):
        """Caption metrics of `examples`, each with `.captions` (references)
        and either `.image` (an array) or `.image_path` (a file).

        Returns a dict: `scores` (BLEU-1..4, CIDEr-D and METEOR or why it
        was skipped, see `zoo.evaluation.caption_metrics.caption_scores`),
        `localisation` (synthetic examples with `.objects` only, see
        `zoo.evaluation.localisation.attention_localisation`, else None) and
        `captions` (the `Caption` of each example). `progress` is `caption`'s.
        """
        if hasattr(examples[0], "image"):
            captions = self.caption(
                np.stack([e.image for e in examples]),
                beam,
                length_penalty,
                batch_size,
                progress,
                stopping,
            )
        else:
            captions = self.caption_files(
                [e.image_path for e in examples], beam, length_penalty, progress, stopping
            )
        references = [self.tokenizer.normalize(list(e.captions)) for e in examples]
        scores = caption_metrics.caption_scores([c.text for c in captions], references)
        localisation = None
        if hasattr(examples[0], "objects"):
            localisation = attention_localisation(
                [c.words_without_eos for c in captions],
                [c.attention[: len(c.words_without_eos)] for c in captions],
                [e.objects for e in examples],
                self.image_size,
            )
        return {"scores": scores, "localisation": localisation, "captions": captions}
