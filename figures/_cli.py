"""``python -m figures``: regenerate the figures of the README's gallery."""

from __future__ import annotations

import argparse
import sys
import time

from flows._cli import ArgumentParser

from ._phase_cli import main as phase_main
from ._registry import FIGURES, check_paths, make


def _parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:<13} {spec.summary}" for name, spec in FIGURES.items())
    parser = ArgumentParser(
        prog="python -m figures",
        description="Regenerate the samflows figures (vector PDF + PNG) on the CPU.",
        epilog=f"figures:\n{listing}\n\nexamples:"
        "\n  python -m figures                  # all, full size"
        "\n  python -m figures --quick          # smoke version (CI)"
        "\n  python -m figures regime_map       # one figure"
        "\n  python -m figures --redraw         # redraw from saved data, no solving"
        "\n\nyour own phase diagram (python -m figures phase --help):"
        "\n  python -m figures phase --method l2sam --depth 3 --mu 1,2,3,4,5 "
        "--alpha 1e-3:10:256 --rho 0.01:1:64 --out results/phase",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "names", nargs="*", metavar="FIGURE", help="figures to make (default: all; see below)"
    )
    parser.add_argument("--quick", action="store_true", help="small grids: a smoke run for CI")
    parser.add_argument(
        "--out", default="results/figures", help="output folder (default: results/figures)"
    )
    parser.add_argument(
        "--cache",
        default="results/cache",
        help="sweep caches and saved figure data (default: results/cache)",
    )
    parser.add_argument(
        "--redraw", action="store_true", help="draw from the data saved in --cache; solve nothing"
    )
    parser.add_argument(
        "--executor",
        choices=["threads", "dask"],
        default="threads",
        help="where sweeps run: host threads (default) or a local Dask cluster of one "
        "worker process per core (flows.sweep's executor)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    return parser


def main(argv=None) -> int:
    """Run ``python -m figures`` (or ``python -m figures phase ...``) on ``argv``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["phase"]:
        return phase_main(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; choose from {', '.join(FIGURES)}")
    try:  # the folders and saved data, before anything is computed
        check_paths(
            args.names, out=args.out, cache=args.cache, quick=args.quick, redraw=args.redraw
        )
    except ValueError as err:
        parser.error(str(err))
    t0 = time.perf_counter()
    written = make(
        args.names,
        out=args.out,
        cache=args.cache,
        quick=args.quick,
        redraw=args.redraw,
        progress=not args.quiet,
        executor=args.executor,
    )
    if not args.quiet:
        n = sum(len(v) for v in written.values())
        print(f"{n} files in {args.out} ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
