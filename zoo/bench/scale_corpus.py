"""A large parallel corpus made from a small one, to measure how training's
cost grows with the corpus size (docs/performance.md, issue 48).

Pairs are drawn with replacement from the small corpus with a seeded
generator and written as gzip shards, `part-NNN.SRC.gz` and `part-NNN.TGT.gz`
(the languages taken from the input names, `train.en.gz` -> `en`). Only the
small corpus and one shard's pairs are in memory at a time, so the output
may be far larger than memory. Each shard is written under a temporary name
and renamed when complete: a stopped run leaves no half-written shard.

    python -m zoo.bench.scale_corpus $D/train.en.gz,$D/train.de.gz runs/corpus3m \\
        --pairs 3000000 --shards 8 --seed 0

Nothing it writes is committed: the corpus is made again where it is used.
"""

import argparse
import gzip
import os
import random
import sys
from pathlib import Path

from zoo.arguments import non_negative_int
from zoo.arguments import positive_int
from zoo.data.readers import CorpusError
from zoo.data.readers import read_parallel_text


def language(path):
    """The language code of a corpus file's name: `train.en.gz` -> `en`."""
    return Path(path).name.removesuffix(".gz").rsplit(".", 1)[-1]


def shard_sizes(pairs, shards):
    """How many pairs each of `shards` shards gets: as equal as can be."""
    return [pairs // shards + (index < pairs % shards) for index in range(shards)]


def write_shard(lines, path):
    """Writes `lines` to the gzip file `path`, under a temporary name first."""
    partial = path.with_name(path.name + ".partial")
    with gzip.open(partial, "wt", encoding="utf-8", compresslevel=1) as file:
        file.writelines(line + "\n" for line in lines)
    os.replace(partial, path)


def write_scaled_corpus(source_path, target_path, out, pairs, shards, seed=0):
    """Writes `pairs` pairs drawn with replacement from the corpus of
    `source_path` and `target_path` into `shards` gzip shard pairs in `out`.

    Returns:
        The written shard paths, `[(source shard, target shard)]`.
    """
    corpus = read_parallel_text(source_path, target_path).pairs
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source_language, target_language = language(source_path), language(target_path)
    rng = random.Random(seed)
    written = []
    for index, size in enumerate(shard_sizes(pairs, shards)):
        drawn = rng.choices(corpus, k=size)
        paths = (
            out / f"part-{index:03d}.{source_language}.gz",
            out / f"part-{index:03d}.{target_language}.gz",
        )
        write_shard([source for source, _ in drawn], paths[0])
        write_shard([target for _, target in drawn], paths[1])
        written.append(paths)
    return written


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m zoo.bench.scale_corpus",
        description="Write a large parallel corpus drawn with replacement from a small one.",
    )
    parser.add_argument("data", help="the small corpus: SOURCE,TARGET aligned text files")
    parser.add_argument("out", help="the folder the shards go to")
    parser.add_argument("--pairs", type=positive_int, required=True, help="pairs to write")
    parser.add_argument("--shards", type=positive_int, default=8, help="shard pairs to write")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="the draw's seed")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    files = args.data.split(",")
    if len(files) != 2:
        parser.error(f"expected SOURCE,TARGET, two files, got {args.data!r}")
    if args.shards > args.pairs:
        parser.error(f"--shards {args.shards} is more than --pairs {args.pairs}; ask for fewer")
    try:
        written = write_scaled_corpus(*files, args.out, args.pairs, args.shards, args.seed)
    except CorpusError as error:
        parser.exit(2, f"error: {error}\n")
    print(f"{args.pairs} pairs in {len(written)} shard pairs under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
