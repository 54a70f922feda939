r"""The engine's loop: one chunk of trajectories, :data:`flows._engine._lanes.W` at a time.

Every trajectory runs its own explicit Runge–Kutta loop, with its own step sizes, accepted
and rejected steps, saving times and stopping event; nothing is shared between trajectories
but the arithmetic units. Each iteration of the loop

1. fills the idle lanes with the next trajectories (:func:`_start_lane`);
2. takes one step on every lane: the stages :math:`K_s=h f(y+\sum_r a_{sr}K_r)` in flat
   loops over the (ns, W) blocks (:mod:`flows._engine._tableau`, :mod:`flows._engine._field`),
   the error norms (:func:`flows._engine._controller._error_norms`) and the event condition's
   sign at every step's end (:mod:`flows._engine._events`);
3. per lane: the controller's decision (:func:`flows._engine._controller._control`), the
   saved states (:mod:`flows._engine._saving`), the event, j† (:mod:`flows._engine._leader`),
   and the end of the trajectory, after which the lane is idle until refilled.
"""

import math

import numpy as np

from ._controller import _control, _error_norms, _first_step, _given_up
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
from ._field import _broadcast, _exp, _log_field, _scratch
from ._jit import jit, loop
from ._lanes import (
    ATOL,
    COLLAPSE,
    END,
    ESCAPE,
    FACTOR,
    FLOOR,
    GOING,
    NORM0,
    R0,
    REJECTED,
    RUN,
    SAVED,
    SCALE,
    SPAN,
    STALLS,
    STEPS,
    T0,
    T1,
    TRAJ,
    H,
    W,
    _new_lanes,
)
from ._leader import _may_switch, _track
from ._norms import _norm
from ._saving import _blank, _finish, _save_steps
from ._tableau import _A, _E, _interpolate, _stage

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
    ``outputs``: (saved, yend, status, t_end, n_steps, n_rejected), whose rows first..last-1
    are written. With ``logs`` the state is u = log θ (every θ > 0; no clock): the inputs and
    outputs are θ. With ``arc`` too, the integration variable is the arc length s of
    :func:`flows._engine._field._log_field` (floor ``r0s[n]``), τ is the state's last entry
    (0 in ``y0s``), ``t1s`` are budgets of s, and ``t_end`` and the switch times are τ."""
    y0s, params, atols, ts, t1s, collapses, escapes, r0s = runs
    solver, kind, per_layer, X, Y, loss, rescaled, clock, L, d, logs, arc = flow
    rtol, max_steps, loss_tol = tolerances
    track, samples, tie_ulps, guard, q0, lead, lost, sw_t, sw_j, sw_n = tracking
    saved, yend, status, t_end, n_steps, n_rejected = outputs
    ns = y0s.shape[1]
    Ld = L * d
    A, E = _A[solver], _E[solver]
    # the lanes: W, or fewer for a smaller chunk (a lone run does not pay for W - 1 idle lanes)
    nw = min(W, last - first)
    lane, count = _new_lanes(nw)
    # views of the record's rows that the lane-wide loops read
    traj, h, atol, norm0 = count[TRAJ], lane[H], lane[ATOL], lane[NORM0]
    coll, esc, r0, sc = lane[COLLAPSE], lane[ESCAPE], lane[R0], lane[SCALE]
    # the blocks (ns, nw): the state y, the stages' point yi (the step's end after the last
    # stage), f(y) and f(yi), the stages K; the field's scratch
    CX = _broadcast(X, Y, d, nw)
    y, S, V, Mg = _scratch(ns, Ld, d, X.shape[0], nw)
    yi = np.zeros((ns, nw))
    fs = np.zeros((ns, nw))
    f = np.zeros((ns, nw))
    K = np.zeros((7, ns, nw))
    p = np.zeros((5, nw))
    mu = X[0] * Y[0]
    qs = np.zeros(d)
    # lane scratch of one step
    nan_y1 = np.zeros(nw)
    bad = np.zeros(nw)
    err = np.zeros(nw)
    going = np.zeros(nw)
    acc = np.ones(nw)
    flag = np.ones(nw)
    top = np.ones(nw)
    tmp = np.zeros(ns)
    tmp2d = np.zeros(ns)
    th = np.ones((ns, nw))
    thb = np.ones((ns, nw))
    pq = np.zeros((5, nw))
    tau = Ld if arc else -1  # the slot of τ in the state
    blk = np.ones((ns, nw))
    sizes = np.ones((d, nw))
    prefilter = track and solver == 0
    values = np.zeros(4)
    hb = np.zeros((ns, nw))
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
            t1 = t1s[n]
            _start_lane(lane, count, w, atols[n], _norm(th, w, Ld), t1, collapses[n], escapes[n],
                        r0s[n])  # fmt: skip
            _blank(saved, n)
            lane[GOING, w] = _going(th, w, X, Y, loss, L, d, norm0[w], coll[w], esc[w], loss_tol)
            if loss_tol > 0.0 and not _mean_loss(th, w, X, Y, loss, L, d) > loss_tol:
                # a start at or below loss_tol has converged at t = 0 (no step, no event)
                for i in range(ns):
                    yend[n, i] = y[i, w]
                for k in range(ts.shape[0]):
                    if ts[k] <= 0.0:
                        for i in range(ns):
                            saved[n, k, i] = y[i, w]
                _finish(outputs, n, _CONVERGED, 0.0, ts, 0.0, count, w)
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
            h[w] = lane[T1, w] - lane[T0, w] if traj[w] >= 0 else 0.0
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
        # the event condition's sign at every step's end (with logs: θ = c·exp(yi))
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
            e = math.sqrt(err[w]) / math.sqrt(ns)
            keep, step_t0, step_t1 = _control(lane, count, w, e, bad[w] != 0.0, y)
            code = _RUNNING
            te = 0.0
            if keep:
                _save_steps(saved, n, ts, count, w, solver, step_t0, step_t1, y, yi, K, ns, logs,
                            Ld, sc[w])  # fmt: skip
                new = going[w]
                t_hi = step_t1
                if lane[GOING, w] > 0.0 and new <= 0.0:
                    te = _root(solver, step_t0, step_t1, y, yi, K, w, ns, tmp, values, X, Y,
                               loss, L, d, norm0[w], coll[w], esc[w], loss_tol, lane[SPAN, w],
                               logs, sc[w])  # fmt: skip
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
                           samples, tie_ulps, lane[SPAN, w], n, lead, lost, guard, q0, mu, sw_t,
                           sw_j, sw_n, logs, tau, L * math.log(sc[w]))  # fmt: skip
                lane[GOING, w] = new
                for i in range(ns):
                    y[i, w] = yi[i, w]
                    f[i, w] = fs[i, w]  # first same as last: f(y1) is the last stage's
            if code == _RUNNING:
                te = lane[T0, w]
                if _given_up(count, w):
                    code = _NONFINITE
                elif lane[T0, w] >= lane[END, w]:
                    code = _OK
                elif count[STEPS, w] >= max_steps:
                    code = _MAXED
                if code != _RUNNING:
                    for i in range(ns):
                        yend[n, i] = sc[w] * math.exp(y[i, w]) if logs and i < Ld else y[i, w]
                    if not _representable(yend[n].reshape((ns, 1)), 0, L, d):
                        code = _NONFINITE
            if code != _RUNNING:
                _finish(outputs, n, code, yend[n, tau] if arc else te, ts, te, count, w)
                traj[w] = -1
                active -= 1
                for i in range(ns):  # a benign idle lane (no subnormals, no NaN)
                    y[i, w] = 0.0 if logs else 1.0
                    f[i, w] = 0.0


@jit
def _start_lane(lane, count, w, atol, norm0, t1, collapse, escape, r0):
    """Lane w's record at the start of a trajectory: to ``t1`` from a start of norm ``norm0``,
    with its tolerance and thresholds, the first step [0, min(0.01, t1)], the counts at 0."""
    lane[ATOL, w] = atol
    lane[NORM0, w] = norm0
    lane[END, w] = t1
    fl = t1
    for _ in range(100):  # diffrax's clipping of a step that ends within 100 ulps of t1
        fl = np.nextafter(fl, -np.inf)
    lane[FLOOR, w] = fl
    lane[SPAN, w] = _span(t1)
    lane[COLLAPSE, w] = collapse
    lane[R0, w] = r0
    lane[ESCAPE, w] = escape
    lane[T0, w] = 0.0
    lane[T1, w] = _first_step(t1)
    lane[FACTOR, w] = 1.0
    for r in (RUN, STALLS, STEPS, REJECTED, SAVED):
        count[r, w] = 0
