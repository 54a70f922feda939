"""The per-trajectory engine (flows.solve_many, backend='numba') against the loop a user
could write, and against today's vmapped-diffrax sweep, on one workload, in one process.

    python benchmarks/engine.py                  # 4,096 points, 3 rounds
    python benchmarks/engine.py --n 1024 --rounds 1 --sweep 0   # quick

Workload: rescaled ℓ2-SAM, L = 2, d = 5, μ = (1, ..., 5), balanced start; points from
numpy.random.default_rng(0): ρ = 10^U(-2, 0), then α = ρ·10^U(-1.5, 0.5); τ ∈ [0, 200]
with 64 saved τ; rtol 1e-8, atol 1e-10·max|θ₀|, collapse at 1e-6‖θ₀‖, escape at 1e6‖θ₀‖.

Contenders:
  engine-1, engine-2   flows.solve_many on 1 and 2 threads;
  user-loop-1          a straightforward per-trajectory numba loop written for this
                       workload alone: Dopri5 with an I controller, the L = 2 field in
                       closed form, Hermite dense output at the saving times and event
                       bisection on it (benchmarks/engine.py:user_loop);
  sweep-1              flows.sweep over the same points, workers=1 (vmapped diffrax).

Per contender: median CPU µs and wall µs per solve over the rounds, the CPU ratio to
engine-1, and the engine's flop rate: 61 flop per field evaluation (the minimal count for
the L = 2, d = 5 rescaled ℓ2-SAM field: ∇m 10 mul, ‖g‖ 10 mul + 9 add + 1 sqrt + 1 div,
θ̂ 10 mul + 10 add, ∇m(θ̂) 10 mul), 6 evaluations per step, against one core's float64
peak (--peak GFlop/s; the default 83.2 is the Xeon of benchmarks/README.md).
"""

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import flows  # noqa: E402

flows.configure()
MU = np.arange(1.0, 6.0)
T1 = 200.0
TS = np.linspace(0.0, T1, 64)
FLOP_PER_EVAL = 61


def points(n):
    rng = np.random.default_rng(0)
    rho = 10 ** rng.uniform(-2, 0, n)
    alpha = rho * 10 ** rng.uniform(-1.5, 0.5, n)
    return alpha, rho


# --- the loop a user could write -----------------------------------------------------------

_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0])
_AD = np.zeros((7, 7))
_AD[1, :1] = [1 / 5]
_AD[2, :2] = [3 / 40, 9 / 40]
_AD[3, :3] = [44 / 45, -56 / 15, 32 / 9]
_AD[4, :4] = [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729]
_AD[5, :5] = [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656]
_AD[6, :6] = [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]
_BD = _AD[6]
_BH = np.array([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])


@njit(cache=True)
def _f(y, out, mu, rho):
    """Rescaled ℓ2-SAM at L = 2: θ̂ = θ + ρ u, u = -∇m/‖∇m‖; out = ∇m(θ̂)."""
    s = 0.0
    for j in range(5):
        s += (mu[j] * y[5 + j]) ** 2 + (mu[j] * y[j]) ** 2
    inv = rho / math.sqrt(s)
    for j in range(5):
        a = y[j] - inv * mu[j] * y[5 + j]
        b = y[5 + j] - inv * mu[j] * y[j]
        out[j] = mu[j] * b
        out[5 + j] = mu[j] * a


@njit(cache=True)
def _nrm(y):
    s = 0.0
    for i in range(10):
        s += y[i] * y[i]
    return math.sqrt(s)


@njit(cache=True)
def _hermite(t, t0, h, y0, y1, f0, f1, out):
    s = (t - t0) / h
    h00 = 2 * s**3 - 3 * s**2 + 1
    h10 = s**3 - 2 * s**2 + s
    h01 = -2 * s**3 + 3 * s**2
    h11 = s**3 - s**2
    for i in range(10):
        out[i] = h00 * y0[i] + h10 * h * f0[i] + h01 * y1[i] + h11 * h * f1[i]


@njit(cache=True)
def _one(alpha, rho, mu, ts, t1, rtol, saved):
    y = np.full(10, alpha)
    atol = 1e-10 * alpha
    n0 = _nrm(y)
    k = np.zeros((7, 10))
    yt = np.zeros(10)
    y1 = np.zeros(10)
    tmp = np.zeros(10)
    _f(y, k[0], mu, rho)
    t, h, ks, steps = 0.0, 0.01, 0, 0
    saved[:] = np.nan
    while t < t1:
        h = min(h, t1 - t)
        for s in range(1, 7):
            for i in range(10):
                acc = y[i]
                for r in range(s):
                    acc += h * _AD[s, r] * k[r, i]
                yt[i] = acc
            _f(yt, k[s], mu, rho)
        err = 0.0
        for i in range(10):
            y1[i] = yt[i]
            e = 0.0
            for r in range(7):
                e += h * (_BD[r] - _BH[r]) * k[r, i]
            sc = atol + rtol * max(abs(y[i]), abs(y1[i]))
            err += (e / sc) ** 2
        err = math.sqrt(err / 10)
        steps += 1
        if err <= 1.0:
            while ks < ts.shape[0] and ts[ks] <= t + h:
                _hermite(ts[ks], t, h, y, y1, k[0], k[6], saved[ks])
                ks += 1
            r1 = _nrm(y1) / n0
            if r1 < 1e-6 or r1 > 1e6:  # an event in this step: bisect on the interpolant
                lo, hi = t, t + h
                for _ in range(60):
                    mid = 0.5 * (lo + hi)
                    _hermite(mid, t, h, y, y1, k[0], k[6], tmp)
                    r = _nrm(tmp) / n0
                    if 1e-6 < r < 1e6:
                        lo = mid
                    else:
                        hi = mid
                for q in range(ts.shape[0]):
                    if ts[q] > hi:
                        saved[q, :] = np.nan
                return (1 if r1 < 1e-6 else 2), hi, steps
            t += h
            y[:] = y1
            k[0, :] = k[6]
        h *= min(10.0, max(0.2, 0.9 * err ** (-1 / 5))) if err > 0 else 10.0
    return 0, t, steps


@njit(cache=True, nogil=True)
def _many(lo, hi, alpha, rho, mu, ts, t1, rtol, saved, status, t_end, steps):
    for n in range(lo, hi):
        status[n], t_end[n], steps[n] = _one(alpha[n], rho[n], mu, ts, t1, rtol, saved[n])


def user_loop(alpha, rho, threads=1):
    n = alpha.size
    saved = np.empty((n, TS.size, 10))
    status, t_end, steps = np.empty(n, np.int64), np.empty(n), np.empty(n, np.int64)
    if threads == 1:
        _many(0, n, alpha, rho, MU, TS, T1, 1e-8, saved, status, t_end, steps)
    else:
        from concurrent.futures import ThreadPoolExecutor

        cuts = np.linspace(0, n, 8 * threads + 1).astype(int)
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda c: _many(c[0], c[1], alpha, rho, MU, TS, T1, 1e-8, saved,
                                          status, t_end, steps),
                          zip(cuts[:-1], cuts[1:], strict=True)))
    return dict(status=status, t_end=t_end, n_steps=steps)


# --- the contenders ------------------------------------------------------------------------


def engine(alpha, rho, threads):
    theta0 = np.broadcast_to(alpha[:, None, None], (alpha.size, 2, 5))
    tr = flows.solve_many(flows.L2SAM(1.0), flows.single_example(MU), theta0, t1=T1, ts=TS,
                          rescaled=True, params={"rho": rho}, workers=threads)  # fmt: skip
    return dict(status=np.asarray(tr.status), t_end=np.asarray(tr.t_end),
                n_steps=np.asarray(tr.n_steps), thetas=np.asarray(tr.thetas))  # fmt: skip


def sweep(alpha, rho):
    import jax.numpy as jnp

    data = flows.single_example(MU)

    def point(a, r):
        tr = flows.solve(flows.L2SAM(r), data, flows.balanced_init(a, 2, 5), t1=T1,
                         ts=jnp.asarray(TS), rescaled=True)  # fmt: skip
        return {"status": tr.status, "t_end": tr.t_end, "n_steps": tr.n_steps}

    res = flows.sweep(point, {"a": alpha, "r": rho}, product=False, workers=1, progress=False)
    return {k: np.asarray(res[k]) for k in ("status", "t_end", "n_steps")}


def timed(fn, rounds):
    fn()  # compile / load the cache
    walls, cpus, out = [], [], None
    for _ in range(rounds):
        c, w = time.process_time(), time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweep", type=int, default=1, help="1: also time flows.sweep")
    ap.add_argument("--peak", type=float, default=83.2, help="one core's float64 GFlop/s")
    args = ap.parse_args(argv)
    alpha, rho = points(args.n)
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    runs = {
        "engine-1": lambda: engine(alpha, rho, 1),
        "engine-2": lambda: engine(alpha, rho, 2),
        "user-loop-1": lambda: user_loop(alpha, rho, 1),
        "user-loop-2": lambda: user_loop(alpha, rho, 2),
    }
    if args.sweep:
        runs["sweep-1"] = lambda: sweep(alpha, rho)
    results = {name: timed(fn, args.rounds) for name, fn in runs.items()}
    base_cpu = results["engine-1"][1]
    ref = results["engine-1"][2]
    steps = ref["n_steps"].mean()
    print(f"{args.n} points, mean {steps:.1f} steps per solve (engine)")
    print(f"{'contender':<12} {'CPU µs/solve':>13} {'wall µs/solve':>14} {'CPU / engine-1':>15}"
          f" {'statuses = engine':>18}")  # fmt: skip
    for name, (wall, cpu, out) in results.items():
        same = np.mean(out["status"] == ref["status"]) if name.startswith(("sweep", "engine")) \
            else np.mean(np.where(out["status"] == 0, 0, out["status"]) == ref["status"])
        print(f"{name:<12} {cpu / args.n * 1e6:13.1f} {wall / args.n * 1e6:14.1f} "
              f"{cpu / base_cpu:15.2f} {same:18.4f}")  # fmt: skip
    wall1, cpu1, _ = results["engine-1"]
    wall2, _, _ = results["engine-2"]
    flops = ref["n_steps"].sum() * 6 * FLOP_PER_EVAL
    rate = flops / cpu1 / 1e9
    print(f"engine-1: {rate:.2f} GFlop/s = {100 * rate / args.peak:.1f} % of {args.peak} "
          f"GFlop/s; parallel efficiency on 2 threads {wall1 / (2 * wall2):.0%}")
    if "sweep-1" in results:
        sw = results["sweep-1"][2]
        print(f"sweep vs engine: statuses {np.mean(sw['status'] == ref['status']):.4f}, "
              f"t_end max rel {np.max(np.abs(sw['t_end'] - ref['t_end']) / ref['t_end']):.1e}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
