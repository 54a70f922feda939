r"""The step size controller of the engine: diffrax's PID controller, step for step.

The controller of the diffrax backend (:meth:`flows._options.SolverOptions.controller`, read
here, not copied): ``pcoeff`` 0.4, ``icoeff`` 1, safety 0.9, factors in [0.2, 10], on diffrax's
error order 5 of both solvers, acting on the RMS norm of
:math:`e_k/(\mathrm{atol}+\mathrm{rtol}\max(|y_{0,k}|,|y_{1,k}|))` (the clock's excess part
counted as 0, :func:`flows._options.error_norm`); diffrax's first step 0.01, its
end-of-interval clipping (100 ulp) and the non-finite handling of
:class:`flows._options.FiniteController` (its ``NONFINITE_REJECTIONS``, ``NONFINITE_STALLS``
and ``STALL_STEP``). Here: the constants, the error norms of every lane (:func:`_error_norms`)
and the proposal of the next step (:func:`_propose`); the loop (:mod:`flows._engine._chunk`)
applies them to each lane with diffrax's clipping and the non-finite counts.
"""

import math

import diffrax
import numpy as np

from .._options import SolverOptions
from ._jit import inlined, jit

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


@inlined
def _propose(e, h, factor0):
    """diffrax's PID proposal from the scaled error norm ``e`` of a step of size ``h``
    (``factor0``: the factor of the last accepted error, 1 at the start): (accepted, the next
    step's size, the inverse error whose power ``_COEFF2`` is the next factor). A NaN factor
    proposes a NaN step; an error of 0 or inf leaves the factor at 1."""
    keep = e < 1.0
    inv = 1.0 / e
    factor = _SAFETY * inv**_COEFF1 * factor0
    if factor != factor:
        dt = np.nan
    elif keep:
        dt = h * min(max(factor, 1.0), _FACTORMAX)
    else:
        dt = h * min(max(factor, _FACTORMIN), _SAFETY)
    if inv == 0.0 or inv == np.inf:
        inv = 1.0
    return keep, dt, inv
