"""``python -m analysis check [--quick] [--json PATH] [--jobs N]``: the theorem-check report
(claims C1–C4); ``python -m analysis depth``: the ℓ2-SAM depth table.

The parser is built before anything heavy is imported: ``--help`` and a bad flag answer
without loading JAX.
"""

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from samflows_cli import ArgumentParser, positive_int, run_command


def _unwritable(path: Path) -> str | None:
    """Why a file cannot be written at ``path`` (without creating it), or None."""
    folder = path.parent
    if path.is_dir():
        return "is a folder, not a file"
    if not folder.is_dir():
        return f"{folder} is not a folder" if folder.exists() else f"no such folder {folder}"
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "not writable"
    return None


def main(argv=None) -> int:
    """``python -m analysis check [--quick] [--json PATH] [--jobs N]``; returns the exit status."""
    parser = ArgumentParser(
        prog="python -m analysis",
        description="The theorem-check report (claims C1-C4 and the depth results as numerical "
        "experiments, one PASS/FAIL row per check) and the l2-SAM depth table.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="run claims C1-C4 as experiments, one row per check")
    check.add_argument("--json", metavar="PATH", help="also write the table as JSON to PATH")
    check.add_argument("--quick", action="store_true", help="looser tolerances, fewer points")
    check.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        help="processes running the checks side by side (default: one per core)",
    )
    sub.add_parser("depth", help="l2-SAM depth study (L = 2..8): alpha_c, alpha_direct, j† paths")
    args = parser.parse_args(argv)
    if args.command == "check" and args.json:  # checked first, not after minutes of checks
        problem = _unwritable(Path(args.json))
        if problem:
            parser.error(f"--json {args.json}: {problem}")
    import flows

    flows.configure()  # before the first JAX computation
    if args.command == "depth":
        from ._depth import depth_table, format_markdown

        print(format_markdown(depth_table(progress=True)))
        return 0
    from . import _check

    start = time.perf_counter()
    rows = _check.run_checks(quick=args.quick, progress=True, jobs=args.jobs)
    elapsed = time.perf_counter() - start
    print(_check.format_table(rows))
    counts = {k: sum(r.result == k for r in rows) for k in ("PASS", "FAIL")}
    print(
        f"{len(rows)} checks: "
        + ", ".join(f"{v} {k}" for k, v in counts.items())
        + f" ({elapsed:.0f} s)"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "rows": [dataclasses.asdict(r) for r in rows],
                    "seconds": elapsed,
                    "quick": args.quick,
                },
                fh,
                indent=2,
                ensure_ascii=False,
            )
    return 1 if _check.failed(rows) else 0


if __name__ == "__main__":
    sys.exit(run_command("python -m analysis", main))
