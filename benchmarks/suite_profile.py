"""Issue 14, P2: where the test suite's time goes, from its opt-in per-test profile.

    SAMFLOWS_TEST_PROFILE=/tmp/profile.tsv python -m pytest
    python benchmarks/suite_profile.py /tmp/profile.tsv [--top 15]

tests/conftest.py appends one line per test: wall and process CPU seconds, and the seconds JAX
spent tracing, lowering and compiling (XLA backend compiles, counted too). This prints the totals
over the run (the sum over both xdist workers: about twice the run's wall time), their shares, and
the test files that take longest. A test whose time is mostly in a child process (a command line,
a Dask cluster) shows wall time without CPU time.
"""

import argparse
import collections

COLUMNS = ("wall", "cpu", "trace", "lower", "compile", "compiles")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    total = dict.fromkeys(COLUMNS, 0.0)
    files = collections.defaultdict(lambda: dict.fromkeys(COLUMNS, 0.0))
    tests = 0
    with open(args.profile) as f:
        for line in f:
            *values, node = line.rstrip("\n").split("\t")
            row = dict(zip(COLUMNS, map(float, values), strict=True))
            for key, value in row.items():
                total[key] += value
                files[node.split("::")[0]][key] += value
            tests += 1
    print(f"{tests} tests; seconds summed over the workers (share of the wall sum):")
    for key in COLUMNS[:-1]:
        print(f"   {key:8s} {total[key]:8.1f}  ({total[key] / total['wall']:5.1%})")
    print(f"   XLA compilations: {total['compiles']:.0f}")
    print(f"   {'file':40s} {'wall':>7s} {'cpu':>7s} {'trace':>7s} {'lower':>7s} {'compile':>7s}")
    for name, row in sorted(files.items(), key=lambda kv: -kv[1]["wall"])[: args.top]:
        cells = " ".join(f"{row[k]:7.1f}" for k in COLUMNS[:-1])
        print(f"   {name:40s} {cells}")


if __name__ == "__main__":
    main()
