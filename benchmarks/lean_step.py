"""Issue 14 P1/P6: what a lean batched integrator would save per point-step (a measurement).

    python benchmarks/lean_step.py                  # 256 points (one sweep chunk), 5 repeats
    python benchmarks/lean_step.py --points 1024 --repeats 7

The sweep's cost per point-step is flows.solve under jax.vmap: diffrax's loop (step-size
controller, event, saving) around the unrolled Tsit5 stages of flows._rk. This script runs,
in one process on the same workload-1 points (ℓ2-SAM, L = 2, μ = (1, …, 5), rescaled,
rtol 1e-8, atol 1e-10):

* ``diffrax, workload 1``: benchmarks/common.point (events at ‖θ‖ = 1e±6 ‖θ₀‖, j† saved on 64 τ);
* ``diffrax, bare``: the same solve to τ = 20 without events, saving only the end, on points
  that escape (α/ρ log-uniform in [0.6, 3], above α_c = 0.347ρ: without the collapse event a
  collapsing point chatters at the origin for its whole step budget);
* ``lean, bare``: a hand-written batched loop with diffrax's Tsit5 tableau, FSAL stage, error
  norm (RMS of e / (atol + rtol max(|y₀|, |y₁|))) and PID controller (pcoeff 0.4, icoeff 1,
  safety 0.9, factors in [0.2, 10]), per-point step sizes and masks, calling flows' own field
  (flows._dynamics.Field) on the batch;
* ``lean, events + saving``: the same loop, plus the norm-threshold stop after each accepted
  step and the state on the 64 τ of workload 1 through diffrax's Tsit5 interpolation.

It is a measurement, not a solver of the package: the lean loop starts from a fixed first step
(diffrax selects its own), so its steps differ from diffrax's by a few and its end states agree
to the tolerance (printed), not to rounding. Per point-step cost = process CPU / (points × the
batch's largest step count), the lockstep cost of a vmapped chunk.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import flows  # noqa: E402
from flows._dynamics import Field  # noqa: E402

RTOL, ATOL = 1e-8, 1e-10
T_BARE = 20.0
MAX_STEPS = 100_000  # flows.SolverOptions' default
_TAB = diffrax.Tsit5().tableau
_A = [[float(x) for x in row] for row in _TAB.a_lower]
_B_ERR = [float(x) for x in _TAB.b_error]
_INTERP = diffrax.Tsit5().interpolation_cls


def _lean(alpha, rho, t1, ts, events):
    """The lean batched Tsit5 loop: state (B, L, d); returns (y, t, steps, saved, stopped)."""
    n_points = alpha.shape[0]
    y0 = jax.vmap(lambda a: flows.balanced_init(a, common.DEPTH, common.MU.size))(alpha)
    methods = jax.vmap(flows.L2SAM)(rho)
    field = jax.vmap(lambda m, y: Field(m, common.DATA, "logistic", True)(0.0, y))
    f = lambda y: field(methods, y)  # noqa: E731
    lane = lambda x: x[:, None, None]  # noqa: E731
    norm0 = jnp.sqrt(jnp.sum(y0**2, axis=(1, 2)))
    saved0 = jnp.zeros((ts.shape[0], *y0.shape))

    def save(carry, t0, t_new, y_old, h, ks, ok):
        """Write the interpolant at every τ of ``ts`` in (t0, t_new] (lanes ``ok``)."""
        k = jnp.stack(ks, axis=1)  # (B, 7, L, d)
        interp = jax.vmap(lambda a, b, y, kk: _INTERP(t0=a, t1=b, y0=y, y1=y, k=kk))(
            t0, t0 + h, y_old, k
        )

        def more(c):
            idx, _ = c
            return jnp.any(
                ok & (idx < ts.shape[0]) & (ts[jnp.minimum(idx, ts.shape[0] - 1)] <= t_new)
            )

        def one(c):
            idx, buf = c
            i = jnp.minimum(idx, ts.shape[0] - 1)
            due = ok & (idx < ts.shape[0]) & (ts[i] <= t_new)
            val = jax.vmap(lambda it, t: it.evaluate(t))(interp, ts[i])
            buf = buf.at[i, jnp.arange(n_points)].set(
                jnp.where(lane(due), val, buf[i, jnp.arange(n_points)])
            )
            return idx + due, buf

        return jax.lax.while_loop(more, one, carry)

    def body(c):
        y, fy, t, h, prev, steps, stopped, idx, buf = c
        active = (t < t1) & ~stopped & (steps < MAX_STEPS)
        h = jnp.minimum(h, t1 - t)
        ks, yi = [fy], y
        for a in _A:
            yi = y
            for w, k in zip(a, ks, strict=False):
                if w:
                    yi = yi + lane(w * h) * k
            ks.append(f(yi))
        err = sum(w * k for w, k in zip(_B_ERR, ks, strict=True) if w) * lane(h)
        scale = ATOL + RTOL * jnp.maximum(jnp.abs(y), jnp.abs(yi))
        e = jnp.sqrt(jnp.mean((err / scale) ** 2, axis=(1, 2)))
        keep = e < 1
        inv = 1 / e
        factor = jnp.clip(
            0.9 * inv ** (1.4 / 5) * prev ** (-0.4 / 5),
            jnp.where(keep, 1.0, 0.2),
            jnp.where(keep, 10.0, 0.9),
        )
        ok = keep & active
        if events:
            norm = jnp.sqrt(jnp.sum(yi**2, axis=(1, 2)))
            hit = (norm <= 1e-6 * norm0) | (norm >= 1e6 * norm0)
            idx, buf = save((idx, buf), t, t + h, y, h, ks, ok)
            stopped = stopped | (ok & hit)
        y = jnp.where(lane(ok), yi, y)
        fy = jnp.where(lane(ok), ks[-1], fy)
        t = jnp.where(ok, t + h, t)
        h = jnp.where(active, h * factor, h)
        prev = jnp.where(ok, inv, prev)
        return y, fy, t, h, prev, steps + active, stopped, idx, buf

    init = (
        y0, f(y0), jnp.zeros(n_points), jnp.full(n_points, 1e-3), jnp.ones(n_points),
        jnp.zeros(n_points, int), jnp.zeros(n_points, bool), jnp.zeros(n_points, int), saved0,
    )  # fmt: skip
    cond = lambda c: jnp.any((c[2] < t1) & ~c[6] & (c[5] < MAX_STEPS))  # noqa: E731
    y, _, t, _, _, steps, stopped, _, saved = jax.lax.while_loop(cond, body, init)
    return y, t, steps, saved, stopped


def _diffrax_bare(alpha, rho):
    def one(a, r):
        traj = flows.solve(
            flows.L2SAM(r), common.DATA, flows.balanced_init(a, common.DEPTH, common.MU.size),
            t1=T_BARE, rescaled=True, collapse_tol=None, escape_tol=None,
        )  # fmt: skip
        return traj.theta_end, traj.t_end, traj.n_steps

    return jax.vmap(one)(alpha, rho)


def _timed(fn, args, repeats):
    jax.block_until_ready(fn(*args))  # compile
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return float(np.median(walls)), float(np.median(cpus)), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    common.header("issue 14: a lean batched integrator, cost per point-step")
    rng = np.random.default_rng(args.seed)
    alpha = jnp.asarray(np.exp(rng.uniform(*np.log(common.ALPHA_RANGE), args.points)))
    rho = jnp.asarray(np.exp(rng.uniform(*np.log(common.RHO_RANGE), args.points)))
    up = rho * jnp.asarray(np.exp(rng.uniform(np.log(0.6), np.log(3.0), args.points)))
    ts = jnp.asarray(common.TS)
    runs = {
        "diffrax, workload 1": (jax.jit(jax.vmap(common.point)), (alpha, rho)),
        "diffrax, bare": (jax.jit(_diffrax_bare), (up, rho)),
        "lean, bare": (jax.jit(lambda a, r: _lean(a, r, T_BARE, ts, False)), (up, rho)),
        "lean, events + saving": (
            jax.jit(lambda a, r: _lean(a, r, common.T1, ts, True)),
            (alpha, rho),
        ),
    }
    results = {}
    print(
        f"{'run':24s} {'wall ms':>9s} {'cpu ms':>9s} {'max steps':>9s} {'ns/point-step (cpu)':>20s}"
    )
    for name, (fn, fargs) in runs.items():
        wall, cpu, out = _timed(fn, fargs, args.repeats)
        steps = out["n_steps"] if isinstance(out, dict) else out[2]
        worst = int(np.max(np.asarray(steps)))
        per = cpu / (args.points * worst) * 1e9
        results[name] = (out, per)
        print(f"{name:24s} {wall * 1e3:9.1f} {cpu * 1e3:9.1f} {worst:9d} {per:20.0f}")
    ref, lean = results["diffrax, bare"][0][0], results["lean, bare"][0][0]
    rel = float(jnp.max(jnp.abs(lean - ref) / jnp.abs(ref)))
    print(f"lean vs diffrax end states (bare, τ = {T_BARE:g}): max relative difference {rel:.1e}")
    for a, b in (("diffrax, bare", "lean, bare"), ("diffrax, workload 1", "lean, events + saving")):
        print(f"{b} / {a}: CPU per point-step ratio {results[b][1] / results[a][1]:.2f}")


if __name__ == "__main__":
    main()
