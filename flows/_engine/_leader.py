r"""The leading index :math:`j^\dagger=\arg\max_j|\beta_j|` along a lane's run: the hooks of
the analysis's pass policy inside the loop (:mod:`flows._tracking`, :func:`analysis._drive.drive`).

Each accepted step is sampled on its interpolant; a change of leader by the tie rule of
:func:`flows._tracking.tie_margin` is located by bisection to the events' tolerance and
recorded (time, new index); a cheap lane-wide prefilter (:func:`_may_switch`) skips the
steps where no index comes near the leader. With the q-order guard, a change that the exact
flow forbids (:func:`_order_kept`) marks the run lost instead.
"""

import math

import numpy as np

from .._events import EVENT_RTOL
from .._tracking import TIE_ULPS
from ._events import _ROOT_STEPS
from ._jit import jit
from ._tableau import _interpolate, _tsit5_weights

_EPS = float(np.finfo(np.float64).eps)


@jit
def _log_size(v, j, L, d, logs):
    """log|β_j| = Σ_l log|θ_lj| of the state v (flat, (ns,); ``logs``: v holds log θ)."""
    s = 0.0
    for lay in range(L):
        s += v[lay * d + j] if logs else math.log(abs(v[lay * d + j]))
    return s


@jit
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


@jit
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


@jit
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


@jit
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
                if abs(hi - lo) < span_atol + EVENT_RTOL * abs(hi):
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


@jit
def _may_switch(y, K, flag, traj, lead, samples, L, d, logs, blk, size, top):
    """flag[w] = 1 where j† may change inside lane w's step (Tsit5), else 0, in lane loops: at
    the samples of :func:`_track` another |β_j| exceeds the leader's by more than TIE_ULPS ulps (a
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
                top[w] = sa + TIE_ULPS * _EPS
            else:
                top[w] = sa * (1.0 + TIE_ULPS * _EPS)
                if not (sa > 1e-290 and sa < 1e290):
                    flag[w] = 1.0
        for j in range(d):
            for w in range(nw):
                v = size[j, w]
                flag[w] = 1.0 if (v > top[w] or v != v) else flag[w]
