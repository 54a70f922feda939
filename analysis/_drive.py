r"""The engine driver: many single-example runs classified on the numba engine, pass after pass.

A *run* is the rescaled flow of one example :math:`\{(\mu,+1)\}` from one balanced start,
continued pass after pass until the certificates decide it (docs/theory.md §13). Two drivers
run the same policy:

* :func:`analysis._run.run` (JAX, ``lax.while_loop``): jit/vmap-able and differentiable, for
  every method (exact ℓ∞-SAM's Filippov flow, LE-SAM schedules σ(t)) and any device;
* :func:`drive` (this module): the numba engine (:func:`flows.internal.engine_run`), one
  compiled adaptive loop per trajectory on the CPU, for GD, ℓ2-SAM, smoothed ℓ∞-SAM and LE-SAM
  with a constant σ. Every pass of every undecided run is one batched engine call; inside it
  each run follows :math:`j^\dagger` through every accepted step (read at
  :data:`flows.internal.SAMPLES_PER_STEP` points of the step's interpolant by the tie rule of
  :func:`flows.internal.tie_margin`, each change located by bisection on the interpolant to the
  events' tolerance, the order guard of :func:`analysis._certify.keeps_invariant_order`
  applied there). No dense output is kept.

The policy is written once, in :mod:`analysis._run`: :func:`~analysis._run.begin` (pass 0,
the certificates of the start), :func:`~analysis._run.thresholds` (each pass's budget and
collapse threshold, relative to the run's first start), :func:`~analysis._run.conclude` (the
certificates and :func:`analysis._regime.decide` at a pass's end) and
:func:`~analysis._run.finish`. They take any leading batch shape and compute in the
namespace of their inputs (:mod:`analysis._xp`): this module evaluates them eagerly in NumPy on
the whole batch between the engine's passes, so that no JAX program is traced or compiled on this
path; the start's rates come from the engine's own field
(:func:`flows.internal.engine_velocity`).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import flows
from flows.internal import (
    SAMPLES_PER_STEP,
    TIE_ULPS,
    engine_run,
    engine_supports,
    engine_velocity,
)

from ._certify import bound_of, invariant_leader, q_order_applies, time_scale
from ._options import RunOptions
from ._problem import growth_rates
from ._regime import start_atol
from ._run import begin, conclude, finish, run, thresholds


def uses_engine(method, backend: str) -> bool:
    """Whether runs of ``method`` go to the numba engine: ``backend="numba"``, or ``"auto"``
    (the default) wherever the engine runs the method (:func:`flows.internal.engine_supports`);
    ``"numba"`` with a method it cannot run is refused, naming ``backend``."""
    if backend == "jax":
        return False
    if engine_supports(method):
        return True
    if backend == "numba":
        raise ValueError(
            "`backend`: the numba engine runs GD, L2SAM, LinfSAM(rho, delta) and LESAM with a "
            f"constant sigma; got {method!r}: use backend='jax' (or 'auto')."
        )
    return False


#: The arc-length clock's floor at L >= 3, relative to the field's rate unit 1/time_scale: far
#: below the field at the degenerate saddle, where a run near α_c lingers for τ ~ 1e29 with the
#: field ~1e-30 of its rate; not 0, so that dτ/ds stays finite at an equilibrium (where a pass
#: then ends at its budget after τ ~ 1e30 time units). At L <= 2 every saddle is hyperbolic (a run
#: lingers for τ ~ log(1/ε) time units only) and the floor is the rate unit itself, which keeps
#: the turn at the saddle on the τ clock.
_ARC_FLOOR = 1e-30


def _parameters(method, params, n):
    """Every numeric rule parameter of ``method`` (a template, or a method stacked with
    parameters of shape (n,)) as an array of shape (n,), ``params`` overriding."""
    values = {
        k: v for k, v in method.rule_params().items() if v is not None and not callable(v)
    }
    values.update(params or {})
    return {k: np.broadcast_to(np.asarray(v, np.float64), (n,)) for k, v in values.items()}


def _batched(method, values, n):
    """The method with each parameter of ``values`` as an array of shape (n,) and every other
    array field broadcast to a leading axis n (mapped by ``eqx.filter_vmap``)."""
    for name, v in values.items():
        method = eqx.tree_at(lambda m, name=name: getattr(m, name), method, np.asarray(v))
    arrays, static = eqx.partition(method, eqx.is_array)

    def wide(x):  # on the host: no XLA program per shape
        x = np.asarray(x)
        return x if x.ndim and x.shape[0] == n else np.broadcast_to(x, (n, *x.shape))

    return eqx.combine(jax.tree.map(wide, arrays), static)


def drive(method, data, theta0, *, options: RunOptions, need: str = "path", params=None,
          t1=None, workers=None) -> dict:
    r"""Classify the runs from each start ``theta0[n]`` on the numba engine (validated inputs).

    The batch form of :func:`analysis._run.run` (same policy, same result), with the method's
    parameters ``params[name][n]`` (a number or an array of shape (N,) per name, as
    :func:`flows.solve_many`; ``method`` may also hold them stacked, shape (N,)). Returns
    NumPy arrays with a leading axis N: ``code``, ``first``, ``last``, ``n_switches``,
    ``times`` and ``after`` (N, ``max_switches``: each switch's time and new index),
    ``passes``, ``status``, ``t_end``, ``leader``, ``t_real`` (NaN: no schedule runs here)
    and ``theta`` (N, L, d), the state at the end. ``t1``: a fixed τ budget of every pass
    (default :func:`analysis._regime.budget`); ``workers``: the engine's threads.
    """
    theta0 = np.ascontiguousarray(theta0, np.float64)
    n, depth, d = theta0.shape
    values = _parameters(method, params, n)
    methods = _batched(method, values, n)
    loss, slots = options.loss, options.max_switches
    track = need in ("path", "direct")
    solver = options.solver(depth)
    mu = np.asarray(data.X, np.float64)[0]
    target = int(np.argmax(mu))
    bound = bound_of(methods)
    code, first, leader = _begin(method, values, methods, data, theta0, loss=loss, need=need)
    with _quiet():
        lead = np.array(invariant_leader(methods, theta0, mu))
    lost = np.zeros(n, bool)
    # The default absolute tolerance is far below every weight (start_atol): the error control
    # is relative for every weight. The engine then integrates u = log θ (where every θ > 0),
    # in which exponential growth and decay are linear and that control is the plain one.
    logs = options.atol is None
    if options.atol is None:  # relative to the run's first start, kept for every pass
        atols = np.asarray(start_atol(None, theta0), np.float64)
    elif isinstance(options.atol, str):  # "auto": relative to each pass's start
        atols = None
    else:
        atols = np.full(n, float(options.atol))
    q0 = mu * np.min(theta0, axis=1) ** max(depth - 2, 0)
    guard = q_order_applies(method, depth)  # exact ℓ∞-SAM never runs here
    floor = _ARC_FLOOR if depth >= 3 else 1.0
    theta = theta0.copy()
    other = first != target
    t_end = np.zeros(n)
    passes = np.zeros(n, np.int64)
    level = np.zeros(n, np.int64)
    spent = np.zeros(n, np.int64)
    status = np.zeros(n, np.int64)
    last = first.copy()
    count = np.zeros(n, np.int64)
    times = np.full((n, slots), np.nan)
    after = np.full((n, slots), -1, np.int64)
    ts = np.zeros(0)
    while True:
        idx = np.flatnonzero((code < 0) & (passes < options.max_passes))
        if idx.size == 0:
            break
        # the policy on the undecided runs only (each pass decides most of the rest)
        budget, collapse, escape, rate = (np.full(n, np.nan) for _ in range(4))
        b = bound[idx] if np.ndim(bound) else bound
        with _quiet():
            budget[idx], collapse[idx], escape[idx] = thresholds(
                options, theta0[idx], theta[idx], b, mu, spent[idx], level[idx], t1=t1
            )
            rate[idx] = 1.0 / time_scale(theta[idx], mu, b)
        # u = log θ where no weight is negative (one at 0, e.g. underflowed in a deep decay, is
        # u = -inf and stays there); else θ, with the same relative tolerance
        positive = np.all(theta[idx] >= 0, axis=(1, 2))
        for part, in_logs in ((idx[positive], logs), (idx[~positive], False)):
            if not part.size:
                continue
            # on the arc-length clock of u: the pass's budget is t1·rate of arc length (the state's
            # change, which its steps follow), not of τ: a run that lingers where the field is
            # ~1e-30 of its rate (L >= 3 near α_c) crosses that stretch in a few steps of one
            # pass, with τ carried in the state (dτ/ds = 1/(|du/dτ| + floor·rate))
            tracking = None
            if track:
                tracking = dict(lead=last[part].copy(), lost=lost[part].copy(), q0=q0[part],
                                guard=guard, slots=slots, samples=SAMPLES_PER_STEP,
                                tie_ulps=float(TIE_ULPS))  # fmt: skip
            out = engine_run(
                method, {k: v[part] for k, v in values.items()}, data, theta[part], ts=ts,
                t1=budget[part] * rate[part] if in_logs else budget[part], rescaled=True,
                loss=loss, options=solver, atols=None if atols is None else atols[part],
                collapse=collapse[part], escape=escape[part], workers=workers,
                tracking=tracking, logs=in_logs, r0=rate[part] * floor if in_logs else None,
            )  # fmt: skip
            theta[part] = out["y_end"][:, : depth * d].reshape(-1, depth, d)
            status[part] = out["status"]
            if track:
                _record(part, out, t_end, count, times, after, slots)
                recorded = np.arange(slots)[None, :] < np.minimum(out["sw_n"], slots)[:, None]
                other[part] |= np.any(recorded & (out["sw_j"] != target), axis=1)
                last[part] = tracking["lead"]
                lost[part] = tracking["lost"]
            t_end[part] += out["t_end"]
        passes[idx] += 1
        level[idx] += status[idx] == flows.Status.ESCAPED
        spent[idx] += status[idx] == flows.Status.OK
        with _quiet():
            code[idx], leader[idx], lost[idx] = conclude(
                rows(methods, idx), mu, theta0[idx], theta[idx], status[idx], lost=lost[idx],
                other=other[idx], first=first[idx], need=need,
            )  # fmt: skip
    code, last, appended, decided = finish(code, lost=lost, last=last, lead=lead, track=track)
    out = dict(
        code=code, first=first, last=last, n_switches=count + appended, times=times,
        after=after, passes=passes, status=status, t_end=t_end,
        leader=np.where(decided, leader, -1), t_real=np.full(n, np.nan), theta=theta,
    )  # fmt: skip
    return out


def rows(methods, idx):
    """The methods of the runs ``idx`` of a batch of methods (every array field with a leading
    axis, as :func:`_batched` makes them)."""
    arrays, static = eqx.partition(methods, eqx.is_array)
    return eqx.combine(jax.tree.map(lambda x: np.asarray(x)[idx], arrays), static)


def _quiet():
    """The policy in NumPy, on a whole batch: log 0 = -inf and inf - inf = NaN, as in JAX."""
    return np.errstate(all="ignore")


def _begin(method, values, methods, data, theta0, *, loss, need):
    """Pass 0 of each run (:func:`analysis._run.begin`) in NumPy: ``(code, first, leader)``,
    j†(0+) from the engine's own field at the start (:func:`flows.internal.engine_velocity`)."""
    mu = np.asarray(data.X, np.float64)[0]
    with _quiet():
        rates = None
        if need != "escape":  # j† is tracked: its tie rule reads the rates at the start
            v = engine_velocity(method, values, data, theta0, rescaled=True, loss=loss)
            rates = growth_rates(v, theta0)
        return tuple(np.array(x) for x in begin(methods, mu, theta0, rates, need=need))


def start_codes(method, data, theta0, *, loss, need, params=None):
    """:func:`analysis._run.start_code` of each start ``theta0`` (N, L, d) of an engine method
    (``params`` as :func:`drive`), in NumPy: the code the start alone decides, else -1."""
    theta0 = np.ascontiguousarray(theta0, np.float64)
    values = _parameters(method, params, theta0.shape[0])
    methods = _batched(method, values, theta0.shape[0])
    return _begin(method, values, methods, data, theta0, loss=loss, need=need)[0]


def _record(idx, out, t_end, count, times, after, slots):
    """Append each run's switches of this pass (times offset by the run's τ so far)."""
    for k in np.flatnonzero(out["sw_n"] > 0):
        n = idx[k]
        m = min(int(out["sw_n"][k]), slots)
        start = int(count[n])
        room = max(0, min(m, slots - start))
        times[n, start : start + room] = t_end[n] + out["sw_t"][k, :room]
        after[n, start : start + room] = out["sw_j"][k, :room]
        count[n] += out["sw_n"][k]


@eqx.filter_jit
def _run_batch(methods, data, theta0, options, need, t1):
    """:func:`analysis._run.run` vmapped over (method, start)."""
    one = lambda m, th: run(m, data, th, options=options, need=need, t1=t1)  # noqa: E731
    return eqx.filter_vmap(one)(methods, theta0)  # a schedule σ(t) is a function: not mapped


def classify(method, data, theta0, *, options: RunOptions, need: str = "path", params=None,
             t1=None, workers=None) -> dict:
    r"""The runs from each start ``theta0[n]`` (N, L, d), classified by the driver that
    ``options.backend`` selects (:func:`uses_engine`): :func:`drive` on the numba engine, or
    :func:`analysis._run.run` vmapped (JAX). Validated inputs; ``method`` a template whose
    parameters ``params[name]`` (shape (N,)) replace, or a method stacked with parameters of
    shape (N,). Returns the NumPy arrays of :func:`drive`."""
    if uses_engine(method, options.backend):
        return drive(method, data, theta0, options=options, need=need, params=params, t1=t1,
                     workers=workers)  # fmt: skip
    theta0 = np.asarray(theta0, np.float64)
    n = theta0.shape[0]
    values = {k: np.broadcast_to(np.asarray(v, float), (n,)) for k, v in (params or {}).items()}
    methods = _batched(method, values, n)
    out = _run_batch(methods, data, jnp.asarray(theta0), options, need, t1)
    return {k: np.asarray(v) for k, v in out.items()}
