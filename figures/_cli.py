"""``python -m figures`` and ``python -m figures phase``: their parsers, then the work.

This module imports neither JAX nor matplotlib nor the figure modules: ``--help`` and a bad
flag answer at once. After the flags are parsed, :func:`flows.configure` is applied (before
the first JAX computation; importing the figure modules starts one), then the figures are made
(:mod:`figures._registry`) or the phase diagram is computed (:mod:`figures._phase_cli`).
"""

from __future__ import annotations

import argparse
import sys
import time

from samflows_cli import ArgumentParser, positive_int

from ._catalog import SUMMARIES


def _parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:<13} {summary}" for name, summary in SUMMARIES.items())
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
    parser.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        help="processes making figures side by side (default: one per core; 1 with "
        "--redraw or --executor dask)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    return parser


PHASE_EPILOG = """\
A range is START:STOP:COUNT, log-spaced (alpha, rho, sigma, rho_max are scales and radii),
both ends included and > 0 (the values, not their logarithms: 1e-1:1e3:32, not -1:3:32);
a list is A,B,C; a single number is a fixed value. --depth is an integer,
a list 2,3,4 or an inclusive integer range 2:8. Exactly two of alpha, rho, sigma, rho_max and
depth must be ranges or lists: they are the two axes of the picture (alpha, else the first of
rho, sigma, rho_max, depth, is vertical). Each point is the rescaled single-example flow
{(mu, +1)} from the balanced start w(0) = alpha, classified by analysis.phase_diagram.

It writes OUT/phase.pdf, OUT/phase.png and OUT/phase.nc (the xarray Dataset of
analysis.phase_diagram: code, first, last, n_switches, times, ...; the settings are in its
attrs). Finished chunks are cached in --cache (default OUT/cache): an interrupted run, run
again, resumes; a finished one redraws without solving.

methods and their parameters:
  gd            (none)
  l2sam         --rho
  l2sam-layer   --rho        (each layer normalised separately)
  linfsam       --rho [--delta]  (the exact sign, a Filippov flow; with --delta the
                                 smoothed sign tanh(g/delta))
  lesam         --sigma --rho-max

examples:
  python -m figures phase --method l2sam --depth 3 --mu 1,2,3,4,5 \\
      --alpha 1e-3:10:256 --rho 0.01:1:64 --out results/phase
  python -m figures phase --method l2sam --rho 1 --alpha 0.01:3:128 --depth 2:8 --out DIR
  python -m figures phase --method lesam --rho-max 0.3 --sigma 0.01:10:96 \\
      --alpha 0.01:10:96 --loss exponential --out DIR
  python -m figures phase --config phase.toml --out DIR     # flags override the file

a TOML file holds the same settings, named as the flags (rho_max or rho-max):
  method = "l2sam"
  depth = 3
  mu = [1, 2, 3, 4, 5]
  alpha = "1e-3:10:256"      # a range is a string; a list is [a, b, ...]; a number is fixed
  rho = "0.01:1:64"
"""


def phase_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m figures phase``; :mod:`figures._phase_cli` checks the values."""
    parser = ArgumentParser(
        prog="python -m figures phase",
        description="Sweep, save and draw a regime phase diagram over two of alpha, rho, sigma, "
        "rho_max and depth (vector PDF + PNG, and the data as netCDF).",
        epilog=PHASE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=None,
    )
    add = parser.add_argument
    add("--config", metavar="FILE.toml", help="read the settings from a TOML file")
    add("--method", help="the method, one of those listed below (required)")
    add("--alpha", metavar="A", help="initialisation scale alpha > 0 (required)")
    add("--rho", metavar="R", help="SAM radius rho > 0 (l2sam, l2sam-layer, linfsam)")
    add("--sigma", metavar="S", help="LE-SAM loss budget sigma > 0 (lesam)")
    add("--rho-max", metavar="R", help="LE-SAM cap rho_max > 0 (lesam)")
    add(
        "--delta",
        metavar="D",
        help="linfsam's smoothed sign tanh(g/D), a fixed number > 0 (default: the exact sign)",
    )
    add("--depth", metavar="L", help="depth L >= 1: 3, 2,3,4 or 2:8 (default 2)")
    add("--mu", metavar="M1,...,Md", help="the example's features, > 0 (default 1,2,3,4,5)")
    add("--loss", metavar="LOSS", help="logistic (default) or exponential")
    add(
        "--collapse-tol",
        type=float,
        metavar="TOL",
        help="a run collapses when |theta| falls to TOL |theta(0)| (default 1e-6)",
    )
    add("--out", metavar="OUT", help="output folder (required)")
    add("--cache", metavar="DIR", help="sweep cache folder (default OUT/cache)")
    add("--width", metavar="WIDTH", help="printed width: column 2.7 in (default) or full 5.5 in")
    add("--quiet", action="store_true", help="no progress output")
    return parser


def main(argv=None) -> int:
    """Run ``python -m figures`` (or ``python -m figures phase ...``) on ``argv``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["phase"]:
        parser = phase_parser()
        args_list = [str(a) for a in argv[1:]]
        args = parser.parse_args(args_list)
        _configure()
        from . import _phase_cli

        return _phase_cli.run(args, args_list, parser)
    parser = _parser()
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in SUMMARIES]
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; choose from {', '.join(SUMMARIES)}")
    _configure()
    from . import _registry

    try:  # the folders and saved data, before anything is computed
        _registry.check_paths(
            args.names, out=args.out, cache=args.cache, quick=args.quick, redraw=args.redraw
        )
    except ValueError as err:
        parser.error(str(err))
    t0 = time.perf_counter()
    written = _registry.make(
        args.names,
        out=args.out,
        cache=args.cache,
        quick=args.quick,
        redraw=args.redraw,
        progress=not args.quiet,
        executor=args.executor,
        jobs=args.jobs,
    )
    if not args.quiet:
        n = sum(len(v) for v in written.values())
        print(f"{n} files in {args.out} ({time.perf_counter() - t0:.1f} s)")
    return 0


def _configure() -> None:
    """:func:`flows.configure`, before the figure modules are imported (they compute)."""
    import flows

    flows.configure()


if __name__ == "__main__":
    sys.exit(main())
