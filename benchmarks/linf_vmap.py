"""Vmapped exact ℓ∞-SAM throughput: 17 rescaled solves, L = 2, d = 4 (a boundary-search batch).

Run: ``python benchmarks/linf_vmap.py`` (CPU, under a minute).

The batch ``analysis.critical_alpha(flows.LinfSAM(...))`` and ℓ∞ phase diagrams
run: α = 0.1·2^(k + 1/π), k = -8..8, on μ = (1, 2, 3, 4), ρ = 0.1, to t1 = 1e3 or
escape (1e3 ‖θ₀‖). The small α collapse after 3 switches (sliding most of the
time); the large α escape after one segment. Prints the median over 3 repeats
(after compile) of the vmapped batch and of one unvmapped solve, wall and process
CPU seconds, and checks the batch's status, steps and t_end against the same
solves one by one.
"""

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import flows

DATA = flows.single_example([1.0, 2.0, 3.0, 4.0])
ALPHAS = jnp.asarray(0.1 * 2.0 ** (np.linspace(-8, 8, 17) + 1 / np.pi))
T1 = 1e3
REPEATS = 3


def one(alpha):
    tr = flows.solve(
        flows.LinfSAM(0.1), DATA, flows.balanced_init(alpha, 2, 4), t1=T1, rescaled=True,
        rtol=1e-11, atol=1e-30, escape_tol=1e3, max_steps=16384,
    )  # fmt: skip
    return tr.status, tr.n_steps, tr.t_end


def timed(fn, *args):
    """(median wall s, median process CPU s, result) over REPEATS runs after a compile run."""
    t = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    print(f"  compile + first run {time.perf_counter() - t:.1f} s")
    walls, cpus = [], []
    for _ in range(REPEATS):
        w, c = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(fn(*args))
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), out


def main():
    print(f"## vmapped: {ALPHAS.size} solves")
    wall, cpu, (status, steps, t_end) = timed(jax.jit(jax.vmap(one)), ALPHAS)
    print(f"  run: {wall:.2f} s wall, {cpu:.2f} s CPU (median of {REPEATS})")
    print(f"  status {np.asarray(status).tolist()}")
    print(f"  steps  {np.asarray(steps).tolist()}")
    single = jax.jit(one)
    k = int(np.argmax(steps))
    print(f"## one solve, unvmapped: alpha = {float(ALPHAS[k]):.4g} ({int(steps[k])} steps)")
    wall, cpu, _ = timed(single, ALPHAS[k])
    print(f"  run: {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU (median of {REPEATS})")
    rows = [jax.block_until_ready(single(a)) for a in ALPHAS]
    same = all(
        int(s) == int(status[i]) and int(n) == int(steps[i]) and float(t) == float(t_end[i])
        for i, (s, n, t) in enumerate(rows)
    )
    print(f"## vmapped batch equals the solves one by one (status, steps, t_end): {same}")


if __name__ == "__main__":
    main()
