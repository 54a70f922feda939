"""Workload 4 (issue 6): per-solve cost against d, n and L, with fitted exponents.

    python benchmarks/scaling.py [--repeats 3]

One flows.solve (diffrax Tsit5, rtol 1e-8, atol 1e-10) of the plain ℓ2-SAM flow
(ρ = 0.5) on n Gaussian examples in d dimensions (labels from a random teacher,
rows scaled to ‖x‖ = 1), from θ₀ = 0.1 at depth L, to t1 = 10⁴ (~80-100 steps). One parameter
varies at a time (defaults d = 100, n = 10, L = 2). Adaptive step counts change
with the problem, so the table reports the time per solve and per solver step;
the exponent is the log-log slope of time per step against d·n (or L). Expected:
linear in d·n once the arrays are large enough to dominate the per-step overhead.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402


def dataset(n, d):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.sign(x @ rng.normal(size=d))
    y[y == 0] = 1.0
    return flows.Dataset(x, y)


def measure(n, d, depth, repeats):
    data = dataset(n, d)
    theta0 = jnp.full((depth, d), 0.1)

    @jax.jit
    def run(data, theta0):
        traj = flows.solve(flows.L2SAM(0.5), data, theta0, t1=1e4, ts=jnp.array([1e4]))
        return traj.n_steps, traj.status

    t0 = time.perf_counter()
    jax.block_until_ready(run(data, theta0))
    compile_s = time.perf_counter() - t0
    times, cpus = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        steps, status = jax.block_until_ready(run(data, theta0))
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    # CPU time of this process: less disturbed than wall time by other load
    return statistics.median(times), statistics.median(cpus), int(steps), int(status), compile_s


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    common.header("workload 4: per-solve cost against d, n and L")
    sweeps = {
        "d": [(10, 10, 2), (100, 10, 2), (1000, 10, 2), (10000, 10, 2)],
        "n": [(100, 1, 2), (100, 10, 2), (100, 100, 2), (100, 1000, 2)],
        "L": [(100, 10, 1), (100, 10, 2), (100, 10, 4), (100, 10, 8)],
    }
    record = {}
    print(
        f"   {'vary':4s} {'d':>6s} {'n':>5s} {'L':>2s} {'solve ms':>9s} {'steps':>6s} "
        f"{'us/step':>8s} {'cpu us/step':>11s} {'compile s':>9s}"
    )
    for vary, cases in sweeps.items():
        xs, per_step = [], []
        for d, n, depth in cases:
            wall, cpu, steps, status, compile_s = measure(n, d, depth, args.repeats)
            xs.append({"d": d * n, "n": d * n, "L": depth}[vary])
            per_step.append(cpu / steps)
            print(
                f"   {vary:4s} {d:6d} {n:5d} {depth:2d} {wall * 1e3:9.2f} {steps:6d} "
                f"{wall / steps * 1e6:8.2f} {cpu / steps * 1e6:11.2f} {compile_s:9.1f}  "
                f"{flows.Status.name(status)}"
            )
            record[f"{vary}:{d},{n},{depth}"] = dict(
                wall=wall, cpu=cpu, steps=steps, compile_s=compile_s
            )
        slope_all = np.polyfit(np.log(xs), np.log(per_step), 1)[0]
        slope_top = np.polyfit(np.log(xs[-2:]), np.log(per_step[-2:]), 1)[0]
        label = "d*n" if vary != "L" else "L"
        print(
            f"   -> cpu time/step ~ ({label})^{slope_all:.2f} over the range, "
            f"^{slope_top:.2f} between the two largest"
        )
        record[f"exponent_{vary}"] = dict(all=slope_all, top=slope_top)
    common.save("scaling", record)


if __name__ == "__main__":
    main()
