r"""The engine's events: the stopping conditions of one lane, the test at each accepted
step's end, the event's location on the step's interpolant and its status.

An event is a downcrossing of 0 by the stopping condition of
:func:`flows._events.stop_conditions` (collapse, escape, loss, and the room before
:math:`\beta` overflows; −1 where θ or β is not finite) at an accepted step's end, located
by bisection on the step's interpolant to :math:`10^{-13}|t|+10^{-20}t_1`
(:class:`flows._events.Bisection`, its tolerances :data:`flows._events.EVENT_RTOL` and
``EVENT_ATOL``); the state there is the interpolant's, and the status is the condition
closest to 0 there.
"""

import inspect
import math

import numpy as np
import optimistix as optx

from .._dynamics import _LOG_MAX
from .._events import EVENT_ATOL, EVENT_RTOL
from .._trajectory import Status
from ._jit import inlined, jit
from ._norms import _norm, _scaled_norms
from ._tableau import _interpolate
from ._vector_field import _exp, _loss, _margin

_OK, _COLLAPSED, _ESCAPED = Status.OK, Status.COLLAPSED, Status.ESCAPED
_CONVERGED, _MAXED, _NONFINITE = Status.CONVERGED, Status.MAX_STEPS, Status.NONFINITE
#: The budget of one root find: optimistix's default, which diffrax's events use.
_ROOT_STEPS = inspect.signature(optx.root_find).parameters["max_steps"].default
_TINY = float(np.finfo(np.float64).tiny)


@jit
def _conditions(y, w, values, X, Y, loss, L, d, norm0, collapse, escape, loss_tol):
    """The stopping conditions of flows._events.stop_conditions, positive while the run
    goes on, in its order (collapse, escape, loss), then the room before β overflows
    (flows._dynamics.overflow_headroom); returns how many."""
    k = 0
    if collapse > 0.0 or escape > 0.0:
        ratio = _norm(y, w, L * d) / norm0
        if collapse > 0.0:
            values[k] = ratio - collapse
            k += 1
        if escape > 0.0:
            values[k] = -(math.log(ratio) - math.log(escape))
            k += 1
    if loss_tol > 0.0:
        values[k] = math.log(_mean_loss(y, w, X, Y, loss, L, d)) - math.log(loss_tol)
        k += 1
    room = -np.inf
    for j in range(d):
        s = 0.0
        for lay in range(L):
            s += math.log(abs(y[lay * d + j, w]))
        room = max(room, s)
    values[k] = _LOG_MAX - room
    return k + 1


@jit
def _representable(y, w, L, d):
    """θ and β = ∏θ finite."""
    for j in range(d):
        b = 1.0
        for lay in range(L):
            v = y[lay * d + j, w]
            if not math.isfinite(v):
                return False
            b *= v
        if not math.isfinite(b):
            return False
    return True


@jit
def _condition(y, w, values, X, Y, loss, L, d, norm0, collapse, escape, loss_tol):
    """The event condition: min of the conditions, or -1 where θ or β is not finite."""
    if not _representable(y, w, L, d):
        return -1.0
    k = _conditions(y, w, values, X, Y, loss, L, d, norm0, collapse, escape, loss_tol)
    out = values[0]
    for i in range(1, k):
        out = min(out, values[i])
    return out


@jit
def _going(y, w, X, Y, loss, L, d, norm0, collapse, escape, loss_tol):
    """1 where the event condition is positive, else -1: the sign of :func:`_condition`
    without its logarithms (each is monotone), for the test at every step's end."""
    if not _representable(y, w, L, d):
        return -1.0
    if collapse > 0.0 or escape > 0.0:
        ratio = _norm(y, w, L * d) / norm0
        if collapse > 0.0 and not ratio > collapse:
            return -1.0
        if escape > 0.0 and not ratio < escape:
            return -1.0
    if loss_tol > 0.0 and not _mean_loss(y, w, X, Y, loss, L, d) > loss_tol:
        return -1.0
    return 1.0


@jit
def _mean_loss(y, w, X, Y, loss, L, d):
    """L(θ) of lane w: the mean of ℓ(m_i) over the examples."""
    n = X.shape[0]
    total = 0.0
    for i in range(n):
        total += _loss(loss, _margin(y, w, X[i], Y[i], L, d))
    return total / n


@jit
def _going_lanes(y, out, X, Y, loss, L, d, norm0, collapse, escape, loss_tol, a, b, q):
    """:func:`_going` of every lane into ``out``, in lane loops (``collapse``, ``escape``: each
    lane's thresholds; a, b: lane scratch; q: a block)."""
    nw = out.shape[0]
    Ld = L * d
    for w in range(nw):
        out[w] = 1.0
    for j in range(d):
        for w in range(nw):
            b[w] = 1.0
        for lay in range(L):
            for w in range(nw):
                v = y[lay * d + j, w]
                b[w] *= v
                out[w] = out[w] if abs(v) < np.inf else -1.0
        for w in range(nw):
            out[w] = out[w] if abs(b[w]) < np.inf else -1.0
    _scaled_norms(y, 0, Ld, q, a, b)
    for w in range(nw):
        ratio = a[w] * b[w] / norm0[w]
        ok = (ratio > collapse[w]) | (collapse[w] <= 0.0)
        ok = ok & ((ratio < escape[w]) | (escape[w] <= 0.0))
        out[w] = out[w] if ok else -1.0
    if loss_tol > 0.0:
        for w in range(nw):
            if out[w] > 0.0:
                out[w] = _going(y, w, X, Y, loss, L, d, norm0[w], collapse[w], escape[w],
                                loss_tol)  # fmt: skip


@jit
def _event_status(y, w, values, X, Y, loss, L, d, norm0, collapse, escape, loss_tol):
    """The status of an event state: the condition closest to (or past) 0 names it
    (jnp.argmin: the first minimum, or the first NaN)."""
    k = _conditions(y, w, values, X, Y, loss, L, d, norm0, collapse, escape, loss_tol)
    best = 0
    for i in range(k):
        if values[i] != values[i]:
            best = i
            break
        if values[i] < values[best]:
            best = i
    status = _NONFINITE  # the overflow room, last
    idx = 0
    if collapse > 0.0:
        status = _COLLAPSED if best == idx else status
        idx += 1
    if escape > 0.0:
        status = _ESCAPED if best == idx else status
        idx += 1
    if loss_tol > 0.0:
        status = _CONVERGED if best == idx else status
    return status


@jit
def _root(solver, t0, t1, y0, y1, K, w, ns, tmp, values, X, Y, loss, L, d, norm0, collapse,
          escape, loss_tol, span_atol, logs, scale):
    """The event time in [t0, t1] by bisection on the interpolant (flows._events.Bisection,
    started at t1, flip=True); NaN if the budget runs out. ``logs``: the state holds
    log(θ/``scale``)."""
    lower, upper = t0, t1
    t = upper
    for _ in range(_ROOT_STEPS):
        if abs(lower - upper) < span_atol + EVENT_RTOL * abs(t):
            return t
        _interpolate(solver, t, t0, t1, y0, y1, K, w, ns, tmp)
        if logs:
            _exp(tmp, L * d, scale)
        g = _condition(tmp.reshape((ns, 1)), 0, values, X, Y, loss, L, d, norm0, collapse,
                       escape, loss_tol)  # fmt: skip
        if g < 0.0:
            upper = t
        else:  # positive (or NaN) before the root
            lower = t
        t = lower + 0.5 * (upper - lower)
    return np.nan


@inlined
def _span(t1):
    """The bisection's absolute width on a run to ``t1``: EVENT_ATOL·|t1| (and above 0)."""
    return EVENT_ATOL * abs(t1) + _TINY
