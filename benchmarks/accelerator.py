"""Workload 5 (issue 6): the workload-1 sweep with 10⁶ points, on whatever devices JAX has.

    python benchmarks/accelerator.py [--n 1000] [--chunk 8192] [--cache DIR]

Device-agnostic: flows.sweep splits each chunk across the local accelerators
where present; on a CPU it runs one chunk per core in host threads. The
sweep is cached and resumable (``--cache``, default benchmarks/results/cache), so
an interrupted run continues; pass ``--fresh`` to time it from scratch in a new
cache folder. Reports points per second.
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="grid is n × n (default 1000)")
    parser.add_argument("--chunk", type=int, default=None, help="default: flows.sweep's own")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--fresh", action="store_true", help="time from scratch (new cache)")
    args = parser.parse_args()
    args.chunk = common.sweep_chunk(args.chunk)
    common.header(f"workload 5: {args.n}x{args.n} sweep on {jax.default_backend()}")
    chunk = args.chunk
    here = os.path.dirname(os.path.abspath(__file__))
    cache = args.cache or os.path.join(here, "results", "cache")
    if args.fresh:
        cache = tempfile.mkdtemp(
            prefix="sweep-", dir=os.path.dirname(cache) if args.cache else None
        )
    # compile outside the timed region (one chunk of a small grid)
    flows.sweep(
        common.point,
        common.grid(chunk // 32, 32),
        order=common.expected_cost,
        chunk_size=chunk,
        progress=False,
    )
    t0 = time.perf_counter()
    res = flows.sweep(
        common.point,
        common.grid(args.n, args.n),
        order=common.expected_cost,
        chunk_size=chunk,
        cache_dir=cache,
    )
    wall = time.perf_counter() - t0
    n_points = args.n * args.n
    counts = np.bincount(res["status"].ravel(), minlength=6)
    print(
        f"   {n_points} points in {wall:.1f} s = {n_points / wall:.0f} points/s "
        f"({res.n_computed} chunks computed, {res.n_cached} read from the cache; chunk {chunk}, "
        f"{len(jax.local_devices())} {jax.default_backend()} device(s))"
    )
    print(
        f"   status counts {dict(zip(flows.Status.NAMES, counts.tolist(), strict=False))}; "
        f"results in {res.path}"
    )
    if res.n_cached:
        print(
            "   (some chunks came from the cache: the rate above is not a compute rate; "
            "use --fresh)"
        )
    common.save(
        f"accelerator_{args.n}",
        dict(
            points=n_points,
            wall=wall,
            computed=res.n_computed,
            cached=res.n_cached,
            machine=common.machine(),
        ),
    )


if __name__ == "__main__":
    main()
