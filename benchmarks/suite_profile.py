"""Issue 14, P2: where the test suite's time goes, from its opt-in per-test profile.

    SAMFLOWS_TEST_PROFILE=/tmp/profile.tsv python -m pytest
    python benchmarks/suite_profile.py /tmp/profile.tsv [--top 15]

tests/conftest.py appends one line per test: wall and process CPU seconds, the seconds JAX spent
tracing, lowering and compiling (XLA backend compiles, counted too), the test's start (seconds
since the run began) and its xdist worker. This prints the totals over the run (the sum over both
xdist workers: about twice the run's wall time), their shares, each worker's tests, busy seconds
and the second its last test ended (a worker that ends long after the other is a file to split:
``--dist loadfile`` runs a file on one worker), and the test files that take longest (``--by
cpu``: the most CPU, less sensitive to the machine's load). A test whose time is mostly in a child
process (a command line, a Dask cluster) shows wall time without CPU time. A profile written
before the start and worker columns were added is read too (no worker table then).
"""

import argparse
import collections

COLUMNS = ("wall", "cpu", "trace", "lower", "compile", "compiles")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--by", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    total = dict.fromkeys(COLUMNS, 0.0)
    files = collections.defaultdict(lambda: dict.fromkeys(COLUMNS, 0.0))
    workers = collections.defaultdict(lambda: {"tests": 0, "busy": 0.0, "cpu": 0.0, "end": 0.0})
    tests = 0
    with open(args.profile) as f:
        for line in f:
            cells = line.rstrip("\n").split("\t")
            values, node = cells[: len(COLUMNS)], cells[-1]
            row = dict(zip(COLUMNS, map(float, values), strict=True))
            for key, value in row.items():
                total[key] += value
                files[node.split("::")[0]][key] += value
            if len(cells) == len(COLUMNS) + 3:  # start and worker
                start, worker = float(cells[len(COLUMNS)]), cells[len(COLUMNS) + 1]
                w = workers[worker]
                w["tests"] += 1
                w["busy"] += row["wall"]
                w["cpu"] += row["cpu"]
                w["end"] = max(w["end"], start + row["wall"])
            tests += 1
    print(f"{tests} tests; seconds summed over the workers (share of the wall sum):")
    for key in COLUMNS[:-1]:
        print(f"   {key:8s} {total[key]:8.1f}  ({total[key] / total['wall']:5.1%})")
    print(f"   XLA compilations: {total['compiles']:.0f}")
    if workers:
        print(f"   {'worker':8s} {'tests':>6s} {'busy':>7s} {'cpu':>7s} {'ended':>7s}")
        for name, w in sorted(workers.items()):
            print(
                f"   {name:8s} {w['tests']:6d} {w['busy']:7.1f} {w['cpu']:7.1f} {w['end']:7.1f}"
            )
    print(f"   {'file':40s} {'wall':>7s} {'cpu':>7s} {'trace':>7s} {'lower':>7s} {'compile':>7s}")
    for name, row in sorted(files.items(), key=lambda kv: -kv[1][args.by])[: args.top]:
        cells = " ".join(f"{row[k]:7.1f}" for k in COLUMNS[:-1])
        print(f"   {name:40s} {cells}")


if __name__ == "__main__":
    main()
