"""Workload 1 (issue 6): the 256 × 256 (α, ρ) phase-diagram sweep against scipy LSODA.

    python benchmarks/sweep.py                 # full grid, 3 repeats, 96 baseline solves
    python benchmarks/sweep.py --n 64 --repeats 1 --baseline 8   # quick

Runs flows.sweep (jit/vmap chunks, points ordered by the expected-cost key α/ρ,
chunks computed concurrently by one host thread per core) and, in the same process, two
baselines on a random subsample of the same points with the same tolerances and
events: (A) flows.solve(backend="scipy", solver="LSODA"), i.e. solve_ivp with the
jitted JAX field and autodiff Jacobian; (B) solve_ivp LSODA with a hand-written
NumPy field and exact Jacobian. The answers (status, t_end, j†(τ)) are compared
point by point. Targets: ≥ 100× per solve against the baseline, whole grid < 30 s.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402


def run_sweep(n, chunk, repeats):
    grid = common.grid(n, n)
    kw = dict(order=common.expected_cost, chunk_size=chunk, progress=False)
    t0 = time.perf_counter()
    warm = common.grid(chunk // 32, 32)  # compiles the chunk function (one chunk)
    flows.sweep(common.point, warm, **kw)
    compile_s = time.perf_counter() - t0
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        result = flows.sweep(common.point, grid, **kw)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return grid, result, compile_s, walls, cpus


def efficiency(grid, result, chunk):
    n_steps = result["n_steps"].ravel()
    points = {
        k: v.ravel() for k, v in zip(grid, np.meshgrid(*grid.values(), indexing="ij"), strict=False)
    }
    perm = np.argsort(common.expected_cost(points), kind="stable")
    return common.chunk_efficiency(n_steps[perm], chunk), common.chunk_efficiency(n_steps, chunk)


def run_baseline(point_fn, alphas, rhos):
    out, times, cpus = [], [], []
    for a, r in zip(alphas, rhos, strict=False):
        t0, c0 = time.perf_counter(), time.process_time()
        out.append(point_fn(a, r))
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return out, np.asarray(times), np.asarray(cpus)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=256, help="grid is n × n (default 256)")
    parser.add_argument("--chunk", type=int, default=None, help="default: flows.sweep's own")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=int, default=96, help="baseline subsample size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.chunk = common.sweep_chunk(args.chunk)
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
    sweep_at = {k: v[ia, ir] for k, v in res.out.items()}
    sweep_at = {k: list(v) for k, v in sweep_at.items()}
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


if __name__ == "__main__":
    main()
