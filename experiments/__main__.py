"""``python -m experiments [--quick] [--out DIR] [--docs DIR]``."""

import argparse
import os
import sys


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block, no traceback
        sys.stderr.write(f"python -m experiments: error: {message}\n")
        sys.exit(2)


def main(argv=None) -> int:
    parser = _Parser(
        prog="python -m experiments",
        description="Diagonal networks and small CNNs on the digits and planted patches: "
        "the regime map on real data, attributions over training and LE-SAM's flatness, each "
        "claim judged supported / contradicted / inconclusive (about 12 min of CPU time, 22 min "
        "on 2 cores shared at load 7; --quick, about 2 min, judges nothing).",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run (tiny sizes)")
    parser.add_argument(
        "--out",
        default="results/experiments",
        help="folder for netCDF results, figures and the page",
    )
    parser.add_argument(
        "--docs",
        default=None,
        help="write the page (DOCS/experiments.md) and figures "
        "(DOCS/figures/experiments) here instead of OUT",
    )
    args = parser.parse_args(argv)
    for flag, value in (("--out", args.out), ("--docs", args.docs)):
        if value is None:
            continue
        if not value.strip():
            parser.error(f"argument {flag}: must be a folder name")
        if os.path.exists(value) and not os.path.isdir(value):
            parser.error(f"argument {flag}: {value!r} exists and is not a folder")
    from pathlib import Path

    from figures.internal import check_folder

    for flag, value in (("--out", args.out), ("--docs", args.docs)):
        if value is not None:
            try:
                check_folder(flag, Path(value), create=True)
            except ValueError as err:
                parser.error(str(err))
    import flows  # heavy imports only after the flags are checked

    flows.configure()  # before the first JAX computation (importing ._run starts one)
    from ._run import run

    run(args.out, quick=args.quick, docs=args.docs, progress=lambda m: print(m, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
