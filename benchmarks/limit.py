"""Workload 6 (issue 6): how far from the machine's peak the workload-1 sweep runs.

    python benchmarks/limit.py [--n 256] [--chunk 2048]

Flops per right-hand-side evaluation come from XLA's cost analysis of one
evaluation of the rescaled ℓ2-SAM field (L = 2, d = 5). Tsit5 evaluates the
field 6 times per step (7 stages, first-same-as-last), accepted or rejected.
Two counts: *useful* = Σ_points steps × 6 × flops/eval, and *executed* =
Σ_chunks max steps × chunk × 6 × flops/eval (a vmapped while loop runs every
point until the slowest of its chunk finishes). The achieved rate is divided by
the peak estimated from lscpu (assumptions printed).
"""

import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402

STAGES = 6  # Tsit5 field evaluations per step (FSAL)


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--chunk", type=int, default=None, help="default: flows.sweep's own")
    args = parser.parse_args()
    args.chunk = common.sweep_chunk(args.chunk)
    common.header("workload 6: flops of the RHS evaluations against the machine's peak")
    field = jax.jit(
        lambda theta, rho: flows.rescaled_velocity(flows.L2SAM(rho), common.DATA, "logistic", theta)
    )
    cost = field.lower(np.full((2, 5), 0.1), 0.3).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    per_eval = float(cost["flops"])
    kw = dict(order=common.expected_cost, chunk_size=args.chunk, progress=False)
    flows.sweep(common.point, common.grid(args.chunk // 32, 32), **kw)  # compile
    grid = common.grid(args.n, args.n)
    t0 = time.perf_counter()
    res = flows.sweep(common.point, grid, **kw)
    wall = time.perf_counter() - t0
    steps = res["n_steps"].ravel().astype(np.float64)
    mesh = np.meshgrid(*grid.values(), indexing="ij")
    perm = np.argsort(
        common.expected_cost({k: v.ravel() for k, v in zip(grid, mesh, strict=True)}), kind="stable"
    )
    s = steps[perm]
    executed_steps = sum(
        s[i : i + args.chunk].max() * args.chunk for i in range(0, s.size, args.chunk)
    )
    useful = steps.sum() * STAGES * per_eval
    executed = executed_steps * STAGES * per_eval
    peak, assumption = peak_flops()
    print(f"   flops per field evaluation (XLA cost analysis): {per_eval:.0f}")
    print(
        f"   sweep: {steps.size} points in {wall:.2f} s; steps {steps.sum():.3g} useful, "
        f"{executed_steps:.3g} executed (lockstep)"
    )
    print(f"   useful   {useful:.3g} flop -> {useful / wall / 1e9:.2f} GFlop/s")
    print(f"   executed {executed:.3g} flop -> {executed / wall / 1e9:.2f} GFlop/s")
    print(f"   peak {peak / 1e9:.1f} GFlop/s: {assumption}")
    print(
        f"   fraction of peak: useful {useful / wall / peak:.2%}, "
        f"executed {executed / wall / peak:.2%}"
    )
    common.save(
        "limit",
        dict(
            per_eval=per_eval,
            wall=wall,
            useful=useful,
            executed=executed,
            peak=peak,
            assumption=assumption,
            machine=common.machine(),
        ),
    )


if __name__ == "__main__":
    main()
