"""The `zoo` command line."""

import argparse
import sys


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="zoo", description="keras-attention-zoo: attention layers and models."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo", help="train each attention layer on a toy reversal task and show its alignment"
    )
    demo.add_argument("--epochs", type=positive_int, default=8, help="training epochs per layer (default 8)")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "demo":
        from zoo import demo

        demo.run(epochs=args.epochs, verbose=0 if args.quiet else 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
