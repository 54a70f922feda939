"""The Runge–Kutta tableaux, stages and interpolants of the engine's solvers: diffrax's
Tsit5 (``solver`` 0) and Dopri5 (1), read from diffrax itself (the one module of the engine
that reads diffrax's private tableaux), so that the engine takes diffrax's steps.

``_A[solver]``: the stage coefficients (7, 7), row s the a_sr of stage s; ``_E[solver]``: the
error estimate's weights; the dense output is diffrax's interpolant of each solver.
"""

import numpy as np
from diffrax._solver.dopri5 import _dopri5_tableau, _Dopri5Interpolation
from diffrax._solver.tsit5 import _tsit5_tableau

from ._jit import jit

#: The engine's solvers, by name, and their codes.
SOLVERS = {"tsit5": 0, "dopri5": 1}


def _read_tableau(tab):
    a = np.zeros((7, 7))
    for i, row in enumerate(tab.a_lower):
        a[i + 1, : len(row)] = row
    return a, np.asarray(tab.b_error, float)


_A = np.stack([_read_tableau(_tsit5_tableau)[0], _read_tableau(_dopri5_tableau)[0]])
_E = np.stack([_read_tableau(_tsit5_tableau)[1], _read_tableau(_dopri5_tableau)[1]])
_DOPRI5_MID = np.asarray(_Dopri5Interpolation.c_mid, float)


@jit
def _stage(out, y, K, a, s, M):
    """out = y + Σ_{r<s} a_r K_r on the flat blocks, summed left to right, in one loop."""
    if s == 1:
        a0 = a[0]
        for k in range(M):
            out[k] = y[k] + a0 * K[0, k]
    elif s == 2:
        a0, a1 = a[0], a[1]
        for k in range(M):
            out[k] = (y[k] + a0 * K[0, k]) + a1 * K[1, k]
    elif s == 3:
        a0, a1, a2 = a[0], a[1], a[2]
        for k in range(M):
            out[k] = ((y[k] + a0 * K[0, k]) + a1 * K[1, k]) + a2 * K[2, k]
    elif s == 4:
        a0, a1, a2, a3 = a[0], a[1], a[2], a[3]
        for k in range(M):
            out[k] = (((y[k] + a0 * K[0, k]) + a1 * K[1, k]) + a2 * K[2, k]) + a3 * K[3, k]
    elif s == 5:
        a0, a1, a2, a3, a4 = a[0], a[1], a[2], a[3], a[4]
        for k in range(M):
            out[k] = ((((y[k] + a0 * K[0, k]) + a1 * K[1, k]) + a2 * K[2, k])
                      + a3 * K[3, k]) + a4 * K[4, k]  # fmt: skip
    else:
        a0, a1, a2, a3, a4, a5 = a[0], a[1], a[2], a[3], a[4], a[5]
        for k in range(M):
            out[k] = (((((y[k] + a0 * K[0, k]) + a1 * K[1, k]) + a2 * K[2, k])
                       + a3 * K[3, k]) + a4 * K[4, k]) + a5 * K[5, k]  # fmt: skip


@jit
def _tsit5_weights(tau):
    """The weights b_r(τ) of diffrax's Tsit5 interpolant y0 + Σ_r b_r K_r at the fraction τ of
    the step."""
    t2 = tau * tau
    b1 = -1.0530884977290216 * tau * (tau - 1.3299890189751412) * (
        t2 - 1.4364028541716351 * tau + 0.7139816917074209
    )
    b2 = 0.1017 * t2 * (t2 - 2.1966568338249754 * tau + 1.2949852507374631)
    b3 = 2.490627285651252793 * t2 * (t2 - 2.38535645472061657 * tau + 1.57803468208092486)
    b4 = -16.54810288924490272 * (tau - 1.21712927295533244) * (
        tau - 0.61620406037800089
    ) * t2
    b5 = 47.37952196281928122 * (tau - 1.203071208372362603) * (
        tau - 0.658047292653547382
    ) * t2
    b6 = -34.87065786149660974 * (tau - 1.2) * (tau - 0.666666666666666667) * t2
    b7 = 2.5 * (tau - 1.0) * (tau - 0.6) * t2
    return b1, b2, b3, b4, b5, b6, b7


@jit
def _interpolate(solver, t, t0, t1, y0, y1, K, w, ns, out):
    """The step's local interpolant at t, lane w, into ``out`` (ns,) (diffrax's Tsit5 /
    Dopri5 interpolation)."""
    tau = 0.0 if t0 == t1 else (t - t0) / (t1 - t0)
    if solver == 0:
        b1, b2, b3, b4, b5, b6, b7 = _tsit5_weights(tau)
        for i in range(ns):
            out[i] = y0[i, w] + (
                b1 * K[0, i, w] + b2 * K[1, i, w] + b3 * K[2, i, w] + b4 * K[3, i, w]
                + b5 * K[4, i, w] + b6 * K[5, i, w] + b7 * K[6, i, w]
            )  # fmt: skip
    else:
        for i in range(ns):
            acc = 0.0
            for r in range(7):
                acc += _DOPRI5_MID[r] * K[r, i, w]
            ymid = y0[i, w] + acc
            a0, a1, f0, f1 = y0[i, w], y1[i, w], K[0, i, w], K[6, i, w]
            a = 2.0 * (f1 - f0) - 8.0 * (a1 + a0) + 16.0 * ymid
            b = 5.0 * f0 - 3.0 * f1 + 18.0 * a0 + 14.0 * a1 - 32.0 * ymid
            c = f1 - 4.0 * f0 - 11.0 * a0 - 5.0 * a1 + 16.0 * ymid
            out[i] = (((a * tau + b) * tau + c) * tau + f0) * tau + a0
