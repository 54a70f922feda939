r"""Euclidean norms of a lane's state without under- or overflow in the squares: scaled by
the largest entry, :math:`\lVert y\rVert=s\,\lVert y/s\rVert`, :math:`s=\max|y|` (1 where
y = 0). The rules' :math:`\lVert g\rVert` (:mod:`flows._engine._vector_field`) and the events'
:math:`\lVert\theta\rVert` (:mod:`flows._engine._events`) read them.
"""

import math

from ._jit import jit


@jit
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


@jit
def _norm(y, w, n):
    """‖θ‖₂ of lane w (:func:`_norm_parts`)."""
    s, r = _norm_parts(y, w, 0, n)
    return s * r


@jit
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
