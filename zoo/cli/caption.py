"""`zoo caption`: image files captioned with a trained run, and `--plot`,
the attention of each word over the first image."""

import sys

from zoo.arguments import positive_int
from zoo.cli.search_options import add_beam_stop
from zoo.cli.search_options import add_length_penalty
from zoo.cli.search_options import open_run


def add_parser(commands):
    caption = commands.add_parser("caption", help="caption images with a trained run")
    caption.add_argument("run_dir", help="a captioning run directory written by `zoo train`")
    caption.add_argument(
        "images", nargs="+", help="image files (JPEG, PNG, GIF (its first frame), BMP, WebP)"
    )
    caption.add_argument("--beam", type=positive_int, default=1, help="beam width (1: greedy)")
    add_length_penalty(caption)
    add_beam_stop(caption)
    caption.add_argument(
        "--plot", help="save the attention of each word over the first image (PNG)"
    )


def command(args):
    from zoo.evaluation import plots

    captioner = open_run(args, "caption")
    captions = captioner.caption_files(
        args.images, beam=args.beam, length_penalty=args.length_penalty, stopping=args.beam_stop
    )
    for caption in captions:
        print(caption.text)
    if args.plot:
        from zoo.data import load_image

        first = captions[0]
        words = first.words_without_eos
        path = plots.plot_caption_attention(
            load_image(args.images[0], captioner.image_size),
            words,
            first.attention[: len(words)],
            args.plot,
        )
        print(f"attention: {path}", file=sys.stderr)
