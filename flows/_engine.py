r"""The per-trajectory engine: one compiled adaptive loop per trajectory (numba).

Every trajectory runs its own explicit Runge–Kutta loop, with its own step sizes,
accepted and rejected steps, saving times and stopping event; nothing is shared
between trajectories but the arithmetic units. A thread runs :data:`W` trajectories
side by side in the lanes of one loop, so that each arithmetic instruction of a
stage serves :data:`W` of them (SIMD), and a lane whose trajectory ends takes the
next trajectory at once (no lockstep: a lane never waits for another, nor for the
slowest trajectory of a batch). Threads share the batch in chunks: the compiled loop
releases the GIL, and a thread pool runs one chunk per thread at a time.
The machine code is cached on disk (numba's ``cache=True``): a fresh process loads
it instead of compiling it.

The algorithm is diffrax's, step for step, so that the two backends take the same
steps and agree to rounding (:func:`flows.solve` with ``backend="diffrax"``):

* the tableau is diffrax's Tsit5 (default) or Dopri5, with its dense interpolant
  and first-same-as-last stage;
* the step size controller is diffrax's PID controller (``pcoeff`` 0.4, ``icoeff``
  1, safety 0.9, factors in [0.2, 10], error order 5) on the RMS norm of
  :math:`e_k/(\mathrm{atol}+\mathrm{rtol}\max(|y_{0,k}|,|y_{1,k}|))` (the clock's
  excess part counted as 0, :func:`flows._options.error_norm`), with its first
  step (0.01), its end-of-interval clipping (100 ulp) and the non-finite handling of
  :class:`flows._options.FiniteController`;
* the saved states are the interpolant of the step that covers each saving time;
* an event is a downcrossing of 0 by the stopping condition of
  :func:`flows._events.stop_conditions` (collapse, escape, loss, and the room before
  :math:`\beta` overflows; −1 where θ or β is not finite) at an accepted step's end,
  located by bisection on the step's interpolant to :math:`10^{-13}|t|+10^{-20}t_1`
  (:class:`flows._events.Bisection`); the state there is the interpolant's, and the
  status is the condition closest to 0 there.

The vector field is written for the flat state :math:`y=(\theta_{11},\dots,\theta_{Ld}
[,t,o])`: :math:`\nabla m` and :math:`\nabla\mathcal L` in closed form, with
:math:`\partial\beta_j/\partial\theta_{lj}=\prod_{k\ne l}\theta_{kj}` from exclusive
prefix and suffix products (no division), and the perturbation from
:func:`flows._rules.epsilon`, the code the JAX field runs.
"""

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from diffrax._solver.dopri5 import _dopri5_tableau, _Dopri5Interpolation
from diffrax._solver.tsit5 import _tsit5_tableau
from numba import literally, njit

from . import _rules
from ._trajectory import Status

_jit = njit(cache=True, error_model="numpy")
_inline = njit(cache=True, error_model="numpy")
_inlined = njit(cache=True, error_model="numpy", inline="always")  # in the caller's IR
_epsilon = _inline(_rules.numba_epsilon)

#: Trajectories per thread, side by side in the lanes of one loop.
W = 32
#: The engine's solvers and losses, by name, and their codes.
SOLVERS = {"tsit5": 0, "dopri5": 1}
LOSSES = {"logistic": 0, "exponential": 1}


def _tableau(tab):
    a = np.zeros((7, 7))
    for i, row in enumerate(tab.a_lower):
        a[i + 1, : len(row)] = row
    return a, np.asarray(tab.b_error, float)


_A = np.stack([_tableau(_tsit5_tableau)[0], _tableau(_dopri5_tableau)[0]])
_E = np.stack([_tableau(_tsit5_tableau)[1], _tableau(_dopri5_tableau)[1]])
_DOPRI5_MID = np.asarray(_Dopri5Interpolation.c_mid, float)

# the controller (flows._options.SolverOptions.controller: diffrax.PIDController)
_SAFETY, _FACTORMIN, _FACTORMAX = 0.9, 0.2, 10.0
_ERROR_ORDER = 5.0
_COEFF1 = (1.0 + 0.4) / _ERROR_ORDER
_COEFF2 = -0.4 / _ERROR_ORDER
_FIRST_STEP = 0.01
# flows._options: NONFINITE_REJECTIONS, NONFINITE_STALLS, STALL_STEP
_REJECTIONS, _STALLS, _STALL_STEP = 60, 10, 1e-12
# flows._events: EVENT_RTOL, EVENT_ATOL; flows._dynamics: _LOG_RATE_MAX, _LOG_MAX
_EVENT_RTOL, _EVENT_ATOL = 1e-13, 1e-20
_TINY = float(np.finfo(np.float64).tiny)
_EPS = float(np.finfo(np.float64).eps)
# Below this a weight's log-rate f(θ)/θ is not resolved (subnormal θ): the arc-length clock
# leaves it out (_log_field); the error control ignores it (atol far above)
_FLOOR = 1e-290
_LOG_RATE_MAX = 30.0
_LOG_MAX = math.log(float(np.finfo(np.float64).max))
_ROOT_STEPS = 256  # optimistix's default budget of a root find

_OK, _COLLAPSED, _ESCAPED = Status.OK, Status.COLLAPSED, Status.ESCAPED
_CONVERGED, _MAXED, _NONFINITE = Status.CONVERGED, Status.MAX_STEPS, Status.NONFINITE
_RUNNING = -1
_GD, _L2, _LINF, _LE = _rules.GD, _rules.L2, _rules.LINF_SMOOTH, _rules.LE


# --- the model (one lane: column w of a (size, W) block) ----------------------------------


@_inline
def _logaddexp0(a):
    """log(1 + e^a), as jnp.logaddexp(0, a)."""
    return max(0.0, a) + math.log1p(math.exp(-abs(a)))


@_inline
def _loss(loss, z):
    return _logaddexp0(-z) if loss == 0 else math.exp(-z)


@_inline
def _loss_derivative(loss, z):
    """ℓ'(z) < 0, as jax.grad of the loss."""
    return -math.exp(-z - _logaddexp0(-z)) if loss == 0 else -math.exp(-z)


@_inline
def _log_speed(loss, z):
    """log(-ℓ'(z)), finite for every finite z (flows._problem.log_speed)."""
    return -_logaddexp0(z) if loss == 0 else -z


@_inline
def _margin(y, w, x, ysign, L, d):
    """y⟨β(θ), x⟩ for lane w."""
    s = 0.0
    for j in range(d):
        b = 1.0
        for lay in range(L):
            b *= y[lay * d + j, w]
        s += x[j] * b
    return ysign * s


# --- the vector field, all lanes at once -----------------------------------------------------
#
# Each loop below runs over the lanes innermost, with the layers (range(L)) inside its body:
# where L is a compile-time constant (:func:`_field`), LLVM unrolls the layers, keeps a
# column's values in registers and vectorises the lane loop.


@_inlined
def _prod_except(Z, lay, j, w, L, d):
    """∏_{k≠lay} Z[k·d + j, w] = ∂β_j/∂θ_{lay,j} (no division)."""
    pr = 1.0
    for k in range(L):
        if k != lay:
            pr *= Z[k * d + j, w]
    return pr


@_inlined
def _col_grad(out, sign, Z, C, L, d):
    """out[l·d + j] = sign·C[j]·∏_{k≠l} Z[k·d + j] on every lane: sign·∇m for C = y₁x₁
    broadcast, ±∇L for C_j = (1/n)Σ_i ℓ'(m_i) y_i x_ij."""
    nw = out.shape[1]
    for j in range(d):
        for w in range(nw):
            c = sign * C[j, w]
            for lay in range(L):
                out[lay * d + j, w] = c * _prod_except(Z, lay, j, w, L, d)


@_jit
def _perturb(kind, hat, y, g, scale, per_layer, p, L, d, V):
    r"""hat = θ + ε(θ, g) (:func:`flows._rules.epsilon`), with u = g/‖g‖ per group (per
    layer for per-layer ℓ2-SAM). ‖g‖ is √Σg² where the sum of squares neither under- nor
    overflows, else s·‖g/s‖ with s = max|g| (1 where g = 0, as flows._methods._unit).
    ``V``: lane scratch (≥ 5, W). Compiled for each rule (``kind`` a constant)."""
    literally(kind)
    nw = y.shape[1]
    Ld = L * d
    groups = L if per_layer else 1
    size = Ld // groups
    ss, nrm, ua, ub = V[1], V[2], V[3], V[4]
    for k in range(groups):
        lo, hi = k * size, (k + 1) * size
        for w in range(nw):
            ss[w] = 0.0
        for i in range(lo, hi):
            for w in range(nw):
                v = g[i, w]
                ss[w] += v * v
        for w in range(nw):
            if ss[w] > 1e-280 and ss[w] < 1e280:
                nrm[w] = math.sqrt(ss[w])
                ua[w] = 1.0 / nrm[w]
                ub[w] = 1.0
            else:  # under- or overflow in the squares (or g not finite): scale by max|g|
                s, root = _norm_parts(g, w, lo, hi)
                nrm[w] = s * root
                ua[w] = 1.0 / s
                ub[w] = 1.0 / root if root != 0.0 else 1.0
        for i in range(lo, hi):
            for w in range(nw):
                v = g[i, w]
                hat[i, w] = y[i, w] + _epsilon(
                    kind, v, (v * ua[w]) * ub[w], nrm[w], scale[w],
                    p[0, w], p[1, w], p[2, w], p[3, w], p[4, w],
                )  # fmt: skip


@_inline
def _perturb_any(kind, hat, y, g, scale, per_layer, p, L, d, V):
    """:func:`_perturb` compiled for the rule ``kind``."""
    if kind == _L2:
        _perturb(_L2, hat, y, g, scale, per_layer, p, L, d, V)
    elif kind == _LE:
        _perturb(_LE, hat, y, g, scale, per_layer, p, L, d, V)
    elif kind == _LINF:
        _perturb(_LINF, hat, y, g, scale, per_layer, p, L, d, V)
    else:
        _perturb(_GD, hat, y, g, scale, per_layer, p, L, d, V)


@_inlined
def _col_margins(Z, X, Y, M, L, d):
    """M[i] = y_i⟨β(Z), x_i⟩ on every lane, β_j = ∏_k Z[k·d + j]."""
    nw = M.shape[1]
    for i in range(X.shape[0]):
        for w in range(nw):
            M[i, w] = 0.0
        for j in range(d):
            x = X[i, j]
            for w in range(nw):
                b = 1.0
                for lay in range(L):
                    b *= Z[lay * d + j, w]
                M[i, w] += x * b
        for w in range(nw):
            M[i, w] *= Y[i]


@_inlined
def _columns_body(L, op, out, sign, Z, C, X, Y, M, d):
    if op == 0:
        _col_grad(out, sign, Z, C, L, d)
    else:
        _col_margins(Z, X, Y, M, L, d)


@_jit
def _columns_fixed(L, op, out, sign, Z, C, X, Y, M, d):
    """:func:`_columns_body` compiled for the depth ``L`` as a constant."""
    literally(L)
    _columns_body(L, op, out, sign, Z, C, X, Y, M, d)


@_inline
def _columns(L, op, out, sign, Z, C, X, Y, M, d):
    """op 0: out = sign·C_j ∏_{k≠l} Z_kj (:func:`_col_grad`); op 1: M = the margins of Z
    (:func:`_col_margins`). Depths 1–8 run code compiled for their depth (the layer loops
    unrolled), deeper ones the loop over the layers."""
    if L == 1:
        _columns_fixed(1, op, out, sign, Z, C, X, Y, M, d)
    elif L == 2:
        _columns_fixed(2, op, out, sign, Z, C, X, Y, M, d)
    elif L == 3:
        _columns_fixed(3, op, out, sign, Z, C, X, Y, M, d)
    elif L == 4:
        _columns_fixed(4, op, out, sign, Z, C, X, Y, M, d)
    elif L == 5:
        _columns_fixed(5, op, out, sign, Z, C, X, Y, M, d)
    elif L == 6:
        _columns_fixed(6, op, out, sign, Z, C, X, Y, M, d)
    elif L == 7:
        _columns_fixed(7, op, out, sign, Z, C, X, Y, M, d)
    elif L == 8:
        _columns_fixed(8, op, out, sign, Z, C, X, Y, M, d)
    else:
        _columns_body(L, op, out, sign, Z, C, X, Y, M, d)


@_inline
def _loss_coefficients(Z, X, Y, loss, C, M, L, d):
    """C[j] = (1/n)Σ_i ℓ'(m_i(Z)) y_i x_ij on every lane (∇L = C_j ∏_{k≠l} Z_kj)."""
    nw = C.shape[1]
    n = X.shape[0]
    _columns(L, 1, C, 0.0, Z, C, X, Y, M, d)
    for i in range(n):
        for w in range(nw):
            M[i, w] = _loss_derivative(loss, M[i, w]) / n * Y[i]
    for j in range(d):
        for w in range(nw):
            C[j, w] = 0.0
    for i in range(n):
        for j in range(d):
            x = X[i, j]
            for w in range(nw):
                C[j, w] += M[i, w] * x


@_jit
def _field(y, out, kind, per_layer, p, X, Y, CX, loss, rescaled, clock, L, d, S, V, M):
    r"""out = f(y) on every lane: :math:`-\nabla\mathcal L(\hat\theta)` (flow) or
    :math:`\nabla m(\hat\theta)` and the clock's rate (rescaled flow),
    :math:`\hat\theta=\theta+\varepsilon(\theta,\nabla\mathcal L(\theta))`.

    ``CX``: y₁x₁ broadcast over the lanes (d, W); ``S``: scratch (3, max(L·d, d), W);
    ``V``: lane scratch (6, W); ``M``: (n, W).
    """
    Ld = L * d
    nw = y.shape[1]
    hat, g, C = S[0], S[1], S[2]
    scale = V[5]
    X1, Y1 = X[:1], Y[:1]
    for w in range(nw):
        scale[w] = 1.0
    if rescaled:
        # the rule sees g = -∇m(θ) (the gradient's direction) and scale = -ℓ'(m(θ))
        _columns(L, 0, g, -1.0, y, CX, X1, Y1, M, d)
        if kind == _LE:
            _columns(L, 1, g, 0.0, y, CX, X1, Y1, M, d)
            for w in range(nw):
                scale[w] = -_loss_derivative(loss, M[0, w])
        _perturb_any(kind, hat, y, g, scale, per_layer, p, L, d, V)
        _columns(L, 0, out, 1.0, hat, CX, X1, Y1, M, d)
        if clock:
            _columns(L, 1, out, 0.0, hat, CX, X1, Y1, M, d)
            for w in range(nw):
                log_rate = -_log_speed(loss, M[0, w])
                out[Ld, w] = math.exp(min(log_rate, _LOG_RATE_MAX))
                out[Ld + 1, w] = max(log_rate - _LOG_RATE_MAX, 0.0)
    else:
        _loss_coefficients(y, X, Y, loss, C, M, L, d)
        _columns(L, 0, g, 1.0, y, C, X, Y, M, d)
        _perturb_any(kind, hat, y, g, scale, per_layer, p, L, d, V)
        _loss_coefficients(hat, X, Y, loss, C, M, L, d)
        _columns(L, 0, out, -1.0, hat, C, X, Y, M, d)


@_jit
def _scratch(ns, Ld, d, n, nw):
    """A lane block (ns, nw) and the field's scratch S, V, M (see _field)."""
    return (np.zeros((ns, nw)), np.zeros((3, max(Ld, d), nw)), np.zeros((6, nw)),
            np.zeros((n, nw)))  # fmt: skip


@_jit
def _broadcast(X, Y, d, nw):
    """y₁x₁ on every lane (d, nw)."""
    CX = np.empty((d, nw))
    for j in range(d):
        CX[j, :] = Y[0] * X[0, j]
    return CX


@_jit
def _fields(ys, params, kind, per_layer, X, Y, loss, rescaled, clock, L, d):
    """The field at each row of ``ys`` (N, ns), W rows at a time (for the tests)."""
    N, ns = ys.shape
    out = np.empty_like(ys)
    CX = _broadcast(X, Y, d, W)
    y, S, V, M = _scratch(ns, L * d, d, X.shape[0], W)
    f = np.zeros((ns, W))
    p = np.zeros((5, W))
    for start in range(0, N, W):
        m = min(W, N - start)
        for w in range(m):
            y[:, w] = ys[start + w]
            p[:, w] = params[start + w]
        _field(y, f, kind, per_layer, p, X, Y, CX, loss, rescaled, clock, L, d, S, V, M)
        for w in range(m):
            out[start + w] = f[:, w]
    return out


# --- the stopping condition (one lane) -------------------------------------------------------


@_inline
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


@_inline
def _norm_parts(y, w, lo, hi):
    """(s, r) with ‖y[lo:hi, w]‖₂ = s·r, s = max|y| (1 where y = 0), r = ‖y/s‖ (no under- or
    overflow in the squares)."""
    s = 0.0
    for i in range(lo, hi):
        a = abs(y[i, w])
        s = a if (a > s) | (a != a) else s
    s = 1.0 if s == 0.0 else s
    acc = 0.0
    for i in range(lo, hi):
        v = y[i, w] / s
        acc += v * v
    return s, math.sqrt(acc)


@_inline
def _norm(y, w, n):
    """‖θ‖₂ of lane w (:func:`_norm_parts`)."""
    s, r = _norm_parts(y, w, 0, n)
    return s * r


@_inline
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


@_inline
def _condition(y, w, values, X, Y, loss, L, d, norm0, collapse, escape, loss_tol):
    """The event condition: min of the conditions, or -1 where θ or β is not finite."""
    if not _representable(y, w, L, d):
        return -1.0
    k = _conditions(y, w, values, X, Y, loss, L, d, norm0, collapse, escape, loss_tol)
    out = values[0]
    for i in range(1, k):
        out = min(out, values[i])
    return out


@_inline
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


@_inline
def _mean_loss(y, w, X, Y, loss, L, d):
    """L(θ) of lane w: the mean of ℓ(m_i) over the examples."""
    n = X.shape[0]
    total = 0.0
    for i in range(n):
        total += _loss(loss, _margin(y, w, X[i], Y[i], L, d))
    return total / n


@_inline
def _scaled_norms(x, lo, hi, q, s, root):
    """‖x[lo:hi]‖ = s·root on every lane, s = max|x| (1 where x = 0), q = x/s: the norm
    without under- or overflow in the squares."""
    nw = s.shape[0]  # a run-time lane count: LLVM vectorises the lane loops
    for w in range(nw):
        s[w] = 0.0
    for i in range(lo, hi):
        for w in range(nw):
            a = abs(x[i, w])
            s[w] = a if (a > s[w]) | (a != a) else s[w]
    for w in range(nw):
        s[w] = 1.0 if s[w] == 0.0 else s[w]
        root[w] = 0.0
    for i in range(lo, hi):
        for w in range(nw):
            v = x[i, w] / s[w]
            q[i, w] = v
            root[w] += v * v
    for w in range(nw):
        root[w] = math.sqrt(root[w])


@_inline
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


@_inline
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


# --- the Runge–Kutta step's interpolant (one lane) -------------------------------------------


@_inline
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


@_inline
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


@_inline
def _root(solver, t0, t1, y0, y1, K, w, ns, tmp, values, X, Y, loss, L, d, norm0, collapse,
          escape, loss_tol, span_atol, logs, scale):
    """The event time in [t0, t1] by bisection on the interpolant (flows._events.Bisection,
    started at t1, flip=True); NaN if the budget runs out. ``logs``: the state holds
    log(θ/``scale``)."""
    lower, upper = t0, t1
    t = upper
    for _ in range(_ROOT_STEPS):
        if abs(lower - upper) < span_atol + _EVENT_RTOL * abs(t):
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


@_inline
def _exp(v, n, scale):
    """θ = scale·exp(u) in place for the first n (= L·d) entries of one lane's state held as
    u = log(θ/scale) (an arc-length clock's τ, after them, is kept)."""
    for i in range(n):
        v[i] = scale * math.exp(v[i])


@_inline
def _log_field(logs, arc, y, out, th, kind, per_layer, p, X, Y, CX, loss, rescaled, clock, L, d,
               S, V, M, r0, acc, scale, q):
    r"""out = f(y) on every lane (:func:`_field`).

    With ``logs`` the state holds u = log(θ/c), c = ``scale`` per lane (the start's max|θ|, so
    that u is of order 1 at every scale), and out = f(θ)/θ = du/dt (0 for a weight at 0,
    u = -inf, an equilibrium of every rule here). For GD and ℓ2-SAM, whose
    fields are homogeneous, :math:`f(\lambda	heta;\lambda
ho)=\lambda^{L-1}f(	heta;
ho)`
    (docs/theory.md §6), the field is evaluated at θ/m with ρ/m, m = max|θ| of the lane: a weight
    far below the others (a deep decay, down to 1e-300 of the largest) is resolved at every
    scale of θ, as on the scale twin m = 1. Other rules are evaluated at θ itself. ``th`` holds
    the θ (or θ/m) of the evaluation in its first L·d rows; ``q``: a (5, W) block for the scaled
    parameters.

    With ``arc`` too, the clock is the arc length s of u with the floor ``r0`` (per lane):
    :math:`d	au/ds=1/(\lVert\dot u
Vert+r_0)`, carried in the state after u, and out =
    (du/ds, dτ/ds): the same path, on which a finite-τ blow-up (L ≥ 3) and a finite-τ collapse
    (L = 2) are straight lines in u (docs/theory.md §5)."""
    if not logs:
        _field(y, out, kind, per_layer, p, X, Y, CX, loss, rescaled, clock, L, d, S, V, M)
        return
    Ld = L * d
    nw = y.shape[1]
    homogeneous = kind == _GD or kind == _L2
    for w in range(nw):
        top = -np.inf
        for i in range(Ld):
            top = max(top, y[i, w])
        acc[w] = top if homogeneous else 0.0  # log(m/c)
        for r in range(5):
            q[r, w] = p[r, w]
        if homogeneous:
            q[0, w] = p[0, w] / (scale[w] * math.exp(top))  # ρ/m
    for i in range(Ld):
        for w in range(nw):
            v = math.exp(y[i, w] - acc[w])
            th[i, w] = v if homogeneous else scale[w] * v
    _field(th, out, kind, per_layer, q, X, Y, CX, loss, rescaled, clock, L, d, S, V, M)
    for w in range(nw):  # m^(L-2): du/dt of θ from that of θ/m
        acc[w] = math.exp((L - 2) * (math.log(scale[w]) + acc[w])) if homogeneous else 1.0
    for i in range(Ld):
        for w in range(nw):
            v = th[i, w]
            out[i, w] = out[i, w] / v * acc[w] if v != 0.0 else 0.0
    if arc:
        for w in range(nw):
            acc[w] = 0.0
        for i in range(Ld):  # (a weight under _FLOOR: its f(θ)/θ is not resolved, left out)
            for w in range(nw):
                acc[w] += out[i, w] * out[i, w] if th[i, w] > _FLOOR else 0.0
        for w in range(nw):
            acc[w] = 1.0 / (math.sqrt(acc[w]) + r0[w])
        for i in range(Ld):
            for w in range(nw):
                out[i, w] = out[i, w] * acc[w]
        for w in range(nw):
            out[Ld, w] = acc[w]


@_inline
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


# --- j† along the run (one lane; the analysis's runs, flows._tracking) ---------------------


@_inline
def _log_size(v, j, L, d, logs):
    """log|β_j| = Σ_l log|θ_lj| of the state v (flat, (ns,); ``logs``: v holds log θ)."""
    s = 0.0
    for lay in range(L):
        s += v[lay * d + j] if logs else math.log(abs(v[lay * d + j]))
    return s


@_inline
def _overtaker(v, a, L, d, tie_ulps, logs, offset):
    """The index whose |β| exceeds the leader ``a``'s by more than the tie margin of
    :func:`flows._tracking.tie_margin` (the largest such, the lowest on a tie), else -1.

    Compared as products while every |β_j| is a normal number far from overflow (no
    logarithm per sample), else as sums of logs (``logs``: v holds log(θ/c), and ``offset`` =
    L log c is added to the leader's for its margin)."""
    pa = 1.0
    if not logs:
        for lay in range(L):
            pa *= abs(v[lay * d + a])
    if not logs and pa > 1e-290 and pa < 1e290:
        best, top = -1, pa * (1.0 + tie_ulps * _EPS * max(1.0, abs(math.log(pa))))
        products = True
        for j in range(d):
            if j == a:
                continue
            p = 1.0
            for lay in range(L):
                p *= abs(v[lay * d + j])
            if not (p < 1e290 and (p > 1e-290 or p < pa)):
                products = False
                break
            if p > top:
                best, top = j, p
        if products:
            return best
    la = _log_size(v, a, L, d, logs)
    best, top = -1, la + tie_ulps * _EPS * max(1.0, abs(la + offset))
    for j in range(d):
        if j != a:
            lj = _log_size(v, j, L, d, logs)
            if lj > top:
                best, top = j, lj
    return best


@_inline
def _gap(v, a, L, d, logs):
    """(max_{j≠a} log|β_j| − log|β_a|, its argmax): positive once another index leads."""
    la = _log_size(v, a, L, d, logs)
    best, top = -1, -np.inf
    for j in range(d):
        if j != a:
            lj = _log_size(v, j, L, d, logs)
            if lj > top or best < 0:
                best, top = j, lj
    return top - la, best


@_inline
def _order_kept(v, q0, mu, L, d, q, logs):
    """:func:`analysis._certify.keeps_invariant_order` for GD, ℓ2-SAM and LE-SAM at L ≥ 3
    from a balanced start: every pair q0_j < q0_k keeps q_j < q_k, q_j = μ_j min_l θ_lj^(L-2)
    (``q0``: the run's first start's; with ``logs``, v holds log θ and q is compared as
    log q_j, the same order)."""
    for j in range(d):
        a = v[j]
        for lay in range(1, L):
            a = min(a, v[lay * d + j])
        q[j] = math.log(mu[j]) + (L - 2) * a if logs else mu[j] * a ** (L - 2)
    for j in range(d):
        for k in range(d):
            if q0[j] < q0[k] and not q[j] < q[k]:
                return False
    return True


@_inline
def _track(solver, t0, t1, t_hi, y, yi, K, w, ns, tmp, q, L, d, samples, tie_ulps, span_atol,
           n, lead, lost, guard, q0, mu, sw_t, sw_j, sw_n, logs, tau, offset):
    """Follow j† through the accepted step [t0, t1] up to ``t_hi`` (t1, or the event time).

    j† is read at ``samples`` equally spaced points of the step's interpolant, by the tie rule
    (:func:`_overtaker`); each change is located by bisection on the interpolant (the earliest
    time another index overtakes the leader, to the events' tolerance) and recorded as
    (time, new index) in the lane's slots (``sw_n`` counts them all). With ``guard``, a change
    seen in a state that breaks the exact flow's q-order (:func:`_order_kept`) is rounding:
    it is not recorded and the run is marked ``lost`` (nothing is tracked after it). ``tau``: the
    state's slot of τ on an arc-length clock (the time recorded), or -1."""
    prev = t0
    slots = sw_t.shape[1]
    for k in range(1, samples + 1):
        t = t_hi if k == samples else t0 + (t_hi - t0) * (k / samples)
        for _ in range(d):  # at most d changes between two samples
            _interpolate(solver, t, t0, t1, y, yi, K, w, ns, tmp)
            a = lead[n]
            if _overtaker(tmp, a, L, d, tie_ulps, logs, offset) < 0:
                break
            lo, hi = prev, t
            for _ in range(_ROOT_STEPS):
                if abs(hi - lo) < span_atol + _EVENT_RTOL * abs(hi):
                    break
                mid = lo + 0.5 * (hi - lo)
                _interpolate(solver, mid, t0, t1, y, yi, K, w, ns, tmp)
                g, _c = _gap(tmp, a, L, d, logs)
                if g > 0.0:
                    hi = mid
                else:
                    lo = mid
            _interpolate(solver, hi, t0, t1, y, yi, K, w, ns, tmp)
            g, c = _gap(tmp, a, L, d, logs)
            if guard and not _order_kept(tmp, q0[n], mu, L, d, q, logs):
                lost[n] = True
                return
            m = sw_n[n]
            if m < slots:
                sw_t[n, m] = tmp[tau] if tau >= 0 else hi
                sw_j[n, m] = c
            sw_n[n] = m + 1
            lead[n] = c
            prev = hi


@_inline
def _may_switch(y, K, flag, traj, lead, samples, L, d, logs, blk, size, top):
    """flag[w] = 1 where j† may change inside lane w's step (Tsit5), else 0, in lane loops: at
    the samples of :func:`_track` another |β_j| exceeds the leader's by more than 64 ulps (a
    superset of the tie rule's changes), or a size is not a normal number. Only flagged lanes
    run :func:`_track`."""
    ns, nw = y.shape
    for w in range(nw):
        flag[w] = 0.0
    for k in range(1, samples + 1):
        b1, b2, b3, b4, b5, b6, b7 = _tsit5_weights(k / samples)
        for i in range(ns):
            for w in range(nw):
                blk[i, w] = y[i, w] + (
                    b1 * K[0, i, w] + b2 * K[1, i, w] + b3 * K[2, i, w] + b4 * K[3, i, w]
                    + b5 * K[4, i, w] + b6 * K[5, i, w] + b7 * K[6, i, w]
                )  # fmt: skip
        for j in range(d):
            for w in range(nw):
                size[j, w] = 0.0 if logs else 1.0
            for lay in range(L):
                for w in range(nw):
                    v = blk[lay * d + j, w]
                    size[j, w] = size[j, w] + v if logs else size[j, w] * abs(v)
        for w in range(nw):
            n = traj[w]
            a = lead[n] if n >= 0 else 0
            sa = size[a, w]
            if logs:  # the smallest margin of the tie rule (the state is shifted by log c)
                top[w] = sa + 64.0 * _EPS
            else:
                top[w] = sa * (1.0 + 64.0 * _EPS)
                if not (sa > 1e-290 and sa < 1e290):
                    flag[w] = 1.0
        for j in range(d):
            for w in range(nw):
                v = size[j, w]
                flag[w] = 1.0 if (v > top[w] or v != v) else flag[w]


# --- the loop -------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy", nogil=True)
def _run_chunk(first, last, y0s, params, atols, ts, t1s, solver, kind, per_layer, X, Y, loss,
               rescaled, clock, L, d, rtol, max_steps, collapses, escapes, loss_tol,
               saved, yend, status, t_end, n_steps, n_rejected,
               track, samples, tie_ulps, guard, q0, lead, lost, sw_t, sw_j, sw_n, logs, arc,
               r0s):
    """Integrate trajectories first..last-1, W at a time (fewer in a smaller chunk), each lane
    refilled when its trajectory ends: trajectory n to ``t1s[n]``, collapsing at
    ``collapses[n]`` and escaping at ``escapes[n]`` (0: none).
    Writes rows of the output arrays; with ``track``, follows j† (:func:`_track`). With
    ``logs`` the state is u = log θ (every θ > 0; no clock): the inputs and outputs are θ. With
    ``arc`` too, the integration variable is the arc length s of :func:`_log_field` (floor
    ``r0s[n]``), τ is the state's last entry (0 in ``y0s``), ``t1s`` are budgets of s, and
    ``t_end`` and the switch times are τ."""
    ns = y0s.shape[1]
    Ld = L * d
    T = ts.shape[0]
    A, E = _A[solver], _E[solver]
    # the lanes: W, or fewer for a smaller chunk (a lone run does not pay for W - 1 idle lanes)
    nw = min(W, last - first)
    CX = _broadcast(X, Y, d, nw)
    y, S, V, Mg = _scratch(ns, Ld, d, X.shape[0], nw)
    yi = np.zeros((ns, nw))
    fs = np.zeros((ns, nw))
    f = np.zeros((ns, nw))
    K = np.zeros((7, ns, nw))
    p = np.zeros((5, nw))
    traj = np.full(nw, -1)
    h = np.zeros(nw)
    tprev = np.zeros(nw)
    tnext = np.zeros(nw)
    atol = np.ones(nw)
    norm0 = np.ones(nw)
    t1w = np.ones(nw)
    floor = np.ones(nw)
    span = np.ones(nw)
    coll = np.zeros(nw)
    esc = np.zeros(nw)
    mu = X[0] * Y[0]
    qs = np.zeros(d)
    prev_factor = np.ones(nw)
    old = np.zeros(nw)
    run = np.zeros(nw, np.int64)
    stalls = np.zeros(nw, np.int64)
    steps = np.zeros(nw, np.int64)
    rejected = np.zeros(nw, np.int64)
    k_save = np.zeros(nw, np.int64)
    nan_y1 = np.zeros(nw)
    bad = np.zeros(nw)
    err = np.zeros(nw)
    tmp = np.zeros(ns)
    tmp2d = np.zeros(ns)
    th = np.ones((ns, nw))
    thb = np.ones((ns, nw))
    r0 = np.ones(nw)
    acc = np.ones(nw)
    sc = np.ones(nw)
    pq = np.zeros((5, nw))
    tau = Ld if arc else -1  # the slot of τ in the state
    blk = np.ones((ns, nw))
    sizes = np.ones((d, nw))
    flag = np.ones(nw)
    top = np.ones(nw)
    prefilter = track and solver == 0
    values = np.zeros(4)
    hb = np.zeros((ns, nw))
    going = np.zeros(nw)
    M = ns * nw
    yf, yif, ff, fsf = y.reshape(M), yi.reshape(M), f.reshape(M), fs.reshape(M)
    hbf = hb.reshape(M)
    Kf = K.reshape((7, M))
    K0 = Kf[0]
    nxt = first
    active = 0
    while True:
        # fill the idle lanes with the next trajectories
        for w in range(nw):
            if traj[w] >= 0 or nxt >= last:
                continue
            n = nxt
            nxt += 1
            traj[w] = n
            active += 1
            for i in range(ns):
                y[i, w] = y0s[n, i]
                th[i, w] = y0s[n, i]
            for r in range(5):
                p[r, w] = params[n, r]
            atol[w] = atols[n]
            norm0[w] = _norm(th, w, Ld)
            t1 = t1s[n]
            t1w[w] = t1
            fl = t1
            for _ in range(100):
                fl = np.nextafter(fl, -np.inf)
            floor[w] = fl
            span[w] = _EVENT_ATOL * abs(t1) + _TINY
            coll[w] = collapses[n]
            r0[w] = r0s[n]
            esc[w] = escapes[n]
            tprev[w] = 0.0
            tnext[w] = min(_FIRST_STEP, t1)
            prev_factor[w] = 1.0
            run[w] = 0
            stalls[w] = 0
            steps[w] = 0
            rejected[w] = 0
            k_save[w] = 0
            for k in range(T):
                for i in range(ns):
                    saved[n, k, i] = np.nan
            old[w] = _going(th, w, X, Y, loss, L, d, norm0[w], coll[w], esc[w], loss_tol)
            if loss_tol > 0.0 and not _mean_loss(th, w, X, Y, loss, L, d) > loss_tol:
                # a start at or below loss_tol has converged at t = 0 (no step, no event)
                status[n] = _CONVERGED
                t_end[n] = 0.0
                n_steps[n] = 0
                n_rejected[n] = 0
                for i in range(ns):
                    yend[n, i] = y[i, w]
                for k in range(T):
                    if ts[k] <= 0.0:
                        for i in range(ns):
                            saved[n, k, i] = y[i, w]
                traj[w] = -1
                active -= 1
                for i in range(ns):
                    y[i, w] = 0.0 if logs else 1.0
                continue
            if logs:  # u = log(θ/c), c = max|θ0|
                c = 0.0
                for i in range(Ld):
                    c = max(c, abs(y[i, w]))
                sc[w] = c
                for i in range(Ld):
                    y[i, w] = math.log(y[i, w] / c)
            # f(0, y0), the first stage (the other lanes' values are thrown away)
            _log_field(logs, arc, y, fs, thb, kind, per_layer, p, X, Y, CX, loss, rescaled, clock,
                       L, d, S, V, Mg, r0, acc, sc, pq)  # fmt: skip
            for i in range(ns):
                f[i, w] = fs[i, w]
        if active == 0:
            if nxt >= last:
                break
            continue
        # one step on every lane: K_s = h f(y + Σ_r a_sr K_r), in flat loops over the
        # (ns, W) blocks (long loops that LLVM vectorises)
        for w in range(nw):
            h[w] = tnext[w] - tprev[w] if traj[w] >= 0 else 0.0
        for i in range(ns):
            hb[i] = h
        for k in range(M):
            K0[k] = hbf[k] * ff[k]
        for s in range(1, 7):
            _stage(yif, yf, Kf, A[s], s, M)
            _log_field(logs, arc, yi, fs, thb, kind, per_layer, p, X, Y, CX, loss, rescaled, clock,
                       L, d, S, V, Mg, r0, acc, sc, pq)  # fmt: skip
            Ks = Kf[s]
            for k in range(M):
                Ks[k] = hbf[k] * fsf[k]
        # y1 = yi (the last stage's point); the error estimate's scaled RMS norm
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
                if logs and i < Ld:  # θ's control in u: e_θ/(atol + rtol θ) = e_u/(rtol + atol/θ)
                    big = sc[w] * math.exp(max(y[i, w], cand))  # (u = -inf: a weight at 0)
                    v = e / (rtol + atol[w] / big) if big > 0.0 else 0.0
                elif i == tau:  # τ on the arc-length clock: relative above 1
                    v = e / (rtol * max(1.0, abs(y[i, w]), abs(cand)))
                else:
                    v = e / (atol[w] + max(abs(y[i, w]), abs(cand)) * rtol)
                if not (clock and i == ns - 1):  # the clock's o: flows._options.error_norm
                    err[w] += v * v
        # (with logs: θ = c·exp(yi))
        if logs:
            for i in range(Ld):
                for w in range(nw):
                    thb[i, w] = sc[w] * math.exp(yi[i, w])
        _going_lanes(thb if logs else yi, going, X, Y, loss, L, d, norm0, coll, esc, loss_tol,
                     V[0], V[1], S[0])  # fmt: skip
        if prefilter:
            _may_switch(y, K, flag, traj, lead, samples, L, d, logs, blk, sizes, top)
        # per lane: the controller, saving, the event, the end of the trajectory
        for w in range(nw):
            n = traj[w]
            if n < 0:
                continue
            hw = h[w]
            t1 = t1w[w]
            e = math.sqrt(err[w]) / math.sqrt(ns)
            keep = e < 1.0
            inv = 1.0 / e
            factor = _SAFETY * inv**_COEFF1 * prev_factor[w]
            if factor != factor:
                dt = np.nan
            elif keep:
                dt = hw * min(max(factor, 1.0), _FACTORMAX)
            else:
                dt = hw * min(max(factor, _FACTORMIN), _SAFETY)
            if inv == 0.0 or inv == np.inf:
                inv = 1.0
            step_t0, step_t1 = tprev[w], tnext[w]
            t0n = step_t1 if keep else step_t0
            t1n = t0n + dt
            failed = False
            if not keep and bad[w] != 0.0:  # flows._options.FiniteController
                if t1n != t1n:
                    t1n = t0n + _FACTORMIN * hw
                failed = True
                for i in range(ns):
                    if not math.isfinite(y[i, w]):
                        failed = False
            run[w] = run[w] + 1 if failed else 0
            if failed and abs(hw) <= _STALL_STEP * abs(step_t0):
                stalls[w] += 1
            if keep:
                prev_factor[w] = inv**_COEFF2  # the next steps' factor of this error
            steps[w] += 1
            if not keep:
                rejected[w] += 1
            tprev[w] = min(t0n, t1)
            if t1n > floor[w]:
                tnext[w] = t1 if keep else tprev[w] + 0.5 * (t1 - tprev[w])
            else:
                tnext[w] = t1n
            code = _RUNNING
            te = 0.0
            if keep:
                while k_save[w] < T and ts[k_save[w]] <= step_t1:
                    _interpolate(solver, ts[k_save[w]], step_t0, step_t1, y, yi, K, w, ns,
                                 saved[n, k_save[w]])  # fmt: skip
                    if logs:
                        _exp(saved[n, k_save[w]], Ld, sc[w])
                    k_save[w] += 1
                new = going[w]
                t_hi = step_t1
                if old[w] > 0.0 and new <= 0.0:
                    te = _root(solver, step_t0, step_t1, y, yi, K, w, ns, tmp, values, X, Y,
                               loss, L, d, norm0[w], coll[w], esc[w], loss_tol, span[w], logs,
                               sc[w])  # fmt: skip
                    if te == te:
                        t_hi = te
                        _interpolate(solver, te, step_t0, step_t1, y, yi, K, w, ns, tmp)
                        if logs:
                            _exp(tmp, Ld, sc[w])
                        tmp2 = tmp.reshape((ns, 1))
                        code = _event_status(tmp2, 0, values, X, Y, loss, L, d, norm0[w],
                                             coll[w], esc[w], loss_tol)  # fmt: skip
                        code = code if _representable(tmp2, 0, L, d) else _NONFINITE
                        for i in range(ns):
                            yend[n, i] = tmp[i]
                    else:
                        code = _NONFINITE
                        te = step_t1
                        for i in range(ns):
                            yend[n, i] = (sc[w] * math.exp(yi[i, w]) if logs and i < Ld
                                          else yi[i, w])  # fmt: skip
                look = flag[w] != 0.0 or code != _RUNNING or not prefilter
                if track and look and not lost[n] and code != _NONFINITE:
                    _track(solver, step_t0, step_t1, t_hi, y, yi, K, w, ns, tmp2d, qs, L, d,
                           samples, tie_ulps, span[w], n, lead, lost, guard, q0, mu, sw_t,
                           sw_j, sw_n, logs, tau, L * math.log(sc[w]))  # fmt: skip
                old[w] = new
                for i in range(ns):
                    y[i, w] = yi[i, w]
                    f[i, w] = fs[i, w]  # first same as last: f(y1) is the last stage's
            if code == _RUNNING:
                te = tprev[w]
                if run[w] >= _REJECTIONS or stalls[w] >= _STALLS:
                    code = _NONFINITE
                elif tprev[w] >= t1:
                    code = _OK
                elif steps[w] >= max_steps:
                    code = _MAXED
                if code != _RUNNING:
                    for i in range(ns):
                        yend[n, i] = sc[w] * math.exp(y[i, w]) if logs and i < Ld else y[i, w]
                    if not _representable(yend[n].reshape((ns, 1)), 0, L, d):
                        code = _NONFINITE
            if code != _RUNNING:
                status[n] = code
                t_end[n] = yend[n, tau] if arc else te
                n_steps[n] = steps[w]
                n_rejected[n] = rejected[w]
                for k in range(T):
                    if ts[k] > te:
                        for i in range(ns):
                            saved[n, k, i] = np.nan
                traj[w] = -1
                active -= 1
                for i in range(ns):  # a benign idle lane (no subnormals, no NaN)
                    y[i, w] = 0.0 if logs else 1.0
                    f[i, w] = 0.0


def run_many(y0s, params, atols, ts, t1, *, solver, kind, per_layer, X, Y, loss, rescaled,
             clock, L, d, rtol, max_steps, collapse, escape, loss_tol, chunk=None, threads=None,
             tracking=None, logs=False, r0=None):
    """Integrate every row of ``y0s`` (N, ns) on ``threads`` threads (default: every core);
    validated inputs only (:func:`flows.solve_many`).

    ``params`` (N, 5): each trajectory's rule parameters (:data:`flows._rules.PARAMS`);
    ``atols`` (N,): absolute tolerances; ``t1``: the end time, a number or one per trajectory
    (N,); ``collapse``, ``escape`` (each a number or (N,)), ``loss_tol``: the event thresholds, or
    0 for none. ``tracking``: None, or a dict that follows j† along each run (the analysis's
    runs, :mod:`flows._tracking`): ``lead`` (N,) the leader at the start (updated in place),
    ``lost`` (N,) bool (updated in place), ``q0`` (N, d) and ``guard`` (the q-order guard of
    :func:`_order_kept`), ``slots``, ``samples`` and ``tie_ulps``. ``logs``: integrate
    u = log θ (every θ >= 0, no clock) under θ's error control, atol + rtol·θ, read in u.
    ``r0`` (with ``logs``): integrate on the arc-length clock of :func:`_log_field` with that
    floor (a number or (N,)); ``y0s`` then ends with τ = 0 and ``t1`` is a budget of arc length.
    Returns NumPy arrays:
    ``saved`` (N, T, ns), ``y_end`` (N, ns), ``status``, ``t_end``, ``n_steps``,
    ``n_rejected`` (N,), and with ``tracking`` the switches ``sw_t``, ``sw_j`` (N, slots) and
    their count ``sw_n`` (N,).
    """
    N, ns = y0s.shape
    T = ts.shape[0]
    threads = (os.cpu_count() or 1) if threads is None else threads
    if chunk is None:  # a few chunks a thread, for balance; a lane group fills each
        chunk = max(2 * W, -(-N // (8 * threads)))
    chunks = np.r_[np.arange(0, N, chunk), N].astype(np.int64)
    out = dict(
        saved=np.empty((N, T, ns)), y_end=np.empty((N, ns)), status=np.empty(N, np.int64),
        t_end=np.empty(N), n_steps=np.empty(N, np.int64), n_rejected=np.empty(N, np.int64),
    )  # fmt: skip
    tr = tracking or {}
    slots = int(tr.get("slots", 1))
    out.update(sw_t=np.full((N, slots), np.nan), sw_j=np.full((N, slots), -1, np.int64),
               sw_n=np.zeros(N, np.int64))  # fmt: skip
    lead = tr["lead"] if tracking else np.zeros(N, np.int64)
    lost = tr["lost"] if tracking else np.zeros(N, np.bool_)
    q0 = tr["q0"] if tracking else np.zeros((N, d))
    # every array input C-contiguous and writable: numba compiles one signature per layout and
    # read-only flag, and the loop is compiled once (a read-only view, e.g. of a JAX array or of a
    # broadcast number, would compile the whole loop again)
    own = lambda v: np.require(v, float, ("C", "W"))  # noqa: E731
    full = lambda v: own(np.broadcast_to(np.asarray(v, float), (N,)))  # noqa: E731
    args = (
        chunks, own(y0s), own(params), own(atols), own(ts), full(t1),
        int(solver), int(kind), bool(per_layer), own(X),
        own(Y), int(loss), bool(rescaled), bool(clock), int(L), int(d),
        float(rtol), int(max_steps), full(collapse), full(escape), float(loss_tol),
        out["saved"], out["y_end"], out["status"], out["t_end"], out["n_steps"],
        out["n_rejected"], bool(tracking), int(tr.get("samples", 1)),
        float(tr.get("tie_ulps", 0.0)), bool(tr.get("guard", False)),
        own(q0), lead, lost, out["sw_t"], out["sw_j"], out["sw_n"],
        bool(logs), r0 is not None, full(1.0 if r0 is None else r0),
    )  # fmt: skip
    bounds = list(zip(chunks[:-1], chunks[1:], strict=True))
    if threads == 1 or len(bounds) == 1:
        for lo, hi in bounds:
            _run_chunk(lo, hi, *args[1:])
    else:  # the compiled loop releases the GIL: one Python thread per core
        with ThreadPoolExecutor(min(threads, len(bounds))) as pool:
            list(pool.map(lambda b: _run_chunk(b[0], b[1], *args[1:]), bounds))
    return out


def fields(ys, params, *, kind, per_layer, X, Y, loss, rescaled, clock, L, d):
    """The engine's vector field at each row of ``ys`` (N, ns)."""
    return _fields(
        np.ascontiguousarray(ys, float), np.ascontiguousarray(params, float), int(kind),
        bool(per_layer), np.ascontiguousarray(X, float), np.ascontiguousarray(Y, float),
        int(loss), bool(rescaled), bool(clock), int(L), int(d),
    )  # fmt: skip
