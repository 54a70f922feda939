"""Workload 1: the (α, ρ) phase-diagram sweep of ℓ2-SAM at L = 2, and its four variants.

    python benchmarks/sweep.py                  # 256 × 256 grid, 3 repeats, 96 baseline solves
    python benchmarks/sweep.py --devices        # 10⁶ points on whatever devices JAX has
    python benchmarks/sweep.py --dask           # 10⁶ points, Dask LocalCluster against threads
    python benchmarks/sweep.py --flops          # flops of the field evaluations against the peak
    python benchmarks/sweep.py [MODE] --quick   # the same on a small grid, in seconds

The workload is ``common.point`` over ``common.grid(n, n)``, run by ``flows.sweep`` (jit/vmap
chunks, points ordered by the expected-cost key α/ρ, chunks computed concurrently by one host
thread per core). Every mode compiles the chunk function on a small grid first, outside the
timed region, and reports wall and process CPU time and the machine's load average.

* default (the baseline comparison): the sweep, ``--repeats`` times (median), and in the same
  process two scipy baselines on a random subsample of ``--baseline`` points with the same
  tolerances and events: (A) ``flows.solve(backend="scipy", solver="LSODA")``, solve_ivp with the
  jitted JAX field and autodiff Jacobian; (B) the strongest, solve_ivp LSODA with a hand-written
  NumPy field and exact Jacobian. Prints the speed-up per solve in wall and process CPU time, the
  answers' agreement (status, t_end, j†(τ)), the lockstep efficiency with and without the α/ρ
  order. Targets: ≥ 100× per solve against the baseline, whole grid < 30 s.
* ``--devices`` (workload 5): n = 1000 by default; flows.sweep splits each chunk across the local
  accelerators where present, and on a CPU runs one chunk per core in host threads. Cached and
  resumable (``--cache``, default benchmarks/results/cache); ``--fresh`` times it from scratch in a
  new cache folder. Reports points per second.
* ``--dask``: n = 1000 by default; side by side, executor="threads" (``--workers`` host threads)
  and a dask.distributed Client on a LocalCluster of ``--workers`` spawned single-threaded worker
  processes, each compiled beforehand. Prints wall and CPU time (this process and the workers'),
  the throughput ratio (target: Dask ≥ 0.8× threads), whether the results are bit-identical, the
  per-task overhead of each executor (a trivial point function, ``--tasks`` one-point chunks),
  the chunk size at which that overhead falls under 5 % of a chunk's compute, and a projection
  of a 10⁸-point sweep on 16 and 128 workers of this machine's per-core speed.
* ``--flops``: flops per right-hand-side evaluation from XLA's cost analysis of one evaluation of
  the rescaled ℓ2-SAM field (L = 2, d = 5); Tsit5 evaluates the field 6 times per step (7 stages,
  first-same-as-last), accepted or rejected. Two counts: *useful* = Σ_points steps × 6 ×
  flops/eval, and *executed* = Σ_chunks max steps × chunk × 6 × flops/eval (a vmapped while loop
  runs every point until the slowest of its chunk finishes). The achieved rate is divided by the
  peak estimated from lscpu (assumptions printed). Target: ≥ 10 % of the float64 peak.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402

STAGES = 6  # Tsit5 field evaluations per step (FSAL)


def sweep_kw(chunk):
    return dict(order=common.expected_cost, chunk_size=chunk)


def compile_chunk(chunk, **kw):
    """Compile the chunk function outside any timed region (one chunk of a small grid);
    returns the seconds it took."""
    t0 = time.perf_counter()
    flows.sweep(common.point, common.grid(max(chunk // 32, 1), 32), progress=False, **kw)
    return time.perf_counter() - t0


def execution_order(grid):
    """The permutation that puts the grid's points (flattened, "ij") in the sweep's order."""
    mesh = np.meshgrid(*grid.values(), indexing="ij")
    points = {k: v.ravel() for k, v in zip(grid, mesh, strict=True)}
    return np.argsort(common.expected_cost(points), kind="stable")


# --- default: the sweep against the scipy baselines --------------------------------------


def run_sweep(n, chunk, repeats):
    grid = common.grid(n, n)
    kw = dict(sweep_kw(chunk), progress=False)
    compile_s = compile_chunk(chunk, **sweep_kw(chunk))
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        result = flows.sweep(common.point, grid, **kw)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return grid, result, compile_s, walls, cpus


def efficiency(grid, result, chunk):
    n_steps = result["n_steps"].ravel()
    return (
        common.chunk_efficiency(n_steps[execution_order(grid)], chunk),
        common.chunk_efficiency(n_steps, chunk),
    )


def run_baseline(point_fn, alphas, rhos):
    out, times, cpus = [], [], []
    for a, r in zip(alphas, rhos, strict=True):
        t0, c0 = time.perf_counter(), time.process_time()
        out.append(point_fn(a, r))
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return out, np.asarray(times), np.asarray(cpus)


def baselines(args):
    common.header(f"workload 1: {args.n}x{args.n} (alpha, rho) sweep vs scipy LSODA")
    grid, res, compile_s, walls, cpus = run_sweep(args.n, args.chunk, args.repeats)
    n_points = args.n * args.n
    wall = float(np.median(walls))
    per_solve = wall / n_points
    eff_sorted, eff_unsorted = efficiency(grid, res, args.chunk)
    ns = res["n_steps"]
    status_counts = {
        flows.Status.NAMES[k]: int(v) for k, v in enumerate(np.bincount(res["status"].ravel())) if v
    }
    print(
        f"   sweep: compile+first chunk {compile_s:.1f} s; runs {[round(w, 2) for w in walls]} s"
        f" (cpu {[round(c, 1) for c in cpus]} s)"
    )
    print(
        f"   sweep: median {wall:.2f} s for {n_points} points = {per_solve * 1e6:.0f} us/solve, "
        f"{n_points / wall:.0f} points/s; chunk {args.chunk}, "
        f"{res.manifest['executor']['workers']} worker "
        f"thread(s) on {jax.default_backend()}"
    )
    print(f"   steps per solve: mean {ns.mean():.0f}, max {ns.max()}; status {status_counts}")
    print(
        f"   lockstep efficiency: {eff_sorted:.3f} (ordered by alpha/rho), "
        f"{eff_unsorted:.3f} (grid order)"
    )

    rng = np.random.default_rng(args.seed)
    ia = rng.integers(0, args.n, args.baseline)
    ir = rng.integers(0, args.n, args.baseline)
    alphas, rhos = grid["alpha"][ia], grid["rho"][ir]
    common.scipy_flows_point(alphas[0], rhos[0])  # compile the jitted field and Jacobian
    sweep_at = {k: list(v[ia, ir]) for k, v in res.out.items()}
    record = dict(
        n_points=n_points,
        chunk=args.chunk,
        walls=walls,
        cpus=cpus,
        compile_s=compile_s,
        eff_sorted=eff_sorted,
        eff_unsorted=eff_unsorted,
        status=status_counts,
        steps_mean=float(ns.mean()),
        steps_max=int(ns.max()),
        machine=common.machine(),
    )
    for name, fn in [
        ("A flows scipy backend", common.scipy_flows_point),
        ("B numpy field + exact Jacobian", common.scipy_numpy_point),
    ]:
        out, times, bcpu = run_baseline(fn, alphas, rhos)
        cpu_ratio = float(bcpu.mean()) / (float(np.median(cpus)) / n_points)
        agree = common.compare_answers(sweep_at, out)
        mean = float(times.mean())
        print(
            f"   baseline {name}: {args.baseline} solves, median {np.median(times) * 1e3:.1f} ms,"
            f" mean {mean * 1e3:.1f} ms/solve -> whole grid ~{mean * n_points:.0f} s"
        )
        print(
            f"      speed-up per solve: {mean / per_solve:.0f}x wall, {cpu_ratio:.0f}x process "
            f"CPU time (target >= 100x); answers: "
            f"status {agree['status_agree']:.0%}, j-dagger {agree['j_dagger_agree']:.1%}, "
            f"t_end rel. err median {agree['t_end_rel_err_median']:.1e} "
            f"max {agree['t_end_rel_err_max']:.1e}"
        )
        record[name] = dict(
            mean_s=mean,
            median_s=float(np.median(times)),
            speedup=mean / per_solve,
            cpu_speedup=cpu_ratio,
            **agree,
        )
    ok = wall < 30.0
    print(f"   whole grid: {wall:.1f} s (target < 30 s): {'met' if ok else 'MISSED'}")
    common.save(f"sweep_{args.n}", record)


# --- --devices: the sweep on whatever devices JAX has ------------------------------------


def devices(args):
    common.header(f"workload 1 on devices: {args.n}x{args.n} sweep on {jax.default_backend()}")
    chunk = args.chunk
    here = os.path.dirname(os.path.abspath(__file__))
    cache = args.cache or os.path.join(here, "results", "cache")
    if args.fresh:
        cache = tempfile.mkdtemp(
            prefix="sweep-", dir=os.path.dirname(cache) if args.cache else None
        )
    compile_chunk(chunk, **sweep_kw(chunk))
    c0, t0 = time.process_time(), time.perf_counter()
    res = flows.sweep(common.point, common.grid(args.n, args.n), cache_dir=cache, **sweep_kw(chunk))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n_points = args.n * args.n
    counts = np.bincount(res["status"].ravel(), minlength=len(flows.Status.NAMES))
    print(
        f"   {n_points} points in {wall:.1f} s (cpu {cpu:.1f} s) = {n_points / wall:.0f} "
        f"points/s ({res.n_computed} chunks computed, {res.n_cached} read from the cache; chunk "
        f"{chunk}, {len(jax.local_devices())} {jax.default_backend()} device(s))"
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
        f"devices_{args.n}",
        dict(
            points=n_points,
            wall=wall,
            cpu=cpu,
            computed=res.n_computed,
            cached=res.n_cached,
            machine=common.machine(),
        ),
    )


# --- --dask: a Dask LocalCluster against the thread runner, on the same cores -------------


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


def dask(args):
    from distributed import Client, LocalCluster

    common.header(f"workload 1 on Dask ({args.n}x{args.n}) vs threads, {args.workers} workers")
    chunk = args.chunk
    compile_chunk(chunk, **sweep_kw(chunk))  # the threads' chunk function
    grid = common.grid(args.n, args.n)
    n_points = args.n * args.n
    kw = sweep_kw(chunk)
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

    executors = [
        ("threads", dict(workers=args.workers), None),
        ("dask", dict(executor=client), client),
    ]
    runs = {}
    for name, ex_kw, cl in executors:
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
    for name, ex_kw, cl in executors:
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
        f"dask_{args.n}",
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


# --- --flops: the field's flops against the machine's peak -------------------------------


def peak_flops():
    """Peak float64 flop/s from lscpu: cores × GHz × flops/cycle/core (assumptions returned)."""
    text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cores = os.cpu_count()
    mhz = re.search(r"CPU max MHz:\s*([\d.]+)", text)
    if mhz:
        ghz, src = float(mhz.group(1)) / 1e3, "CPU max MHz"
    else:  # KVM guests often hide the clock; BogoMIPS = 2 × the TSC clock on x86
        ghz, src = float(re.search(r"BogoMIPS:\s*([\d.]+)", text).group(1)) / 2e3, "BogoMIPS / 2"
    flags = text.split("Flags:", 1)[-1]
    # Zen 4 executes AVX-512 as two 256-bit halves: 2 FMA pipes × 4 doubles × 2 flops.
    per_cycle = 16 if ("avx512f" in flags or "avx2" in flags) and "fma" in flags else 4
    assumption = (
        f"{cores} cores × {ghz:.2f} GHz ({src}) × {per_cycle} float64 flops/cycle "
        "(2 FMA pipes × 256-bit × 2 flops; no turbo)"
    )
    return cores * ghz * 1e9 * per_cycle, assumption


def flops(args):
    common.header("workload 1: flops of the RHS evaluations against the machine's peak")
    field = jax.jit(
        lambda theta, rho: flows.rescaled_velocity(flows.L2SAM(rho), common.DATA, "logistic", theta)
    )
    cost = field.lower(np.full((2, 5), 0.1), 0.3).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    per_eval = float(cost["flops"])
    compile_chunk(args.chunk, **sweep_kw(args.chunk))
    grid = common.grid(args.n, args.n)
    c0, t0 = time.process_time(), time.perf_counter()
    res = flows.sweep(common.point, grid, progress=False, **sweep_kw(args.chunk))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    steps = res["n_steps"].ravel().astype(np.float64)
    s = steps[execution_order(grid)]
    executed_steps = sum(
        s[i : i + args.chunk].max() * args.chunk for i in range(0, s.size, args.chunk)
    )
    useful = steps.sum() * STAGES * per_eval
    executed = executed_steps * STAGES * per_eval
    peak, assumption = peak_flops()
    print(f"   flops per field evaluation (XLA cost analysis): {per_eval:.0f}")
    print(
        f"   sweep: {steps.size} points in {wall:.2f} s (cpu {cpu:.2f} s); steps "
        f"{steps.sum():.3g} useful, {executed_steps:.3g} executed (lockstep)"
    )
    print(f"   useful   {useful:.3g} flop -> {useful / wall / 1e9:.2f} GFlop/s")
    print(f"   executed {executed:.3g} flop -> {executed / wall / 1e9:.2f} GFlop/s")
    print(f"   peak {peak / 1e9:.1f} GFlop/s: {assumption}")
    print(
        f"   fraction of peak: useful {useful / wall / peak:.2%}, "
        f"executed {executed / wall / peak:.2%} (target >= 10 %)"
    )
    common.save(
        "flops",
        dict(
            per_eval=per_eval,
            wall=wall,
            cpu=cpu,
            useful=useful,
            executed=executed,
            peak=peak,
            assumption=assumption,
            machine=common.machine(),
        ),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--devices", action="store_true", help="10⁶ points on JAX's devices")
    mode.add_argument("--dask", action="store_true", help="Dask LocalCluster against threads")
    mode.add_argument("--flops", action="store_true", help="field flops against the peak")
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help="grid is n × n (default 256; 1000 with --devices/--dask)",
    )
    parser.add_argument("--chunk", type=int, default=None, help="default: flows.sweep's own")
    parser.add_argument("--quick", action="store_true", help="a small grid: runs in seconds")
    baseline = parser.add_argument_group("the baseline comparison (default mode)")
    baseline.add_argument("--repeats", type=int, default=3)
    baseline.add_argument("--baseline", type=int, default=96, help="baseline subsample size")
    baseline.add_argument("--seed", type=int, default=0)
    dev = parser.add_argument_group("--devices")
    dev.add_argument("--cache", default=None, help="default benchmarks/results/cache")
    dev.add_argument("--fresh", action="store_true", help="time from scratch (new cache)")
    dsk = parser.add_argument_group("--dask")
    dsk.add_argument("--workers", type=int, default=2)
    dsk.add_argument("--tasks", type=int, default=400, help="trivial tasks for the overhead")
    args = parser.parse_args()
    if args.quick:
        args.n = args.n or 16
        args.repeats, args.baseline, args.tasks = 1, min(args.baseline, 4), min(args.tasks, 40)
        args.chunk = args.chunk or 64
        args.fresh = args.fresh or args.devices
    args.n = args.n or (1000 if args.devices or args.dask else 256)
    args.chunk = common.sweep_chunk(args.chunk)
    if args.devices:
        devices(args)
    elif args.dask:
        dask(args)
    elif args.flops:
        flops(args)
    else:
        baselines(args)


if __name__ == "__main__":
    main()
