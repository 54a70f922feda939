r"""The engine's loop: one chunk of trajectories, :data:`W` at a time.

Every trajectory runs its own explicit Runge–Kutta loop, with its own step sizes, accepted
and rejected steps, saving times and stopping event; nothing is shared between trajectories
but the arithmetic units. A thread runs :data:`W` trajectories side by side in the lanes of
one loop, so that each arithmetic instruction of a stage serves :data:`W` of them (SIMD), and a
lane whose trajectory ends takes the next one at once. Lane w's state is column w of the
blocks (the state y, the stages K, ...) and entry w of the per-lane arrays (its step
[tprev, tnext], its thresholds, the controller's factor, its counts). Each iteration

1. fills the idle lanes with the next trajectories;
2. takes one step on every lane: the stages :math:`K_s=h f(y+\sum_r a_{sr}K_r)` in flat
   loops over the (ns, W) blocks (:mod:`flows._engine._tableau`,
   :mod:`flows._engine._vector_field`), the error norms
   (:func:`flows._engine._controller._error_norms`) and the event condition's sign at every
   step's end (:mod:`flows._engine._events`);
3. per lane: the controller's decision (:func:`flows._engine._controller._propose` and
   diffrax's handling of the interval's end and of non-finite errors), the saved states (the
   step's interpolant at the saving times it covers), the event, j†
   (:mod:`flows._engine._leader`), and the end of the trajectory (its status, end time and
   counts, NaN at the saving times past it), after which the lane is idle until refilled.
"""

import math

import numpy as np

from .._options import NONFINITE_REJECTIONS, NONFINITE_STALLS, STALL_STEP
from ._controller import _COEFF2, _FACTORMIN, _FIRST_STEP, _error_norms, _propose
from ._events import (
    _CONVERGED,
    _MAXED,
    _NONFINITE,
    _OK,
    _event_status,
    _going,
    _going_lanes,
    _mean_loss,
    _representable,
    _root,
    _span,
)
from ._jit import loop
from ._leader import _may_switch, _track
from ._norms import _norm
from ._tableau import _A, _E, _interpolate, _stage
from ._vector_field import _broadcast, _exp, _log_field, _scratch

#: Trajectories per thread, side by side in the lanes of one loop.
W = 32
_RUNNING = -1  # the status of a lane whose run goes on


@loop
def _run_chunk(first, last, runs, flow, tolerances, tracking, outputs):
    """Integrate trajectories first..last-1, W at a time (fewer in a smaller chunk), each lane
    refilled when its trajectory ends.

    ``runs``: the per-trajectory inputs (y0s, params, atols, ts, t1s, collapses, escapes,
    r0s): trajectory n runs from ``y0s[n]`` to ``t1s[n]``, collapsing at ``collapses[n]`` and
    escaping at ``escapes[n]`` (0: none), saving at ``ts``. ``flow``: (solver, kind,
    per_layer, X, Y, loss, rescaled, clock, L, d, logs, arc). ``tolerances``: (rtol,
    max_steps, loss_tol). ``tracking``: (track, samples, tie_ulps, guard, q0, lead, lost, sw_t,
    sw_j, sw_n), j† followed with ``track`` (:func:`flows._engine._leader._track`).
    ``outputs``: (saved, yend, status, t_end, n_steps, n_rejected, f0), whose rows
    first..last-1 are written (``f0``: the field at the start, in the integration variables).
    With ``logs`` the state is u = log θ (every θ > 0; no clock): the inputs and outputs are θ.
    With ``arc`` too, the integration variable is the arc length s of
    :func:`flows._engine._vector_field._log_field` (floor ``r0s[n]``), τ is the state's last
    entry (0 in ``y0s``), ``t1s`` are budgets of s, and ``t_end`` and the switch times are τ."""
    y0s, params, atols, ts, t1s, collapses, escapes, r0s = runs
    solver, kind, per_layer, X, Y, loss, rescaled, clock, L, d, logs, arc = flow
    rtol, max_steps, loss_tol = tolerances
    track, samples, tie_ulps, guard, q0, lead, lost, sw_t, sw_j, sw_n = tracking
    saved, yend, status, t_end, n_steps, n_rejected, f0 = outputs
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
    # each lane's state, entry w of these arrays, read and written in the loop itself (a record
    # of named rows, and helpers that update a lane's entries, made the loop slower:
    # benchmarks/engine.py)
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
            span[w] = _span(t1)
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
                f0[n, i] = fs[i, w]
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
        # y1 = yi (the last stage's point); the error estimate's scaled norms
        _error_norms(E, K, y, yi, err, bad, nan_y1, atol, sc, rtol, logs, Ld, tau, clock)
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
            keep, dt, inv = _propose(e, hw, prev_factor[w])
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
            if failed and abs(hw) <= STALL_STEP * abs(step_t0):
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
                while k_save[w] < T and ts[k_save[w]] <= step_t1:  # the saved states
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
                if run[w] >= NONFINITE_REJECTIONS or stalls[w] >= NONFINITE_STALLS:
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
