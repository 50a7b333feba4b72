"""Captioning: an image in, a caption out, scored with the caption metrics."""

import functools

from zoo.tasks.base import Task
from zoo.tasks.base import TaskData
from zoo.tasks.base import run_tokenizers


class CaptioningTask(Task):
    name = "captioning"
    command = "caption"
    roles = ("target",)
    synthetic_data = "images"

    def synthetic_splits(self, training):
        """`zoo.data.captions.CaptionExample`s: images in memory, with their
        objects' boxes. `train_size` counts images."""
        from zoo import data

        sizes = (training.train_size, training.valid_size, training.test_size)
        return data.synthetic_caption_splits(
            *sizes, seed=training.seed, image_size=training.image_size
        )

    def read_examples(self, data_spec):
        """The `CaptionImage`s (image files) of a corpus spec (`zoo.data.read_captions`)."""
        from zoo import data

        return data.read_captions(data_spec).images

    def wrapper(self):
        from zoo.inference.captioner import Captioner

        return Captioner

    def speed_metrics(self, epochs_run, task_data, seconds):
        return {
            "images_per_second": round(epochs_run * task_data.examples["train_pairs"] / seconds, 1)
        }

    def prepare_data(self, training, splits, out, drop_remainder=False, fixed_shapes=False):
        from zoo import data
        from zoo.inference import captioner

        train_images, valid_images, test_images = splits
        images, captions = captioner.caption_pairs(train_images)
        tokenizer = run_tokenizers(self, out, training, {"target": captions})["target"]

        def dataset(examples, shuffle, epochs=None):
            images, captions = captioner.caption_pairs(examples)
            return data.make_caption_dataset(
                images,
                captions,
                tokenizer,
                image_size=training.image_size,
                batch_size=training.batch_size,
                shuffle=shuffle,
                seed=training.seed,
                max_caption_length=training.max_length,
                epochs=epochs,
                drop_remainder=drop_remainder,
                pad_to_max_length=fixed_shapes,
            )

        def evaluate(model, config):
            result = captioner.Captioner(model, tokenizer, config).evaluate(test_images)
            metrics = {f"test_{name}": value for name, value in result["scores"].items()}
            if result["localisation"] is not None:
                metrics.update(
                    {f"test_attention_{k}": v for k, v in result["localisation"].items()}
                )
            return metrics

        return TaskData(
            functools.partial(dataset, train_images, True),
            dataset(valid_images, shuffle=False) if valid_images else None,
            {"target_vocabulary_size": tokenizer.vocabulary_size},
            {
                "train_images": len(train_images),
                "train_pairs": len(captions),
                "valid_images": len(valid_images),
                "test_images": len(test_images),
            },
            evaluate if test_images else None,
        )


CAPTIONING = CaptioningTask()
