"""The engine's entry points from Python: :func:`run_many` (a batch of runs on threads) and
:func:`fields` (the vector field at given states)."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._cores import usable_cores
from ._chunk import W, _run_chunk


def run_many(y0s, params, atols, ts, t1, *, solver, kind, per_layer, X, Y, loss, rescaled,
             clock, L, d, rtol, max_steps, collapse, escape, loss_tol, chunk=None, threads=None,
             tracking=None, logs=False, r0=None):
    """Integrate every row of ``y0s`` (N, ns) on ``threads`` threads (default: one per usable core,
    :func:`flows._cores.usable_cores`);
    validated inputs only (:func:`flows.solve_many`).

    ``params`` (N, 5): each trajectory's rule parameters (:data:`flows._rules.PARAMS`);
    ``atols`` (N,): absolute tolerances; ``t1``: the end time, a number or one per trajectory
    (N,); ``collapse``, ``escape`` (each a number or (N,)), ``loss_tol``: the event thresholds, or
    0 for none. ``tracking``: None, or a dict that follows j† along each run (the analysis's
    runs, :mod:`flows._tracking`): ``lead`` (N,) the leader at the start (updated in place),
    ``lost`` (N,) bool (updated in place), ``q0`` (N, d) and ``guard`` (the q-order guard of
    :func:`flows._engine._leader._order_kept`), ``slots``, ``samples`` and ``tie_ulps``.
    ``logs``: integrate u = log θ (every θ >= 0, no clock) under θ's error control,
    atol + rtol·θ, read in u. ``r0`` (with ``logs``): integrate on the arc-length clock of
    :func:`flows._engine._vector_field._log_field` with that floor (a number or (N,)); ``y0s`` then
    ends with τ = 0 and ``t1`` is a budget of arc length.
    Returns NumPy arrays:
    ``saved`` (N, T, ns), ``y_end`` (N, ns), ``status``, ``t_end``, ``n_steps``,
    ``n_rejected`` (N,), ``f0`` (N, ns) the field at the start in the integration variables
    (NaN for a start that had converged), and with ``tracking`` the switches ``sw_t``, ``sw_j``
    (N, slots) and their count ``sw_n`` (N,).
    """
    N, ns = y0s.shape
    T = ts.shape[0]
    threads = usable_cores() if threads is None else threads
    if chunk is None:  # a few chunks a thread, for balance; a lane group fills each
        chunk = max(2 * W, -(-N // (8 * threads)))
    chunks = np.r_[np.arange(0, N, chunk), N].astype(np.int64)
    out = dict(
        saved=np.empty((N, T, ns)), y_end=np.empty((N, ns)), status=np.empty(N, np.int64),
        t_end=np.empty(N), n_steps=np.empty(N, np.int64), n_rejected=np.empty(N, np.int64),
        f0=np.full((N, ns), np.nan),
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
    runs = (own(y0s), own(params), own(atols), own(ts), full(t1), full(collapse), full(escape),
            full(1.0 if r0 is None else r0))  # fmt: skip
    flow = (int(solver), int(kind), bool(per_layer), own(X), own(Y), int(loss), bool(rescaled),
            bool(clock), int(L), int(d), bool(logs), r0 is not None)  # fmt: skip
    tolerances = (float(rtol), int(max_steps), float(loss_tol))
    follow = (bool(tracking), int(tr.get("samples", 1)), float(tr.get("tie_ulps", 0.0)),
              bool(tr.get("guard", False)), own(q0), lead, lost, out["sw_t"], out["sw_j"],
              out["sw_n"])  # fmt: skip
    outputs = (out["saved"], out["y_end"], out["status"], out["t_end"], out["n_steps"],
               out["n_rejected"], out["f0"])  # fmt: skip
    args = (runs, flow, tolerances, follow, outputs)
    bounds = list(zip(chunks[:-1], chunks[1:], strict=True))
    if threads == 1 or len(bounds) == 1:
        for lo, hi in bounds:
            _run_chunk(lo, hi, *args)
    else:  # the compiled loop releases the GIL: one Python thread per core
        with ThreadPoolExecutor(min(threads, len(bounds))) as pool:
            list(pool.map(lambda b: _run_chunk(b[0], b[1], *args), bounds))
    return out


def fields(ys, params, *, kind, per_layer, X, Y, loss, rescaled, clock, L, d):
    """The engine's vector field at each row of ``ys`` (N, ns): the first stage of a run from
    each row with a step budget of 0 (``f0`` of :func:`run_many`, the loop's own evaluation;
    no other compiled function). Such a run still takes its first step (six more evaluations
    of the field) before the budget ends it; the step is discarded."""
    ys = np.ascontiguousarray(ys, float)
    n = ys.shape[0]
    return run_many(
        ys, params, np.ones(n), np.zeros(0), 1.0, solver=0, kind=kind, per_layer=per_layer, X=X,
        Y=Y, loss=loss, rescaled=rescaled, clock=clock, L=L, d=d, rtol=1e-8, max_steps=0,
        collapse=0.0, escape=0.0, loss_tol=0.0, threads=1,
    )["f0"]  # fmt: skip
