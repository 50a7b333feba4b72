"""Readers for real image-captioning data, with one-line errors for broken files.

Pure Python (standard library only), so it runs with every Keras backend.
The images themselves are not opened here (only their existence is
checked); `zoo.data.caption_pipeline` decodes them and skips the ones that
cannot be decoded. Two layouts are read:

- Flickr8k / Flickr30k: a caption file with one caption a line,
  `IMAGE#N<TAB>caption` (`Flickr8k.token.txt`, Flickr30k's
  `results_20130124.token`), and a folder of images. The caption file may
  also be the Kaggle CSV `captions.txt` (first line `image,caption`) or
  Flickr30k's `results.csv` (first line `image_name| comment_number|
  comment`). An optional split file (`Flickr_8k.trainImages.txt`) lists
  the images to keep, one file name a line. `read_flickr(...)`.
- COCO captions: a JSON file with `images` (`id`, `file_name`) and
  `annotations` (`image_id`, `caption`), and a folder of images
  (`captions_train2014.json` with `train2014/`). `read_coco(...)`.

`read_captions(spec)` reads either from one command-line string:

    "captions_train2014.json,train2014/"                         COCO
    "Flickr8k.token.txt,Flicker8k_Dataset/"                      Flickr
    "Flickr8k.token.txt,Flicker8k_Dataset/,Flickr_8k.trainImages.txt"

A blank caption is skipped and counted in `CaptionCorpus.skipped_empty`;
every other problem raises `CaptionCorpusError` (a `CorpusError`) with a
one-line message that names the file (and the line, for a text file).
Captions are returned stripped of surrounding white space and otherwise
unchanged (lowercasing is the tokenizer's job).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import pathlib

from zoo.data.readers import CorpusError
from zoo.data.readers import _read_lines

# The first lines that mark the two comma/pipe-separated Flickr variants.
_KAGGLE_CSV_HEADER = "image,caption"
_PIPE_HEADER = "image_name|"


class CaptionCorpusError(CorpusError):
    """A caption file, split file or image folder is missing or malformed."""


class ImageError(CorpusError):
    """An image file is missing or cannot be decoded; the message names it."""


@dataclasses.dataclass
class CaptionImage:
    """One image of a captioning corpus with its reference captions.

    Attributes:
        image_path: `pathlib.Path` of the image file (it exists).
        captions: list of str, the non-blank captions, in file order.
        image_id: str, the file name without its extension (Flickr) or the
            COCO image id.
    """

    image_path: pathlib.Path
    captions: list
    image_id: str


@dataclasses.dataclass
class CaptionCorpus:
    """Images and captions read from a captioning corpus.

    Attributes:
        images: list of `CaptionImage`, in file order (split-file order when
            a split file is given).
        skipped_empty: how many blank captions were skipped.
        skipped_uncaptioned: how many images were skipped because they have
            no non-blank caption (COCO images without annotations, Flickr
            images whose every caption is blank).
        caption_path: the caption file read (str).
    """

    images: list
    skipped_empty: int
    skipped_uncaptioned: int
    caption_path: str

    def __len__(self):
        return len(self.images)

    def flatten(self):
        """One entry per (image, caption) pair, for `make_caption_dataset`.

        Returns:
            `(image_paths, captions)`: two parallel lists, each image path
            repeated once per caption of that image.
        """
        paths = [image.image_path for image in self.images for _ in image.captions]
        captions = [caption for image in self.images for caption in image.captions]
        return paths, captions


def _check_folder(image_dir):
    image_dir = os.fspath(image_dir)
    if not os.path.isdir(image_dir):
        what = "not a folder" if os.path.exists(image_dir) else "no such folder"
        raise CaptionCorpusError(f"{image_dir}: {what}; expected the image folder.")
    return image_dir


class _ImageFolder:
    """Answers "is this file in the folder?" from one listing of the folder."""

    def __init__(self, image_dir):
        self.path = pathlib.Path(image_dir)
        self._names = set(os.listdir(image_dir))

    def has(self, file_name):
        if "/" in file_name or os.sep in file_name:
            return (self.path / file_name).is_file()
        return file_name in self._names


def _parse_flickr_line(caption_path, number, line, layout):
    """`(file_name, caption)` of one caption line, in the file's layout."""
    if layout == "csv":
        # A caption with a comma may or may not be quoted; rejoin the fields.
        row = next(csv.reader([line]))
        if len(row) < 2:
            raise CaptionCorpusError(
                f"{caption_path}:{number}: no comma; this file (first line "
                f"{_KAGGLE_CSV_HEADER!r}) has 'image,caption' a line."
            )
        return row[0].strip(), ",".join(row[1:]).strip()
    if layout == "pipe":
        columns = line.split("|", 2)
        if len(columns) != 3:
            raise CaptionCorpusError(
                f"{caption_path}:{number}: {len(columns)} '|'-separated columns; "
                "this file has 'image_name| comment_number| comment' a line."
            )
        return columns[0].strip(), columns[2].strip()
    file_name, tab, caption = line.partition("\t")
    if not tab:
        raise CaptionCorpusError(
            f"{caption_path}:{number}: no tab; a Flickr caption file has "
            "'IMAGE#N<TAB>caption' a line."
        )
    file_name, hash_sign, index = file_name.strip().rpartition("#")
    if not hash_sign or not file_name or not index.isdigit():
        raise CaptionCorpusError(
            f"{caption_path}:{number}: the image is not followed by '#N' (a "
            "caption number), as in '1000268201_693b08cb0e.jpg#0<TAB>caption'."
        )
    return file_name, caption.strip()


def _flickr_layout(lines):
    first = lines[0].strip().replace(" ", "")
    if first.startswith(_PIPE_HEADER):
        return "pipe"
    if first == _KAGGLE_CSV_HEADER:
        return "csv"
    return "token"


def _read_split(split_file):
    names = []
    for number, line in enumerate(_read_lines(split_file), start=1):
        if line.strip():
            names.append((number, line.strip()))
    return names


def read_flickr(token_file, image_dir, split_file=None):
    """Read Flickr8k / Flickr30k captions and the folder of their images.

    Args:
        token_file: str or path-like, the caption file: `IMAGE#N<TAB>caption`
            a line (Flickr8k.token.txt, results_20130124.token), or the
            Kaggle `captions.txt` (`image,caption`) or `results.csv`
            (`image_name| comment_number| comment`), recognized by their
            first line.
        image_dir: str or path-like, the folder holding the images.
        split_file: optional str or path-like, one image file name a line
            (Flickr_8k.trainImages.txt): only these images are kept, in the
            split file's order.

    Returns:
        A `CaptionCorpus`.

    Raises:
        CaptionCorpusError: a file or the folder is missing; a file is
            empty or not UTF-8; a caption line is malformed (file:line); a
            kept image is not in the folder (file:line of its first
            caption); a split file names an image without captions
            (file:line). Only kept images must exist, so with a split file a
            caption file may describe images that are not downloaded (for
            example Flickr8k.token.txt's stray "2258277193_586949ec62.jpg.1").

    Example:

    >>> corpus = read_flickr(
    ...     "Flickr8k.token.txt", "Flicker8k_Dataset",
    ...     "Flickr_8k.trainImages.txt",
    ... )  # doctest: +SKIP
    >>> paths, captions = corpus.flatten()  # doctest: +SKIP
    """
    token_file = os.fspath(token_file)
    lines = _read_lines(token_file)
    folder = _ImageFolder(_check_folder(image_dir))
    layout = _flickr_layout(lines)
    first_body_line = 1 if layout == "token" else 2
    captions = {}  # file name -> list of captions, in file order
    first_line = {}  # file name -> the line of its first caption
    skipped_empty = 0
    for number, line in enumerate(lines[first_body_line - 1 :], start=first_body_line):
        if not line.strip():
            continue
        file_name, caption = _parse_flickr_line(token_file, number, line, layout)
        first_line.setdefault(file_name, number)
        captions.setdefault(file_name, [])
        if caption:
            captions[file_name].append(caption)
        else:
            skipped_empty += 1
    if split_file is None:
        kept = list(captions)
    else:
        split_file = os.fspath(split_file)
        kept = {}  # an ordered set: a name listed twice is kept once
        for number, file_name in _read_split(split_file):
            if file_name not in captions:
                raise CaptionCorpusError(
                    f"{split_file}:{number}: image {file_name!r} has no "
                    f"captions in {token_file}."
                )
            kept[file_name] = None
    images = []
    skipped_uncaptioned = 0
    for file_name in kept:
        if not folder.has(file_name):
            raise CaptionCorpusError(
                f"{token_file}:{first_line[file_name]}: image {file_name!r} is "
                f"not in {folder.path}."
            )
        if not captions[file_name]:
            skipped_uncaptioned += 1
            continue
        images.append(
            CaptionImage(
                image_path=folder.path / file_name,
                captions=captions[file_name],
                image_id=pathlib.PurePath(file_name).stem,
            )
        )
    return CaptionCorpus(images, skipped_empty, skipped_uncaptioned, token_file)


def _load_json(path):
    path = os.fspath(path)
    if not os.path.isfile(path):
        what = "is a folder, not a JSON file" if os.path.isdir(path) else "no such file"
        raise CaptionCorpusError(f"{path}: {what}.")
    try:
        with open(path, "rb") as file:
            return json.loads(file.read())
    except json.JSONDecodeError as error:
        raise CaptionCorpusError(
            f"{path}: not valid JSON ({error.msg} at line {error.lineno}, "
            f"column {error.colno})."
        ) from None
    except UnicodeDecodeError as error:
        raise CaptionCorpusError(f"{path}: not valid UTF-8 ({error.reason}).") from None
    except OSError as error:
        raise CaptionCorpusError(f"{path}: cannot be read ({error}).") from None


def _records(path, data, key, fields):
    """`data[key]`, checked to be a list of objects that have `fields`."""
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise CaptionCorpusError(
            f"{path}: no {key!r} list; a COCO captions file has 'images' and "
            "'annotations' lists."
        )
    for index, record in enumerate(data[key]):
        missing = [f for f in fields if not isinstance(record, dict) or f not in record]
        if missing:
            raise CaptionCorpusError(
                f"{path}: {key}[{index}] has no {missing[0]!r}; each needs "
                f"{', '.join(repr(f) for f in fields)}."
            )
    return data[key]


def read_coco(annotations_json, image_dir):
    """Read COCO captions (`captions_*.json`) and the folder of their images.

    Args:
        annotations_json: str or path-like, a JSON file with `images` (each
            with `id` and `file_name`) and `annotations` (each with
            `image_id` and `caption`).
        image_dir: str or path-like, the folder holding the images
            (`file_name` is relative to it).

    Returns:
        A `CaptionCorpus`, images in the order of `images`; image ids are
        the COCO ids as str. Images without a non-blank caption are skipped
        and counted.

    Raises:
        CaptionCorpusError: the file or the folder is missing; the file is
            not JSON or lacks a list or a key (the record is named); an
            annotation names an image id that `images` does not have; an
            image with captions is not in the folder.

    Example:

    >>> corpus = read_coco("captions_val2014.json", "val2014")  # doctest: +SKIP
    >>> corpus.images[0].captions[0]  # doctest: +SKIP
    'A man with a red helmet on a small moped on a dirt road.'
    """
    path = os.fspath(annotations_json)
    data = _load_json(path)
    folder = _ImageFolder(_check_folder(image_dir))
    images = _records(path, data, "images", ("id", "file_name"))
    annotations = _records(path, data, "annotations", ("image_id", "caption"))
    captions = {record["id"]: [] for record in images}
    skipped_empty = 0
    for index, record in enumerate(annotations):
        if record["image_id"] not in captions:
            raise CaptionCorpusError(
                f"{path}: annotations[{index}] names image_id "
                f"{record['image_id']!r}, which 'images' does not have."
            )
        caption = str(record["caption"]).strip()
        if caption:
            captions[record["image_id"]].append(caption)
        else:
            skipped_empty += 1
    corpus_images = []
    skipped_uncaptioned = 0
    for record in images:
        if not captions[record["id"]]:
            skipped_uncaptioned += 1
            continue
        file_name = str(record["file_name"])
        if not folder.has(file_name):
            raise CaptionCorpusError(
                f"{path}: image {file_name!r} (id {record['id']!r}) is not in "
                f"{folder.path}."
            )
        corpus_images.append(
            CaptionImage(
                image_path=folder.path / file_name,
                captions=captions[record["id"]],
                image_id=str(record["id"]),
            )
        )
    return CaptionCorpus(corpus_images, skipped_empty, skipped_uncaptioned, path)


def read_captions(spec):
    """Read a captioning corpus named by a command-line string.

    Args:
        spec: `"CAPTIONS,IMAGE_DIR"` or `"CAPTIONS,IMAGE_DIR,SPLIT"`, paths
            joined by commas. A CAPTIONS file ending in ".json" is read as
            COCO (`read_coco`; no SPLIT), any other as Flickr (`read_flickr`,
            SPLIT optional). A tuple or list of 2 or 3 paths is also
            accepted.

    Returns:
        A `CaptionCorpus`.

    Raises:
        CaptionCorpusError: the spec does not have 2 or 3 parts, a COCO spec
            has a split file, or a file is missing or malformed (see the
            readers).

    Example:

    >>> corpus = read_captions("Flickr8k.token.txt,Flicker8k_Dataset")  # doctest: +SKIP
    """
    if isinstance(spec, (tuple, list)):
        parts = [os.fspath(part) for part in spec]
    else:
        parts = [part.strip() for part in os.fspath(spec).split(",")]
    if len(parts) not in (2, 3) or not all(parts):
        raise CaptionCorpusError(
            f"{spec!r}: a captioning corpus is 'CAPTIONS,IMAGE_DIR' or "
            "'CAPTIONS,IMAGE_DIR,SPLIT' (CAPTIONS a COCO .json or a Flickr "
            "caption file)."
        )
    if parts[0].lower().endswith(".json"):
        if len(parts) == 3:
            raise CaptionCorpusError(
                f"{spec!r}: a COCO captions file takes no split file; COCO's "
                "splits are separate JSON files."
            )
        return read_coco(*parts)
    return read_flickr(*parts)
