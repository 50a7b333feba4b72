"""Readers for real parallel corpora, with one-line errors for broken files.

Pure Python (standard library only), so it runs with every Keras backend.
Two layouts are read:

- two aligned plain-text files, one sentence a line, line i of the source
  translating line i of the target: WMT, Moses, Multi30k, OPUS "moses"
  downloads. Either file may be gzip-compressed (a name ending in ".gz").
  `read_parallel_text(source_path, target_path)`.
- one tab-separated file, `source<TAB>target[<TAB>anything...]` a line:
  Tatoeba and the Anki (manythings.org) exports. `read_tsv(path)`.

`read_corpus(spec)` reads either from one command-line string:

    "data/train.en.gz,data/train.de.gz"   two aligned files: SOURCE,TARGET
    "data/deu.txt"                        one tab-separated file

A pair where either side is blank (after stripping white space) is skipped
and counted in `ParallelCorpus.skipped_empty`; every other problem raises
`CorpusError` with a one-line message that names the file (and the line).
Sentences are returned stripped of surrounding white space and otherwise
unchanged (no lowercasing or Unicode normalization: that is the
tokenizer's job).
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import zlib

from zoo.errors import ZooUserError


class CorpusError(ZooUserError):
    """A corpus file is missing or malformed; the message names file and line."""


@dataclasses.dataclass
class ParallelCorpus:
    """Sentence pairs read from a corpus.

    Attributes:
        pairs: list of `(source, target)` str pairs, in file order.
        skipped_empty: how many lines were skipped because the source or the
            target was blank.
        source_path: the file the sources came from (str).
        target_path: the file the targets came from (the same file as
            `source_path` for a tab-separated corpus).
    """

    pairs: list
    skipped_empty: int
    source_path: str
    target_path: str

    def __len__(self):
        return len(self.pairs)

    @property
    def sources(self):
        """The source sentences, a list of str."""
        return [source for source, _ in self.pairs]

    @property
    def targets(self):
        """The target sentences, a list of str."""
        return [target for _, target in self.pairs]


def check_corpus_file(path):
    """A `CorpusError` unless `path` is a file."""
    if not os.path.exists(path):
        raise CorpusError(f"{path}: no such file.")
    if os.path.isdir(path):
        raise CorpusError(f"{path}: is a folder, not a corpus file.")


def _read_lines(path):
    """The lines of a text file (gzip if the name ends in .gz), decoded.

    Only "\\n" ends a line (a stray "\\r" before it is dropped), so Unicode
    line separators inside a sentence cannot shift the alignment.
    """
    path = os.fspath(path)
    check_corpus_file(path)
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as file:
                data = file.read()
        else:
            with open(path, "rb") as file:
                data = file.read()
    except (OSError, EOFError, zlib.error) as error:
        raise CorpusError(f"{path}: cannot be read ({error}).") from None
    if not data.strip():
        raise CorpusError(f"{path}: the file is empty.")
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()  # the newline that ends the last line
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(
                f"{path}:{number}: not valid UTF-8 "
                f"(byte {raw[error.start]:#04x}, byte {error.start + 1} of the line)."
            ) from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte order mark
        lines.append(line.removesuffix("\r"))
    return lines


def read_parallel_text(source_path, target_path):
    """Read two aligned text files, one sentence a line.

    Line i of `source_path` translates line i of `target_path`: the layout
    of WMT, Moses and Multi30k. A name ending in ".gz" is read as gzip.

    Args:
        source_path: str or path-like, the source sentences.
        target_path: str or path-like, the target sentences.

    Returns:
        A `ParallelCorpus`.

    Raises:
        CorpusError: a file is missing, empty, not gzip where named so, or
            has a line that is not UTF-8 (file:line), or the two files have
            different numbers of lines (both files and counts named).

    Example:

    >>> corpus = read_parallel_text("val.en.gz", "val.de.gz")  # doctest: +SKIP
    >>> source, target = corpus.pairs[0]                        # doctest: +SKIP
    """
    source_path, target_path = os.fspath(source_path), os.fspath(target_path)
    sources = _read_lines(source_path)
    targets = _read_lines(target_path)
    if len(sources) != len(targets):
        raise CorpusError(
            f"{source_path} has {len(sources)} lines but {target_path} has "
            f"{len(targets)}; aligned files need one sentence a line in both."
        )
    pairs = []
    skipped = 0
    for source, target in zip(sources, targets):
        source, target = source.strip(), target.strip()
        if source and target:
            pairs.append((source, target))
        else:
            skipped += 1
    return ParallelCorpus(pairs, skipped, source_path, target_path)


def read_tsv(path, source_column=0, target_column=1):
    """Read a tab-separated file of sentence pairs.

    Each line is `source<TAB>target[<TAB>anything...]`, the Tatoeba and Anki
    layout (whose third column is an attribution). A blank line counts as an
    empty pair and is skipped. A name ending in ".gz" is read as gzip.

    Args:
        path: str or path-like.
        source_column: int >= 0, the column of the source sentence.
        target_column: int >= 0, the column of the target sentence.

    Returns:
        A `ParallelCorpus` (with `source_path == target_path == path`).

    Raises:
        CorpusError: the file is missing or empty, or a line is not UTF-8,
            has no tab, or has too few columns (file:line).
    """
    path = os.fspath(path)
    columns = {"source_column": source_column, "target_column": target_column}
    for name, column in columns.items():
        if not isinstance(column, int) or column < 0:
            raise ValueError(f"{name} must be an int >= 0; received {column!r}.")
    if source_column == target_column:
        raise ValueError(
            "source_column and target_column must differ; "
            f"both are {source_column}."
        )
    needed = max(source_column, target_column) + 1
    pairs = []
    skipped = 0
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            skipped += 1
            continue
        if "\t" not in line:
            raise CorpusError(
                f"{path}:{number}: no tab; a tab-separated corpus has "
                "'source<TAB>target' a line (for two aligned files, give "
                "'SOURCE,TARGET')."
            )
        columns = line.split("\t")
        if len(columns) < needed:
            raise CorpusError(
                f"{path}:{number}: {len(columns)} columns, but column "
                f"{needed - 1} (counting from 0) is needed."
            )
        source = columns[source_column].strip()
        target = columns[target_column].strip()
        if source and target:
            pairs.append((source, target))
        else:
            skipped += 1
    return ParallelCorpus(pairs, skipped, path, path)


def read_corpus(spec):
    """Read a corpus named by a command-line string.

    Args:
        spec: either two paths joined by one comma, `"SOURCE,TARGET"` (two
            aligned text files, as in `read_parallel_text`, e.g.
            `"data/train.en.gz,data/train.de.gz"`), or one path (a
            tab-separated file, as in `read_tsv`, e.g. `"data/deu.txt"`). A
            path that itself contains a comma is read as one file when it
            exists. A `(source, target)` tuple or list of two paths is also
            accepted.

    Returns:
        A `ParallelCorpus`.

    Raises:
        CorpusError: the spec has more than one comma, or a file is missing
            or malformed (see the readers).
    """
    paths = corpus_paths(spec)
    if len(paths) == 1:
        return read_tsv(paths[0])
    return read_parallel_text(*paths)


def corpus_paths(spec):
    """The file paths a corpus spec of `read_corpus` names: one (a TSV file)
    or two (source, target).

    Raises:
        CorpusError: the spec is malformed.
    """
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            raise CorpusError(
                "a corpus given as a sequence needs two paths (source, "
                f"target); received {len(spec)}."
            )
        return list(spec)
    spec = os.fspath(spec)
    if "," not in spec or os.path.isfile(spec):
        return [spec]
    parts = spec.split(",")
    if len(parts) != 2 or not all(part.strip() for part in parts):
        raise CorpusError(
            f"{spec!r}: a corpus is 'SOURCE,TARGET' (two aligned files) or "
            "one tab-separated file."
        )
    return [part.strip() for part in parts]
