"""The engine's vector field against a field written as one fused lane loop per pass, on
the workload-10 field (rescaled ℓ2-SAM, d = 5, μ = (1, ..., 5)), in one process.

    python benchmarks/engine_field.py

Contenders, each on a (L·d, 32) block of random states (32 lanes), CPU ns per lane and
evaluation (median of 5 rounds of 20,000 evaluations):
  engine        flows._engine._field: the depth-compiled column passes, the rule
                compiled per kind (flows._rules.epsilon), row loops for the norm and θ̂;
  fused         two lane loops in one function, the depth a compile-time constant:
                g = -∇m and Σg² in the first, θ̂ and ∇m(θ̂) in registers in the second;
                ℓ2-SAM's rule written into the loop (what generated code per rule and
                depth would look like).
Both give the same field to 1e-14 relative (checked here).
"""

import math
import statistics
import time

import numpy as np
from numba import literally, njit

from flows import _engine as E

MU = np.arange(1.0, 6.0)


@njit(error_model="numpy")
def _fused(Lc, y, out, rho, cx, d, G, V):
    L = literally(Lc)
    nw = y.shape[1]
    ss, inv = V[0], V[1]
    for w in range(nw):
        ss[w] = 0.0
    for j in range(d):
        c = cx[j]
        for w in range(nw):
            acc = ss[w]
            for lay in range(L):
                pr = 1.0
                for k in range(L):
                    if k != lay:
                        pr *= y[k * d + j, w]
                gv = -c * pr
                G[lay * d + j, w] = gv
                acc += gv * gv
            ss[w] = acc
    for w in range(nw):
        inv[w] = rho[w] / math.sqrt(ss[w])
    for j in range(d):
        c = cx[j]
        for w in range(nw):
            for lay in range(L):
                pr = 1.0
                for k in range(L):
                    if k != lay:
                        pr *= y[k * d + j, w] + inv[w] * G[k * d + j, w]
                out[lay * d + j, w] = c * pr


@njit(error_model="numpy")
def _fused_loop(reps, L, y, out, rho, cx, d, G, V):
    acc = 0.0
    for _ in range(reps):
        if L == 2:
            _fused(2, y, out, rho, cx, d, G, V)
        elif L == 4:
            _fused(4, y, out, rho, cx, d, G, V)
        else:
            _fused(8, y, out, rho, cx, d, G, V)
        acc += out[0, 0]
    return acc


@njit(error_model="numpy")
def _engine_loop(reps, L, y, out, p, X, Y, d):
    CX = E._broadcast(X, Y, d)
    _, S, V, M = E._scratch(y.shape[0], L * d, d, X.shape[0])
    acc = 0.0
    for _ in range(reps):
        E._field(y, out, 1, False, p, X, Y, CX, 0, True, False, L, d, S, V, M)
        acc += out[0, 0]
    return acc


def _ns(fn, reps=20000, rounds=5):
    fn(1)
    times = []
    for _ in range(rounds):
        c = time.process_time()
        fn(reps)
        times.append(time.process_time() - c)
    return statistics.median(times) / reps / E.W * 1e9


def main():
    d, rho = 5, 0.3
    rng = np.random.default_rng(0)
    print(f"{'L':>2} {'engine ns':>10} {'fused ns':>9} {'ratio':>6} {'max rel diff':>13}")
    for L in (2, 4, 8):
        y = rng.uniform(0.5, 1.5, size=(L * d, E.W)) * rng.choice([-1, 1], size=(L * d, E.W))
        p = np.zeros((5, E.W))
        p[0] = rho
        X, Y = MU[None], np.ones(1)
        out_e, out_f = np.zeros_like(y), np.zeros_like(y)
        G, V = np.zeros_like(y), np.zeros((2, E.W))
        rhos = np.full(E.W, rho)
        t_e = _ns(lambda r: _engine_loop(r, L, y, out_e, p, X, Y, d))  # noqa: B023
        t_f = _ns(lambda r: _fused_loop(r, L, y, out_f, rhos, MU, d, G, V))  # noqa: B023
        diff = np.max(np.abs(out_e - out_f) / np.max(np.abs(out_e)))
        print(f"{L:>2} {t_e:10.1f} {t_f:9.1f} {t_e / t_f:6.2f} {diff:13.1e}")


if __name__ == "__main__":
    main()
