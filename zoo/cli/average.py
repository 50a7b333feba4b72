"""`zoo average`: a run's last epoch checkpoints averaged into its weights."""

from zoo.arguments import positive_int


def add_parser(commands):
    average = commands.add_parser(
        "average",
        help="average the weights of a run's last N epoch checkpoints",
        description="Average the weights of the last N epoch checkpoints of a finished run. "
        "By default the average becomes the run's model.weights.h5 (what evaluate, translate "
        "and export read), and the weights training ended with are kept as "
        "model.unaveraged.weights.h5; --out writes the average elsewhere instead.",
    )
    average.add_argument("run_dir", help="a finished run directory written by `zoo train`")
    average.add_argument(
        "--last", type=positive_int, required=True, metavar="N", help="how many epoch checkpoints"
    )
    average.add_argument(
        "--out", help="write the averaged weights to this .weights.h5 file, leaving the run as it is"
    )


def command(args):
    from zoo.training import averaging

    path, names = averaging.average_run(args.run_dir, args.last, args.out)
    print(f"averaged {', '.join(names)}: {path}")
