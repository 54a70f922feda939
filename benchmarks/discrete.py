"""Workload 3 (issue 6): 10⁶ discrete ℓ2-SAM steps against a Python loop over optax.contrib.sam.

    python benchmarks/discrete.py [--steps 1000000] [--optax-steps 2000] [--repeats 3]

Problem: L = 2, d = 100, n = 20 separable Gaussian examples (seed 0), logistic
loss, ρ = 0.05, η = 0.01, θ₀ = 0.1. flows.iterate runs all steps in one
``lax.scan`` saving every 1000th iterate. The baseline is the loop a user would
write: optax.contrib.sam(sgd(η), chain(normalize(), sgd(ρ)), sync_period=2), one
jitted SAM step (its adversarial and outer update calls) per Python iteration,
run for ``--optax-steps`` steps and scaled to 10⁶. Both compute the same iterates:
they are compared at the end of the baseline's run. Target: ≥ 50×.
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
import optax  # noqa: E402

import flows  # noqa: E402

RHO, LR, N, D = 0.05, 0.01, 20, 100


def problem():
    x = np.random.default_rng(0).normal(size=(N, D))
    w = np.ones(D)
    y = np.sign(x @ w)
    return flows.Dataset(x, y), jnp.full((2, D), 0.1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--optax-steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    common.header(f"workload 3: {args.steps:.0e} l2-SAM steps, L=2 d={D} n={N}, vs optax loop")
    data, theta0 = problem()
    method = flows.L2SAM(RHO)

    def ours(steps, every):
        return jax.block_until_ready(
            flows.iterate(method, data, theta0, lr=LR, steps=steps, every=every)
        )

    t0 = time.perf_counter()
    ours(args.steps, args.every)
    first = time.perf_counter() - t0
    walls, cpus = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        traj = ours(args.steps, args.every)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    wall, cpu = statistics.median(walls), statistics.median(cpus)

    opt = optax.contrib.sam(
        optax.sgd(LR), optax.chain(optax.contrib.normalize(), optax.sgd(RHO)), sync_period=2
    )
    grad = jax.grad(lambda th: flows.objective(th, data))

    @jax.jit
    def sam_step(params, state):
        for _ in range(2):  # the adversarial call, then the outer call
            updates, state = opt.update(grad(params), state, params)
            params = optax.apply_updates(params, updates)
        return params, state

    def optax_loop(steps):
        params, state = theta0, opt.init(theta0)
        saved = [params]
        for k in range(steps):
            params, state = sam_step(params, state)
            if (k + 1) % args.every == 0:
                saved.append(params)
        return jax.block_until_ready(params), saved

    optax_loop(2)  # compile
    base, base_cpu = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        params, _ = optax_loop(args.optax_steps)
        base.append(time.perf_counter() - t0)
        base_cpu.append(time.process_time() - c0)
    base_per_step = statistics.median(base) / args.optax_steps
    cpu_ratio = statistics.median(base_cpu) / args.optax_steps * args.steps / cpu
    check = flows.iterate(
        method, data, theta0, lr=LR, steps=args.optax_steps, every=args.optax_steps
    )
    err = float(jnp.max(jnp.abs(check.thetas[-1] - params)))
    ratio = base_per_step * args.steps / wall
    print(
        f"   flows.iterate: first call (compile + run) {first:.2f} s; runs "
        f"{[round(w, 2) for w in walls]} s -> median {wall:.2f} s = "
        f"{wall / args.steps * 1e9:.0f} ns/step;"
        f" status {traj.status_name}, {traj.thetas.shape[0]} saved iterates"
    )
    print(
        f"   optax loop: {args.optax_steps} steps, runs {[round(b, 2) for b in base]} s -> "
        f"{base_per_step * 1e6:.1f} us/step -> "
        f"{base_per_step * args.steps:.0f} s for {args.steps:.0e}"
    )
    print(
        f"   same iterates: max |theta_flows - theta_optax| after {args.optax_steps} steps "
        f"= {err:.1e}"
    )
    print(
        f"   speed-up: {ratio:.0f}x wall, {cpu_ratio:.0f}x process CPU time "
        f"(target >= 50x): {'met' if ratio >= 50 else 'MISSED'}"
    )
    common.save(
        "discrete",
        dict(
            walls=walls,
            first=first,
            optax_per_step=base_per_step,
            ratio=ratio,
            max_abs_diff=err,
            machine=common.machine(),
        ),
    )


if __name__ == "__main__":
    main()
