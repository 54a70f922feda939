"""Issue 13: workload 5 on a Dask cluster against the thread runner, on the same cores.

    python benchmarks/cluster.py                       # 1000 × 1000 points, 2 workers
    python benchmarks/cluster.py --n 300 --tasks 200   # quick

In one process, side by side: flows.sweep of workload 1's point function over an
n × n grid with executor="threads" (``--workers`` host threads) and with a
dask.distributed Client on a LocalCluster of ``--workers`` spawned single-threaded
worker processes (what executor="dask" starts), each compiled beforehand. Prints
the wall and CPU times (this process, and the workers'), the throughput ratio
(target: Dask >= 0.8x threads), the per-task overhead of each executor measured
with a trivial point function, the chunk size at which that overhead falls under
5 % of a chunk's compute, and a projection of a 10⁸-point sweep on 16 and 128
workers of this machine's per-core speed.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402


def identity(x):
    """A point function with (almost) no compute: the sweep's own cost per chunk."""
    return {"y": x}


def worker_cpu(client):
    """Process CPU seconds of each worker, summed (0 without a client)."""
    if client is None:
        return 0.0
    return float(sum(client.run(time.process_time).values()))


def timed(client, fn, grid, **kw):
    """(wall s, this process's CPU s, the workers' CPU s, result) of one sweep."""
    w0, c0, t0 = worker_cpu(client), time.process_time(), time.perf_counter()
    res = flows.sweep(fn, grid, progress=False, **kw)
    wall = time.perf_counter() - t0
    return wall, time.process_time() - c0, worker_cpu(client) - w0, res


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="grid is n × n (default 1000)")
    parser.add_argument("--chunk", type=int, default=None, help="default: flows.sweep's own")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=400, help="trivial tasks for the overhead")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    common.header(
        f"issue 13: workload 5 ({args.n}x{args.n}) on Dask vs threads, {args.workers} workers"
    )
    chunk = common.sweep_chunk(args.chunk)  # also compiles the threads' chunk function
    grid = common.grid(args.n, args.n)
    n_points = args.n * args.n
    kw = dict(order=common.expected_cost, chunk_size=chunk)
    t0 = time.perf_counter()
    cluster = LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    client.wait_for_workers(args.workers)
    start_s = time.perf_counter() - t0
    # compile on every worker: one small sweep with several chunks per worker
    t0 = time.perf_counter()
    flows.sweep(
        common.point, common.grid(8 * args.workers, chunk), executor=client, progress=False, **kw
    )
    warm_s = time.perf_counter() - t0
    print(f"   cluster start {start_s:.1f} s; first sweep on it (compiles) {warm_s:.1f} s")

    runs = {}
    for name, ex_kw, cl in [
        ("threads", dict(workers=args.workers), None),
        ("dask", dict(executor=client), client),
    ]:
        wall, cpu, wcpu, res = timed(cl, common.point, grid, **kw, **ex_kw)
        runs[name] = dict(wall=wall, cpu=cpu, worker_cpu=wcpu, res=res)
        print(
            f"   {name:7s}: {n_points} points in {wall:.1f} s = {n_points / wall:.0f} points/s; "
            f"CPU {cpu:.1f} s here + {wcpu:.1f} s in workers; {res.n_chunks} chunks of {chunk}"
        )
    same = all(
        np.array_equal(runs["threads"]["res"][k], runs["dask"]["res"][k], equal_nan=True)
        for k in runs["threads"]["res"].out
    )
    ratio = runs["threads"]["wall"] / runs["dask"]["wall"]
    print(
        f"   throughput dask / threads: {ratio:.3f} (target >= 0.8): "
        f"{'met' if ratio >= 0.8 else 'MISSED'}; results bit-identical: {same}"
    )

    # Per-task overhead: sweeps of one-point chunks of a trivial function, with T/4 and T
    # tasks; the slope is the cost of one more task, the intercept the sweep's fixed cost.
    overhead, fixed, serial = {}, {}, {}
    for name, ex_kw, cl in [
        ("threads", dict(workers=args.workers), None),
        ("dask", dict(executor=client), client),
    ]:
        flows.sweep(identity, {"x": [0.0, 1.0]}, chunk_size=1, progress=False, **ex_kw)
        small, large = args.tasks // 4, args.tasks
        w_s, c_s, wc_s, _ = timed(
            cl, identity, {"x": np.arange(float(small))}, chunk_size=1, **ex_kw
        )
        wall, cpu, wcpu, _ = timed(
            cl, identity, {"x": np.arange(float(large))}, chunk_size=1, **ex_kw
        )
        per_task = (wall - w_s) / (large - small)
        fixed[name] = w_s - small * per_task
        serial[name] = (cpu - c_s) / (large - small)  # this process (client, scheduler)
        # CPU per task, here and in the workers: robust to other load on the machine
        overhead[name] = serial[name] + (wcpu - wc_s) / (large - small)
        print(
            f"   {name:7s}: {large} trivial tasks in {wall:.2f} s (CPU {cpu:.2f} s here "
            f"+ {wcpu:.2f} s in workers); per task: {per_task * args.workers * 1e3:.2f} ms of a "
            f"worker's wall time, {overhead[name] * 1e3:.2f} ms CPU ({serial[name] * 1e3:.2f} ms "
            f"here); fixed {fixed[name]:.2f} s per sweep"
        )
    per_point = runs["threads"]["cpu"] / n_points  # CPU seconds per point
    o = overhead["dask"]
    share = o / (o + chunk * per_point)
    chunk_5 = int(np.ceil(19 * o / per_point))  # o / (o + chunk c) < 5 %
    print(
        f"   per point {per_point * 1e6:.0f} us CPU (threads); Dask per-task overhead "
        f"{o * 1e3:.2f} ms CPU = {share:.1%} of a {chunk}-point chunk; "
        f"under 5 % from {chunk_5} points per chunk"
    )
    # The client (and a LocalCluster's scheduler, in the same process) handle the tasks
    # one at a time: at most 1 / serial tasks per second, whatever the number of workers.
    rate = 1.0 / serial["dask"]
    print(f"   client + scheduler: {rate:.0f} tasks/s at most (their CPU per task)")
    for workers in (16, 128):
        for c in sorted({chunk, 4096}):
            compute = 1e8 * (per_point + o / c) / workers
            tasks = 1e8 / c / rate
            print(
                f"   projection 1e8 points, {workers:3d} workers, chunk {c:4d}: "
                f"{max(compute, tasks) / 60:.1f} min (workers {compute / 60:.1f} min; "
                f"{1e8 / c:.0f} tasks through the client {tasks / 60:.1f} min)"
            )
    common.save(
        f"cluster_{args.n}",
        dict(
            points=n_points,
            chunk=chunk,
            workers=args.workers,
            **{f"{k}_{m}": v[m] for k, v in runs.items() for m in ("wall", "cpu", "worker_cpu")},
            ratio=ratio,
            identical=same,
            overhead_s=overhead,
            fixed_s=fixed,
            serial_s=serial,
            per_point_s=per_point,
            chunk_for_5pct=chunk_5,
            task_rate=rate,
            machine=common.machine(),
        ),
    )
    client.close()
    cluster.close()


if __name__ == "__main__":
    main()
