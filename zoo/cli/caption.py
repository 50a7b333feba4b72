"""`zoo caption`: image files captioned with a trained run, and `--plot`,
the attention of each word over the first image."""

import sys

from zoo.cli.search_options import add_search_flags
from zoo.cli.search_options import open_run
from zoo.cli.search_options import settle_search


def add_parser(commands):
    caption = commands.add_parser("caption", help="caption images with a trained run")
    caption.add_argument("run_dir", help="a captioning run directory written by `zoo train`")
    caption.add_argument(
        "images", nargs="+", help="image files (JPEG, PNG, GIF (its first frame), BMP, WebP)"
    )
    add_search_flags(caption, coverage=False)
    caption.add_argument(
        "--plot", help="save the attention of each word over the first image (PNG)"
    )


def command(args):
    from zoo.evaluation import plots

    settle_search(args)
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
