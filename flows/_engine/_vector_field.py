r"""The vector field of the engine, on all the lanes of a block at once.

The state of lane w is column w of a (size, W) block, the flat
:math:`y=(\theta_{11},\dots,\theta_{Ld}[,t,o])`. :math:`\nabla m` and :math:`\nabla\mathcal L`
are in closed form, with :math:`\partial\beta_j/\partial\theta_{lj}=\prod_{k\ne l}\theta_{kj}`
from products over the other layers (no division); the perturbation is
:func:`flows._rules.epsilon` and the losses are :func:`flows._problem.loss_value` and its
companions, the code the JAX field runs, compiled here with ``xp = numpy``.

Each loop runs over the lanes innermost, with the layers (range(L)) inside its body: where L
is a compile-time constant (:func:`_columns`), LLVM unrolls the layers, keeps a column's
values in registers and vectorises the lane loop.
"""

import math

import numpy as np
from numba import literally

from .. import _rules
from .._dynamics import _LOG_RATE_MAX
from .._problem import loss_log_speed, loss_slope, loss_value
from ._jit import inlined, jit
from ._norms import _norm_parts

_epsilon = jit(_rules.numba_epsilon)
_loss = jit(loss_value)
_loss_derivative = jit(loss_slope)
_log_speed = jit(loss_log_speed)
_GD, _L2, _LINF, _LE = _rules.GD, _rules.L2, _rules.LINF_SMOOTH, _rules.LE
# Below this a weight's log-rate f(θ)/θ is not resolved (subnormal θ): the arc-length clock
# leaves it out (_log_field); the error control ignores it (atol far above)
_FLOOR = 1e-290


@jit
def _margin(y, w, x, ysign, L, d):
    """y⟨β(θ), x⟩ for lane w."""
    s = 0.0
    for j in range(d):
        b = 1.0
        for lay in range(L):
            b *= y[lay * d + j, w]
        s += x[j] * b
    return ysign * s


@inlined
def _prod_except(Z, lay, j, w, L, d):
    """∏_{k≠lay} Z[k·d + j, w] = ∂β_j/∂θ_{lay,j} (no division)."""
    pr = 1.0
    for k in range(L):
        if k != lay:
            pr *= Z[k * d + j, w]
    return pr


@inlined
def _col_grad(out, sign, Z, C, L, d):
    """out[l·d + j] = sign·C[j]·∏_{k≠l} Z[k·d + j] on every lane: sign·∇m for C = y₁x₁
    broadcast, ±∇L for C_j = (1/n)Σ_i ℓ'(m_i) y_i x_ij."""
    nw = out.shape[1]
    for j in range(d):
        for w in range(nw):
            c = sign * C[j, w]
            for lay in range(L):
                out[lay * d + j, w] = c * _prod_except(Z, lay, j, w, L, d)


@jit
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


@jit
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


@inlined
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


@inlined
def _columns_body(L, op, out, sign, Z, C, X, Y, M, d):
    if op == 0:
        _col_grad(out, sign, Z, C, L, d)
    else:
        _col_margins(Z, X, Y, M, L, d)


@jit
def _columns_fixed(L, op, out, sign, Z, C, X, Y, M, d):
    """:func:`_columns_body` compiled for the depth ``L`` as a constant."""
    literally(L)
    _columns_body(L, op, out, sign, Z, C, X, Y, M, d)


@jit
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


@jit
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


@jit
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


@jit
def _scratch(ns, Ld, d, n, nw):
    """A lane block (ns, nw) and the field's scratch S, V, M (see _field)."""
    return (np.zeros((ns, nw)), np.zeros((3, max(Ld, d), nw)), np.zeros((6, nw)),
            np.zeros((n, nw)))  # fmt: skip


@jit
def _broadcast(X, Y, d, nw):
    """y₁x₁ on every lane (d, nw)."""
    CX = np.empty((d, nw))
    for j in range(d):
        CX[j, :] = Y[0] * X[0, j]
    return CX


@jit
def _exp(v, n, scale):
    """θ = scale·exp(u) in place for the first n (= L·d) entries of one lane's state held as
    u = log(θ/scale) (an arc-length clock's τ, after them, is kept)."""
    for i in range(n):
        v[i] = scale * math.exp(v[i])


@jit
def _log_field(logs, arc, y, out, th, kind, per_layer, p, X, Y, CX, loss, rescaled, clock, L, d,
               S, V, M, r0, acc, scale, q):
    r"""out = f(y) on every lane (:func:`_field`).

    With ``logs`` the state holds u = log(θ/c), c = ``scale`` per lane (the start's max|θ|, so
    that u is of order 1 at every scale), and out = f(θ)/θ = du/dt (0 for a weight at 0,
    u = -inf, an equilibrium of every rule here). For GD and ℓ2-SAM, whose
    fields are homogeneous, :math:`f(\lambda\theta;\lambda\rho)=\lambda^{L-1}f(\theta;\rho)`
    (docs/theory.md §6), the field is evaluated at θ/m with ρ/m, m = max|θ| of the lane: a weight
    far below the others (a deep decay, down to 1e-300 of the largest) is resolved at every
    scale of θ, as on the scale twin m = 1. Other rules are evaluated at θ itself. ``th`` holds
    the θ (or θ/m) of the evaluation in its first L·d rows; ``q``: a (5, W) block for the scaled
    parameters.

    With ``arc`` too, the clock is the arc length s of u with the floor ``r0`` (per lane):
    :math:`d\tau/ds=1/(\lVert\dot u\rVert+r_0)`, carried in the state after u, and out =
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
