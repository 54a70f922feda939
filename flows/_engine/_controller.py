r"""The step size controller of the engine: diffrax's PID controller, step for step.

The controller of the diffrax backend (:meth:`flows._options.SolverOptions.controller`, read
here, not copied): ``pcoeff`` 0.4, ``icoeff`` 1, safety 0.9, factors in [0.2, 10], on diffrax's
error order 5 of both solvers, acting on the RMS norm of
:math:`e_k/(\mathrm{atol}+\mathrm{rtol}\max(|y_{0,k}|,|y_{1,k}|))` (the clock's excess part
counted as 0, :func:`flows._options.error_norm`); diffrax's first step 0.01, its
end-of-interval clipping (100 ulp) and the non-finite handling of
:class:`flows._options.FiniteController` (its ``NONFINITE_REJECTIONS``, ``NONFINITE_STALLS``
and ``STALL_STEP``).
"""

import math

import diffrax
import numpy as np

from .._options import NONFINITE_REJECTIONS, NONFINITE_STALLS, STALL_STEP, SolverOptions
from ._jit import jit
from ._lanes import END, FACTOR, FLOOR, REJECTED, RUN, STALLS, STEPS, T0, T1, H

_PID = SolverOptions().controller(1.0)
_SAFETY, _FACTORMIN, _FACTORMAX = float(_PID.safety), float(_PID.factormin), float(_PID.factormax)
_TERM = diffrax.ODETerm(lambda t, y, args: y)
(_ERROR_ORDER,) = {float(s.error_order(_TERM)) for s in (diffrax.Tsit5(), diffrax.Dopri5())}  # 5
_COEFF1 = (_PID.icoeff + _PID.pcoeff + _PID.dcoeff) / _ERROR_ORDER
_COEFF2 = -(_PID.pcoeff + 2 * _PID.dcoeff) / _ERROR_ORDER
#: diffrax's first step for the engine's runs (its PIDController's, from a wrapped term).
_FIRST_STEP = 0.01


@jit
def _error_norms(E, K, y, yi, err, bad, nan_y1, atol, scale, rtol, logs, Ld, tau, clock):
    r"""err[w] = the sum over the state of the squared scaled errors of lane w's step (the RMS
    norm's square times ns), bad[w] = 1 where an error is not finite, nan_y1[w] = 1 where the
    step's end is NaN (then y0 is the candidate of the scale), for every lane.

    With ``logs`` the state is u = log(θ/``scale``) and θ's control is read in u:
    :math:`e_\theta/(\mathrm{atol}+\mathrm{rtol}\,\theta)=e_u/(\mathrm{rtol}+\mathrm{atol}/\theta)`;
    τ (slot ``tau`` of an arc-length clock) is controlled relative above 1."""
    ns, nw = y.shape
    for w in range(nw):
        nan_y1[w] = 0.0
        bad[w] = 0.0
        err[w] = 0.0
    for i in range(ns):
        for w in range(nw):
            nan_y1[w] = 1.0 if yi[i, w] != yi[i, w] else nan_y1[w]
    e0, e1, e2, e3, e4, e5, e6 = E[0], E[1], E[2], E[3], E[4], E[5], E[6]
    for i in range(ns):
        for w in range(nw):
            e = ((((((e0 * K[0, i, w] + e1 * K[1, i, w]) + e2 * K[2, i, w])
                    + e3 * K[3, i, w]) + e4 * K[4, i, w]) + e5 * K[5, i, w])
                 + e6 * K[6, i, w])  # fmt: skip
            e = np.inf if e != e else e
            bad[w] = 1.0 if abs(e) == np.inf else bad[w]
            cand = y[i, w] if nan_y1[w] != 0.0 else yi[i, w]
            if logs and i < Ld:
                big = scale[w] * math.exp(max(y[i, w], cand))  # (u = -inf: a weight at 0)
                v = e / (rtol + atol[w] / big) if big > 0.0 else 0.0
            elif i == tau:
                v = e / (rtol * max(1.0, abs(y[i, w]), abs(cand)))
            else:
                v = e / (atol[w] + max(abs(y[i, w]), abs(cand)) * rtol)
            if not (clock and i == ns - 1):  # the clock's o: flows._options.error_norm
                err[w] += v * v


@jit
def _control(lane, count, w, e, bad, y):
    """Accept or reject lane w's step [T0, T1] on its scaled error norm ``e`` (``bad``: an
    error estimate is not finite; ``y``: the block of the step's start) and propose the next
    step, as diffrax's PID controller with :class:`flows._options.FiniteController`; updates
    the lane's record. Returns (accepted, the step's t0, its t1)."""
    hw = lane[H, w]
    t1 = lane[END, w]
    keep = e < 1.0
    inv = 1.0 / e
    factor = _SAFETY * inv**_COEFF1 * lane[FACTOR, w]
    if factor != factor:
        dt = np.nan
    elif keep:
        dt = hw * min(max(factor, 1.0), _FACTORMAX)
    else:
        dt = hw * min(max(factor, _FACTORMIN), _SAFETY)
    if inv == 0.0 or inv == np.inf:
        inv = 1.0
    step_t0, step_t1 = lane[T0, w], lane[T1, w]
    t0n = step_t1 if keep else step_t0
    t1n = t0n + dt
    failed = False
    if not keep and bad:  # flows._options.FiniteController
        if t1n != t1n:
            t1n = t0n + _FACTORMIN * hw
        failed = True
        for i in range(y.shape[0]):
            if not math.isfinite(y[i, w]):
                failed = False
    count[RUN, w] = count[RUN, w] + 1 if failed else 0
    if failed and abs(hw) <= STALL_STEP * abs(step_t0):
        count[STALLS, w] += 1
    if keep:
        lane[FACTOR, w] = inv**_COEFF2  # the next steps' factor of this error
    count[STEPS, w] += 1
    if not keep:
        count[REJECTED, w] += 1
    lane[T0, w] = min(t0n, t1)
    if t1n > lane[FLOOR, w]:
        lane[T1, w] = t1 if keep else lane[T0, w] + 0.5 * (t1 - lane[T0, w])
    else:
        lane[T1, w] = t1n
    return keep, step_t0, step_t1


@jit
def _given_up(count, w):
    """The run of lane w failed for a non-finite field (too many rejections in a row, or too
    many stalls)."""
    return count[RUN, w] >= NONFINITE_REJECTIONS or count[STALLS, w] >= NONFINITE_STALLS


@jit
def _first_step(t1):
    """The first step's end on a run to ``t1``."""
    return min(_FIRST_STEP, t1)
